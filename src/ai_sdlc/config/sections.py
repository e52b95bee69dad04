"""One typed model per section of `.ai-sdlc/config.yaml`: its keys, types, bounds and defaults.

The models are the schema: `SCHEMA` (every dotted key with its check and default), the
defaults of the effective config, the messages for a bad value and `docs/configuration.md`
are all read from them. `resilience` is modelled in `config.resilience`; each provider's own
`ai.<provider>` settings in `providers.settings`.
"""

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ai_sdlc.config.fields import MAX_RECOVERY, MAX_SECONDS
from ai_sdlc.providers.settings import ApiSettings, ClaudeSettings, CommandSettings, ProviderName
from ai_sdlc.settingkey import guarded, key

_Seconds = Annotated[float, Meta(gt=0, le=MAX_SECONDS)]
_SECONDS = f"a number of seconds > 0 and <= {MAX_SECONDS}"
_Count = Annotated[int, Meta(ge=0, le=MAX_RECOVERY)]
_AtLeastOne = Annotated[int, Meta(ge=1)]
_Rate = Annotated[float, Meta(ge=0, le=1)]
_Positive = Annotated[float, Meta(gt=0)]
_BOOL = "true or false"


class _Section(msgspec.Struct, forbid_unknown_fields=True):
    """A config section: unknown keys are errors."""


class AiSection(_Section):
    """`ai`: which provider and model; the providers' own settings beneath."""

    provider: Annotated[
        ProviderName | None,
        key(
            "scripted (offline) | dry-run | openai | anthropic | claude | command; null: "
            "AI_SDLC_PROVIDER, then auto-detect, else the run stops (exit 4)"
        ),
    ] = None
    model: Annotated[
        str | None,
        key(
            "model name for every provider; null: the provider's default",
            expected="a model name or null",
        ),
    ] = None
    openai: Annotated[ApiSettings | None, key("OpenAI-compatible API", materialize=False)] = None
    anthropic: Annotated[ApiSettings | None, key("Anthropic API", materialize=False)] = None
    claude: Annotated[ClaudeSettings | None, key("Claude Code", materialize=False)] = None
    command: Annotated[CommandSettings | None, key("any CLI agent", materialize=False)] = None
    tools: Annotated[
        dict[str, Any] | None,
        key("settings of the agent tools of the API providers", materialize=False),
    ] = None
    max_turns: Annotated[
        _AtLeastOne | dict[str, _AtLeastOne] | None,
        key(
            "agent turns per phase (one number, or phase -> number); default 40",
            materialize=False,
            expected="an integer >= 1, a mapping phase -> integer, or null",
        ),
    ] = None
    timeouts: Annotated[
        dict[str, _Positive] | None,
        key(
            "seconds per phase (phase or `default` -> seconds); the lower of it and "
            "limits.phase_timeout applies",
            materialize=False,
            expected="a mapping phase -> seconds > 0, or null",
        ),
    ] = None
    max_output_tokens: Annotated[
        _AtLeastOne | None,
        key("answer size asked of the API per call; default 8192", materialize=False),
    ] = None
    prices: Annotated[
        dict[str, dict[str, float]] | None,
        key(
            "model -> {input_per_mtok, output_per_mtok} in USD, to turn tokens into cost",
            materialize=False,
            type_name="dict[str, {input_per_mtok, output_per_mtok}] | null",
        ),
    ] = None


class VerifySection(_Section):
    """`verify`: the project's own build and tests, the judge of every story."""

    build: Annotated[
        str | None,
        key(
            'build command line, run without a shell (e.g. "make build")',
            check="command_line",
            expected="a command line with balanced quotes, or null",
        ),
    ] = None
    test: Annotated[
        str | None,
        key(
            'test command line, run without a shell (e.g. "pytest -q")',
            check="command_line",
            expected="a command line with balanced quotes, or null",
        ),
    ] = None
    timeout: Annotated[_Seconds, key("seconds per command", check="finite", expected=_SECONDS)] = (
        600
    )
    max_parallel: Annotated[
        Annotated[int, Meta(ge=1, le=256)] | None,
        key("verification commands at once across a parallel run; null: CPU count"),
    ] = None
    baseline: Annotated[
        bool, key("verify the story's untouched base first (floor; stop if it cannot run)")
    ] = True
    protected: Annotated[
        list[str] | None,
        key(
            "test files kept as they were (globs); null: the detected test files",
            expected='a list of glob patterns (e.g. ["tests/", "*_test.go"]), [] for none, or null',
        ),
    ] = None
    junit: Annotated[
        str | None,
        key(
            "a JUnit XML report the test command writes, read for the test counts",
            expected="a path (relative to the project) of a JUnit XML report, or null",
        ),
    ] = None
    env: Annotated[
        dict[str, str],
        key(
            "more variables verify and setup commands get (name: value; the rest of the "
            "environment is an allow-list, docs/sandbox.md)",
            expected="a mapping of variable names to values",
        ),
    ] = msgspec.field(default_factory=dict)
    resources: Annotated[
        dict[str, Annotated[float, Meta(ge=0)]],
        key(
            "Ray resources one verification needs (e.g. {CPU: 2, docker: 1})",
            check="finite_values",
            expected="a mapping of Ray resources to amounts >= 0 (e.g. {CPU: 2, docker: 1})",
        ),
    ] = msgspec.field(default_factory=dict)

    none: Annotated[
        bool,
        key(
            "true: no verify command on purpose; stories may reach done unverified (said on "
            "the story, board, pull request and report). Without it a run needs verify.*",
            guard="strict",
        ),
    ] = False

    def commands(self) -> list[tuple[str, str]]:
        """(step, command line) of each step set, build first."""
        return [(step, c) for step, c in (("build", self.build), ("test", self.test)) if c]


class LimitsSection(_Section):
    """`limits`: guardrails; the environment and the user's file may lower, never raise."""

    global_recovery: Annotated[
        Annotated[int, Meta(ge=1, le=MAX_RECOVERY)],
        key("every recovery of every kind counts; the story blocks here"),
    ] = 10
    implementation_retries: Annotated[_Count, key("implement attempts after a failure")] = 3
    review_rejections: Annotated[_Count, key("rework cycles after a REJECTED review")] = 3
    refinement_iterations: Annotated[_Count, key("refine passes before it escalates")] = 5
    pr_rounds: Annotated[
        Annotated[int, Meta(ge=1, le=MAX_RECOVERY)],
        key("PR rework rounds (reviews, failing checks) before the story blocks"),
    ] = 10
    phase_timeout: Annotated[
        _Seconds, key("seconds one phase may take", check="finite", expected=_SECONDS)
    ] = 900
    story_tokens: Annotated[
        _Positive | None,
        key(
            "tokens one story may use; null: no budget",
            check="finite",
            expected="a positive number or null",
        ),
    ] = None
    story_cost_usd: Annotated[
        _Positive | None,
        key(
            "USD one story may cost; null: no budget",
            check="finite",
            expected="a positive number or null",
        ),
    ] = None
    run_cost_usd: Annotated[
        _Positive | None,
        key(
            "USD one run may cost; null: no budget",
            check="finite",
            expected="a positive number or null",
        ),
    ] = None


class GatesSection(_Section):
    """`gates`: stops for a person's approval."""

    before_implementation: Annotated[
        bool, key("wait for `ai-sdlc approve <id>` before implementing")
    ] = False
    before_done: Annotated[bool, key("wait for `ai-sdlc approve <id>` before marking done")] = False


class StopConditions(_Section):
    """`run.stop_conditions`: a multi-story run halts when it is clearly failing."""

    max_retry_rate: Annotated[
        _Rate,
        key("stories that needed any retry / stories attempted", expected="a rate between 0 and 1"),
    ] = 0.5
    max_reject_rate: Annotated[
        _Rate,
        key("stories blocked or failed / stories attempted", expected="a rate between 0 and 1"),
    ] = 0.3
    max_consecutive_fails: Annotated[
        _AtLeastOne, key("stories in a row that failed (an approval resets it)")
    ] = 3
    max_total_attempts: Annotated[
        _AtLeastOne, key("implementation attempts in one run segment")
    ] = 50
    min_attempted: Annotated[_AtLeastOne, key("stories attempted before the rates judge")] = 4


class RaySettings(_Section):
    """`run.ray`: the Ray cluster a `--executor ray` run uses."""

    address: Annotated[
        str | None,
        key(
            "cluster address; null: start a local one",
            expected='a Ray cluster address (e.g. "ray://head:10001" or "10.0.0.5:6379") or null',
        ),
    ] = None
    cache_dir: Annotated[
        str | None,
        key(
            "a folder for the workers' clones, or null: their default",
            expected="a folder for the workers' clones, or null",
        ),
    ] = None
    direct: Annotated[bool, key("workers fetch from and push to the remote themselves")] = True


class RunSection(_Section):
    """`run`: multi-story runs (`--auto`, `--batch`, `--jobs`)."""

    stop_conditions: StopConditions = msgspec.field(default_factory=StopConditions)
    max_consecutive_escalations: Annotated[
        _AtLeastOne, key("blocked/failed stories in a row: FAILURE LOOP DETECTED")
    ] = 2
    max_bounces: Annotated[
        Annotated[int, Meta(ge=0)],
        key("step-backs (review -> implement ...) before a story escalates"),
    ] = 3
    cooldown_seconds: Annotated[
        Annotated[float, Meta(ge=0)],
        key("wait before retrying a story whose phase crashed", expected="seconds >= 0"),
    ] = 5
    max_story_errors: Annotated[_AtLeastOne, key("crashes of one story before it escalates")] = 2
    jobs: Annotated[
        Annotated[int, Meta(ge=1, le=64)],
        key(
            "stories run at once (`run --jobs N`), each in a worker process",
            expected="an integer between 1 and 64",
        ),
    ] = 1
    executor: Annotated[Literal["local", "ray"], key("where parallel stories run")] = "local"
    ray: RaySettings = msgspec.field(default_factory=RaySettings)
    done_means: Annotated[
        Literal["done", "pr", "merged"],
        key("a dependency is met when it is: done | pr (done with a PR) | merged"),
    ] = "done"


class NotifySection(_Section):
    """`notify`: who is told when a run halts (the diagnostic JSON)."""

    command: Annotated[
        str | list[str] | None,
        key(
            'run without a shell, JSON on stdin, e.g. ["python", "notify.py"]',
            expected="a command line, an argument list or null",
        ),
    ] = None
    webhook: Annotated[
        str | None,
        key(
            "an http(s) URL the JSON is POSTed to",
            check="http_url",
            expected="an http(s) URL or null",
        ),
    ] = None


class GitSection(_Section):
    """`git`: in a git repository, one worktree and branch per story."""

    worktrees: Annotated[
        bool,
        key("false (or `run --no-worktree`): agents work in the project folder", guard="accept"),
    ] = True
    base_branch: Annotated[
        str,
        key(
            'stories branch from it and PRs target it; "": the default branch',
            expected='a branch name, or "" for the default branch',
        ),
    ] = ""
    worktrees_dir: Annotated[
        str, key("where story worktrees are made", check="nonblank", expected="a folder path")
    ] = ".ai-sdlc/worktrees"
    remote: Annotated[
        str, key("where done stories' branches are pushed", check="nonblank", expected="a name")
    ] = "origin"
    keep_failed_attempts: Annotated[
        bool, key("true: leave a failed attempt's changes instead of rolling back")
    ] = False
    draft: Annotated[bool, key("open pull requests as drafts")] = False
    auto_merge: Annotated[
        bool, key("squash-merge the PR once approved and green (turns `pr.loop` on)")
    ] = False
    keep_worktrees: Annotated[
        bool, key("true: keep a done story's worktree (and its environment)")
    ] = False


class PrSection(_Section):
    """`pr`: the pull-request loop (docs/repository.md): a story's PR is followed to approval."""

    loop: Annotated[
        bool,
        key("an open PR keeps its story in-review; its reviews and failing checks are rework"),
    ] = False
    trusted_bots: Annotated[
        list[str],
        key(
            'bots whose PR comments steer the agent, e.g. ["coderabbitai"]',
            check="nonblank_items",
            expected='a list of bot logins, e.g. ["coderabbitai"]',
            guard="strict",  # one more trusted voice needs `config --accept`
        ),
    ] = msgspec.field(default_factory=list)
    poll_seconds: Annotated[
        Annotated[float, Meta(ge=1)],
        key(
            "`watch` looks at each in-review story's PR this often (one API call each)",
            check="finite",
            expected="seconds >= 1",
        ),
    ] = 60


class SandboxSection(_Section):
    """`sandbox`: agents, tools and verify commands write only to their worktree."""

    enabled: Annotated[
        bool, key("Linux Landlock (docs/sandbox.md); `run --no-sandbox`: off", guard="strict")
    ] = True
    required: Annotated[
        bool,
        key("run --auto / watch refuse to start where no sandbox is available", guard="strict"),
    ] = True
    writable: Annotated[
        list[str],
        key(
            'more folders they may write, e.g. ["~/.gradle", "~/.cargo"]; only from this file: '
            "the environment or the user's file may not widen it",
            check="nonblank_items",
            expected='a list of folders, e.g. ["~/.m2"]',
            guard="strict",
        ),
    ] = msgspec.field(default_factory=list)
    deny_read: Annotated[
        list[str],
        key(
            "more paths no child may read, besides ~/.ssh, ~/.aws... (docs/sandbox.md)",
            check="nonblank_items",
            expected='a list of paths, e.g. ["~/.config/vault"]',
            guard="strict",
        ),
    ] = msgspec.field(default_factory=list)
    network: Annotated[
        list[Literal["verify", "tools", "setup", "agents"]],
        key(
            "steps with the open network (verify, tools: the agent loop's run_command, "
            "setup: worktree.setup, agents: CLI agents, else only their API hosts through "
            "ai-sdlc's proxy); the others get no TCP",
            expected="a list of verify, tools, setup, agents",
            guard="strict",
        ),
    ] = msgspec.field(default_factory=lambda: ["setup"])
    pass_env: Annotated[
        list[str],
        key(
            "credential variables children get (agents: besides their provider's key; "
            "verify and setup commands)",
            check="env_names",
            expected='a list of variable names, e.g. ["GH_TOKEN"]',
            guard="strict",
        ),
    ] = msgspec.field(default_factory=list)


class WorktreeSection(_Section):
    """`worktree`: each story worktree's own environment (docs/verification.md)."""

    setup: Annotated[
        list[str],
        key(
            'command lines run in a new worktree (no shell), e.g. ["npm ci"]',
            check="command_lines",
            expected="a list of command lines with balanced quotes",
        ),
    ] = msgspec.field(default_factory=list)
    setup_inputs: Annotated[
        list[str] | None,
        key(
            "files whose change runs setup again; null: lock files, manifests",
            check="relative_paths",
            expected="a list of file paths relative to the project, or null",
        ),
    ] = None
    setup_timeout: Annotated[
        _Seconds, key("seconds per setup command", check="finite", expected=_SECONDS)
    ] = 900


class Settings(msgspec.Struct, forbid_unknown_fields=True):
    """The whole file (except `resilience`, see `config.resilience`). `guarded(...)` and
    `key(guard=...)` mark the guardrails: `keys.GUARDRAILS` and `guard.is_guarded` read them."""

    ai: AiSection = msgspec.field(default_factory=AiSection)
    verify: Annotated[VerifySection, guarded("accept")] = msgspec.field(
        default_factory=VerifySection
    )
    limits: Annotated[LimitsSection, guarded("strict")] = msgspec.field(
        default_factory=LimitsSection
    )
    gates: Annotated[GatesSection, guarded("strict")] = msgspec.field(default_factory=GatesSection)
    run: RunSection = msgspec.field(default_factory=RunSection)
    notify: NotifySection = msgspec.field(default_factory=NotifySection)
    git: GitSection = msgspec.field(default_factory=GitSection)
    pr: PrSection = msgspec.field(default_factory=PrSection)
    sandbox: Annotated[SandboxSection, guarded("accept")] = msgspec.field(
        default_factory=SandboxSection
    )
    worktree: Annotated[WorktreeSection, guarded("accept")] = msgspec.field(
        default_factory=WorktreeSection
    )
