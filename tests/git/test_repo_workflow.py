"""Issue 9 end to end: `ai-sdlc run` on a real git repository (a local bare repository as
`origin`), through the real CLI, with stand-in `claude`, `codex`, `aider`, `gemini` and `gh`
executables on PATH speaking the real tools' output formats, and the `openai` provider against
the fake API server. Each story works in its own worktree and branch; the user's checkout is
never touched."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.fakes.agent_clis import install_agent
from tests.support.fakes.api_server import FakeApiServer
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.fakes.story_agent import StoryAgent
from tests.support.git_support import Repo, checkout_snapshot, git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

TITLE = "Add a greeting"
SLUG = "add-a-greeting"
HELLO = 'def greet(name):\n    return f"Hello, {name}!"\n'
#: Imports the agent's module with bytecode writing on (whatever the environment says), as a
#: project's tests do: verification keeps that bytecode in a folder of its own
#: (PYTHONPYCACHEPREFIX), so none is left in the worktree, committed or put in a patch.
#: The project's test, named in its failure report as a test runner names it (a base where it
#: fails is a test-first start, not a broken verify command: issue 33).
CHECK = (
    "import sys; sys.dont_write_bytecode = False\n"
    "try:\n    import hello\n    assert hello.greet('Ada') == 'Hello, Ada!'\n"
    "except (ImportError, AssertionError) as exc:\n"
    "    print(f'FAILED test_hello.py::test_greet - {exc!r}')\n    sys.exit(1)\n"
)
KEY = "sk-proj-" + "Zq8Xv2Lm4Np6Rt0Ws3Yu5Ab7Cd9Ef1Gh"


def user_view(root: Path) -> dict[str, str]:
    """`checkout_snapshot` minus ai-sdlc's own state under `.ai-sdlc/` (story files, event logs
    and artifacts live in the main checkout by design)."""
    snap = checkout_snapshot(root)
    snap["status"] = "".join(
        line
        for line in snap["status"].splitlines(keepends=True)
        if not line[3:].startswith(".ai-sdlc/")
    )
    return snap


class World:
    """A git project with a bare origin, a story, stand-ins on PATH and the user's own
    uncommitted work in the checkout."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.repo: Repo = make_repo(tmp_path)
        self.root = self.repo.root
        self.bin = tmp_path / "bin"
        install_gh(self.bin)
        self.gh_log = tmp_path / "gh.log"
        # The stand-in CLIs log their calls in a records folder the project's list names.
        self.agent_log = tmp_path / "records" / "agent.log"
        self.agent_log.parent.mkdir()
        self.env: dict[str, str] = {
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "FAKE_GH_LOG": str(self.gh_log),
            "FAKE_AGENT_LOG": str(self.agent_log),
            "FAKE_AGENT_FILES": json.dumps({"hello.py": HELLO}),
            "AI_SDLC_PROVIDER": "",
            # These tests look into the done story's worktree (removed by default once done).
            "AI_SDLC_GIT__KEEP_WORKTREES": "true",
        }
        self.written_outside: set[str] = set()
        self.sid = self.repo.story(TITLE)
        self.configure("")
        # The user's own uncommitted work and a staged change: never touched by a run.
        (self.root / "notes.txt").write_text("my uncommitted notes\n")
        (self.root / "README.md").write_text("# project\n\nstaged edit\n")
        git(self.root, "add", "README.md")
        self.before = user_view(self.root)

    def configure(self, extra: str, *, writable_too: tuple[Path, ...] = ()) -> None:
        test = shlex.join([sys.executable, "-c", CHECK])
        paths = [str(self.agent_log.parent), *map(str, writable_too)]
        writable = f"  writable: {json.dumps(paths)}\n"
        if "sandbox:\n" in extra:  # one section: the records folder beside the test's keys
            extra = extra.replace("sandbox:\n", "sandbox:\n" + writable, 1)
        else:
            extra = "sandbox:\n" + writable + extra
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"verify:\n  test: {json.dumps(test)}\n{extra}"
        )

    def run(self, *args: str) -> CliResult:
        return run_cli(self.root, "run", self.sid, *args, env=self.env, timeout=120)

    @property
    def branch(self) -> str:
        return f"ai-sdlc/{self.sid}-{SLUG}"

    @property
    def worktree(self) -> Path:
        return self.root / ".ai-sdlc" / "worktrees" / f"{self.sid}-{SLUG}"

    def frontmatter(self) -> dict[str, object]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def writes_from_outside(self) -> tuple[Path, ...]:
        """The user's shell, whose `2>run.log` made two logs in the project before the run,
        writes them during its read-only phases (the stand-in plays it), and an editor leaves
        a swap file in the worktree: under the real sandbox only files the project names are
        writable. Returns the logs (to name in `sandbox.writable`); the checkout's view is
        taken again with them."""
        logs = (self.root / "run-output.txt", self.root / "run.log")
        self.env["FAKE_AGENT_OUTSIDE"] = json.dumps(
            {
                str(logs[0]): "the user's redirected log\n",
                str(logs[1]): "another log\n",
                ".hello.py.swp": "an editor's swap file\n",
            }
        )
        for log in logs:
            log.write_text("")
        self.before = user_view(self.root)
        self.written_outside = {log.name for log in logs}
        return logs

    def assert_done_in_worktree(
        self, result: CliResult, files: set[str], *, scratch: str = ""
    ) -> None:
        """Done, committed on the story branch, pushed, one PR, the checkout untouched (but
        for the logs written from outside); the worktree clean but for the agent's own
        `scratch` files (`git status` lines)."""
        assert result.returncode == 0, result.output
        fm = self.frontmatter()
        assert fm["status"] == "done", result.output
        assert fm["branch"] == self.branch
        assert fm["worktree_path"] == f".ai-sdlc/worktrees/{self.sid}-{SLUG}"
        assert self.worktree.is_dir()
        assert git(self.worktree, "symbolic-ref", "--short", "HEAD").strip() == self.branch
        # the branch has exactly one new commit holding only the agent's files
        log = git(self.root, "log", "--format=%s", f"main..{self.branch}").splitlines()
        assert log == [f"feat({self.sid}): {TITLE}"]
        committed = git(self.root, "show", "--name-only", "--format=", self.branch).split()
        assert set(committed) == files
        assert git(self.root, "show", f"{self.branch}:hello.py") == HELLO
        # verification keeps its bytecode out of the worktree (PYTHONPYCACHEPREFIX)
        assert git(self.worktree, "status", "--porcelain") == scratch
        # pushed to the bare origin
        assert self.repo.origin is not None
        pushed = git(self.repo.origin, "rev-parse", f"refs/heads/{self.branch}").strip()
        assert pushed == git(self.root, "rev-parse", self.branch).strip()
        # exactly one `gh pr create`, with the story title; its URL recorded
        creates = [c for c in gh_calls(self.gh_log) if c[:2] == ["pr", "create"]]
        assert len(creates) == 1, gh_calls(self.gh_log)
        create = creates[0]
        assert create[create.index("--title") + 1].endswith(TITLE)
        assert create[create.index("--head") + 1] == self.branch
        assert str(fm["pr_url"]).startswith("https://github.com/")
        # the user's checkout: branch, HEAD, index, status and every file byte-identical
        after = user_view(self.root)
        for name in self.written_outside:
            assert after.pop(name) != self.before[name]  # written by the user's shell
        assert after == {k: v for k, v in self.before.items() if k not in self.written_outside}
        assert not (self.root / "hello.py").exists()

    def agent_calls(self) -> list[dict[str, object]]:
        lines = self.agent_log.read_text().splitlines() if self.agent_log.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_claude_takes_a_story_to_a_pull_request_in_its_own_worktree(world: World) -> None:
    """Files changed by others during the read-only phases (the user's redirected logs, an
    editor's swap file) do not fail them: nothing is counted."""
    install_agent(world.bin, "claude")
    logs = world.writes_from_outside()
    world.configure("", writable_too=logs)

    result = world.run("--provider", "claude")

    world.assert_done_in_worktree(result, {"hello.py"}, scratch="?? .hello.py.swp\n")
    assert world.frontmatter().get("total_recovery_attempts", 0) == 0, result.output
    calls = world.agent_calls()
    assert {c["phase"] for c in calls} >= {"refine", "research", "plan", "implement", "review"}
    assert {c["cwd"] for c in calls} == {str(world.worktree)}
    read_only = [c for c in calls if c["phase"] != "implement"]
    for call in read_only:
        argv = call["argv"]
        assert isinstance(argv, list) and "Write" not in argv[argv.index("--tools") + 1]


def test_failed_attempts_are_rolled_back_and_saved_as_patches(world: World) -> None:
    def wrong(n: int) -> str:
        return f'def greet(name):\n    return "attempt {n} is wrong"\n'

    (world.root / ".ai-sdlc" / "scripted.yaml").write_text(
        "rules:\n"
        "  - phase: implement\n    attempt: 1\n"
        f'    files: {{hello.py: {json.dumps(wrong(1))}, scratch_one.py: "x = 1\\n"}}\n'
        "  - phase: implement\n    attempt: 2\n"
        f'    files: {{hello.py: {json.dumps(wrong(2))}, notes/two.md: "two\\n"}}\n'
        "  - phase: implement\n    attempt: 3\n"
        f"    files: {{hello.py: {json.dumps(HELLO)}}}\n"
    )
    world.env["AI_SDLC_PROVIDER"] = "scripted"

    result = world.run()

    world.assert_done_in_worktree(result, {"hello.py"})
    fm = world.frontmatter()
    assert fm["total_recovery_attempts"] == 2
    attempts = world.root / ".ai-sdlc" / "stories" / world.sid / "attempts"
    one, two = (attempts / "1.patch").read_text(), (attempts / "2.patch").read_text()
    assert "attempt 1 is wrong" in one and "scratch_one.py" in one
    assert "attempt 2 is wrong" in two and "notes/two.md" in two and "scratch_one.py" not in two
    assert sorted(p.name for p in attempts.iterdir() if p.suffix == ".patch") == [
        "1.patch",
        "2.patch",
    ]
    # each failed attempt also keeps its whole verification output (`log --full`)
    assert {"1.output.txt", "2.output.txt"} <= {p.name for p in attempts.iterdir()}
    for leftover in ("scratch_one.py", "notes"):
        assert not (world.worktree / leftover).exists()
    # nothing is left: the failed attempts' files went, and verification's bytecode is kept
    # outside the worktree (never committed, never in a patch)
    left = git(world.worktree, "status", "--porcelain", "--untracked-files=all")
    assert left == ""
    assert "__pycache__" not in one + two
    # each failed diff is a patch git accepts against the commit its attempt started from
    index = world.tmp / "check-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    for patch in ("1.patch", "2.patch"):
        subprocess.run(["git", "read-tree", "main"], cwd=world.root, env=env, check=True)
        subprocess.run(
            ["git", "apply", "--cached", "--check", str(attempts / patch)],
            cwd=world.root,
            env=env,
            check=True,
        )


@pytest.mark.parametrize(("preset", "retries"), [("codex", 2), ("aider", 0), ("gemini", 1)])
def test_command_presets_take_a_story_to_a_pull_request(
    world: World, preset: str, retries: int
) -> None:
    """Each preset's argv per phase, through a whole story. Codex and Gemini CLI first meet a
    rate limit: codex retries its stream once by itself ("Reconnecting... 1/5", reported
    through on_backend_retry), then fails the turn with a 429; Gemini CLI exits with its
    RetryableQuotaError. Our `llm` policy retries the call; every retry is an `api_retry`
    recovery, and the story still ends done with a pull request. Under codex, files changed
    by others during the read-only phases do not fail them either."""
    policy = (
        "resilience:\n  policies:\n    llm:\n      initial_delay: 0.01\n      max_delay: 0.05\n"
    )
    logs = world.writes_from_outside() if preset == "codex" else ()
    world.configure(
        f"ai:\n  provider: command\n  command:\n    preset: {preset}\n{policy if retries else ''}",
        writable_too=logs,
    )
    install_agent(world.bin, preset)
    if retries:
        world.env["FAKE_AGENT_FAIL_ONCE"] = str(world.agent_log.parent / "rate-limited-once")

    result = world.run()

    # the aider preset sends aider's chat and input history to a private folder
    world.assert_done_in_worktree(result, {"hello.py"}, scratch="?? .hello.py.swp\n" * bool(logs))
    fm = world.frontmatter()
    assert fm.get("total_recovery_attempts", 0) == retries, result.output
    breakdown = fm.get("recovery_breakdown") or {}
    assert isinstance(breakdown, dict)
    assert dict(breakdown) == ({"api_retry": retries} if retries else {}), result.output
    calls = world.agent_calls()
    assert {c["phase"] for c in calls} >= {"refine", "research", "plan", "implement", "review"}
    assert {c["cwd"] for c in calls} == {str(world.worktree)}
    for call in calls:
        argv = call["argv"]
        assert isinstance(argv, list)
        read_only = call["phase"] != "implement"
        if preset == "codex":
            assert argv[:2] == ["exec", "--json"]
            # inside ai-sdlc's sandbox, codex's own (bubblewrap) cannot start: an edit phase
            # turns it off, confined by ours
            assert argv[argv.index("--sandbox") + 1] == (
                "read-only" if read_only else "danger-full-access"
            )
        elif preset == "gemini":
            assert argv[argv.index("--output-format") + 1] == "stream-json"
            assert argv[argv.index("--approval-mode") + 1] == (
                "default" if read_only else "auto_edit"
            )
        else:
            assert ("--dry-run" in argv) == read_only
    if preset == "aider":
        # no scratch files in the worktree; the user's .gitignore untouched
        assert not (world.worktree / ".aider.chat.history.md").exists()
        assert git(world.root, "show", f"{world.branch}:.gitignore") == "*.log\nbuild/\n"
    if not retries:
        return
    assert calls[0]["phase"] == calls[1]["phase"] == "refine"  # the same call, once more
    log = world.root / ".ai-sdlc" / "stories" / world.sid / "events.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    reasons = [
        e["reason"]
        for e in events
        if e.get("action") == "recovery" and e.get("recovery_kind") == "api_retry"
    ]
    expected = ["rate_limit"]  # our policy's retry of the failed call
    if preset == "codex":  # codex's own stream retry, reported before its turn failed
        expected.insert(
            0,
            "codex API retry 1/5: stream disconnected before completion: "
            "error sending request for url",
        )
    assert reasons == expected


@pytest.mark.xdist_group("provider-sdks")  # imports an SDK in-process: once per suite
def test_openai_provider_takes_a_story_to_a_pull_request(world: World) -> None:
    with FakeApiServer() as server:
        server.responder = StoryAgent(files={"hello.py": HELLO})
        world.configure(
            "ai:\n  provider: openai\n  model: e2e-model\n"
            f"  openai:\n    base_url: {server.openai_base_url}\n"
        )
        world.env["OPENAI_API_KEY"] = "sk-test-" + "k" * 24
        result = world.run()
    world.assert_done_in_worktree(result, {"hello.py"})


def test_a_secret_file_blocks_the_story_without_leaking_the_key(world: World) -> None:
    install_agent(world.bin, "claude")
    world.env["FAKE_AGENT_FILES"] = json.dumps(
        {"hello.py": HELLO, ".env": f"OPENAI_API_KEY={KEY}\n"}
    )
    # A value holding a key is kept from agents unless the user hands it on by name.
    world.configure("sandbox:\n  pass_env: [FAKE_AGENT_FILES]\n")

    result = world.run("--provider", "claude")

    assert result.returncode == 5, result.output
    fm = world.frontmatter()
    assert fm["status"] == "blocked"
    reason = str(fm["blocked_reason"])
    assert ".env" in reason and KEY not in reason
    assert KEY not in result.output
    # nothing committed on the story branch
    assert git(world.root, "rev-list", "--count", f"main..{world.branch}").strip() == "0"
    assert world.repo.origin is not None
    assert not git(world.repo.origin, "branch", "--list", world.branch).strip()
    assert not [c for c in gh_calls(world.gh_log) if c[:2] == ["pr", "create"]]
    # the key is nowhere in ai-sdlc's files (only in the agent's own .env in the worktree)
    agent_env = world.worktree / ".env"
    assert agent_env.exists()
    leaks = [
        p
        for p in (world.root / ".ai-sdlc").rglob("*")
        if p.is_file() and p != agent_env and KEY.encode() in p.read_bytes()
    ]
    assert leaks == []
    assert user_view(world.root) == world.before


def test_a_log_redirected_into_the_project_does_not_fail_a_no_worktree_run(world: World) -> None:
    """The issue's first report: `ai-sdlc run S-0001 2>run.log` inside the project, agents
    working in the project folder itself (`--no-worktree`)."""
    install_agent(world.bin, "claude")
    world.env["FAKE_AGENT_OUTSIDE"] = json.dumps(
        {"run.log": "the user's redirected log\n", ".hello.py.swp": "swap\n"}
    )

    result = world.run("--provider", "claude", "--no-worktree")

    assert result.returncode == 0, result.output
    fm = world.frontmatter()
    assert fm["status"] == "done" and fm.get("total_recovery_attempts", 0) == 0, result.output
    assert (world.root / "hello.py").read_text() == HELLO
    assert "branch" not in fm and not world.worktree.exists()
    assert git(world.root, "symbolic-ref", "--short", "HEAD").strip() == "main"
