"""`.ai-sdlc/config.yaml`: defaults, validation with file:line errors, env overrides, and
comment-preserving edits for `ai-sdlc config key value`.

The effective config is a plain nested dict: defaults ⊕ the user's file (the platform's config
folder, or `$AI_SDLC_CONFIG_HOME/config.yaml`) ⊕ the project's file ⊕ the environment, each
later layer winning. Both files get the same checks; neither may hold a secret (keys come from
the environment), and neither the user's file nor the environment may loosen a guardrail.
`resilience.policies` is validated by its owning package.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import posixpath
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.errors import InvalidInputError, UsageError

CONFIG_RELPATH = Path(".ai-sdlc") / "config.yaml"
ENV_PREFIX = "AI_SDLC_"

#: Largest recovery limit (a bigger one would in effect switch the guardrail off).
MAX_RECOVERY = 1000
#: Longest timeout, in seconds (one week).
MAX_SECONDS = 7 * 24 * 3600

PROVIDER_CHOICES = ("scripted", "dry-run", "openai", "anthropic", "claude", "command")

DEFAULT_CONFIG_TEXT = """\
# ai-sdlc configuration. Edit by hand or with `ai-sdlc config <dotted.key> <value>`.
# Every key is optional; the values shown are the defaults. A guardrail (limits, verify, gates)
# changed by hand is refused by the next run until you confirm it: `ai-sdlc config --accept`.

ai:
  # scripted (offline, no AI) | dry-run | openai | anthropic | claude | command.
  # Unset: AI_SDLC_PROVIDER, then auto-detect, else scripted.
  provider: null
  model: null

verify:
  # Command lines run in the story's workspace without a shell, e.g. "make verify" or "pytest -q".
  build: null
  test: null
  timeout: 600        # seconds per command
  max_parallel: null  # verification commands at once across a parallel run; null: CPU count
  baseline: true      # verify the story's untouched base first (floor; stop if it cannot run)
  protected: null     # test files kept as they were (globs); null: the detected test files
  junit: null         # a JUnit XML report the test command writes, read for the test counts

limits:                        # guardrails: an AI_SDLC_LIMITS__* variable may lower, never raise
  global_recovery: 10          # every recovery of every kind counts; the story blocks here
  implementation_retries: 3    # limits.* counts: at most 1000 (global_recovery: 1..1000)
  review_rejections: 3         # rework cycles after a REJECTED review
  refinement_iterations: 5

gates:
  before_implementation: false # wait for `ai-sdlc approve <id>` before implementing
  before_done: false           # wait for `ai-sdlc approve <id>` before marking done

run:                           # multi-story runs (--auto, --batch): halt when clearly failing
  stop_conditions:
    max_retry_rate: 0.5        # stories that needed any retry / stories attempted
    max_reject_rate: 0.3       # stories rejected or failed / stories attempted
    max_consecutive_fails: 3   # stories in a row that failed (an approval resets it)
    max_total_attempts: 50     # agent attempts in the whole run
    min_attempted: 4           # stories attempted before the rates judge
  max_consecutive_escalations: 2  # blocked/failed stories in a row: FAILURE LOOP DETECTED
  max_bounces: 3               # step-backs (review -> implement ...) before a story escalates
  cooldown_seconds: 5          # wait before retrying a story whose phase crashed
  max_story_errors: 2          # crashes of one story before it is escalated
  jobs: 1                      # stories run at once (`run --jobs N`), each in a worker process
  done_means: done             # a dependency is met when it is: done | pr (done with a PR) | merged

notify:                        # told when a run halts (the diagnostic JSON)
  command: null                # e.g. ["python", "notify.py"]: run without a shell, JSON on stdin
  webhook: null                # e.g. https://hooks.example.com/...: JSON POSTed

git:                           # in a git repository: one worktree and branch per story
  worktrees: true              # false (or `run --no-worktree`): agents work in the project folder
  base_branch: ""              # stories branch from it and PRs target it; "": the default branch
  worktrees_dir: .ai-sdlc/worktrees
  remote: origin               # where done stories' branches are pushed
  keep_failed_attempts: false  # true: leave a failed attempt's changes instead of rolling back
  draft: false                 # open pull requests as drafts
  auto_merge: false            # wait for the PR's checks, then squash-merge it
  keep_worktrees: false        # true: keep a done story's worktree (and its environment)

sandbox:                       # agents, tools and verify commands write only to their worktree
  enabled: true                # (Linux Landlock; see docs/sandbox.md). `run --no-sandbox`: off
  required: true               # run --auto / watch refuse to start where no sandbox is available
  writable: []                 # more folders they may write, e.g. ["~/.gradle", "~/.cargo"]

worktree:                      # each story worktree's own environment (see docs/verification.md)
  setup: []                    # command lines run in a new worktree (no shell), e.g. ["npm ci"]
  setup_inputs: null           # files whose change runs setup again; null: lock files, manifests
  setup_timeout: 900           # seconds per setup command
"""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, int | float)) and not isinstance(v, bool)


class Setting(msgspec.Struct, frozen=True):
    """One config key: its default, the check a value must pass and what to say when it fails."""

    default: Any
    check: Callable[[Any], bool]
    expected: str


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _nonneg_int(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _pos_int(v: Any) -> bool:
    return _is_int(v) and v >= 1


def _pos_number(v: Any) -> bool:
    return _is_number(v) and v > 0


def _opt_pos_number(v: Any) -> bool:
    return v is None or _pos_number(v)


def _rate(v: Any) -> bool:
    return _is_number(v) and 0 <= v <= 1


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _provider(v: Any) -> bool:
    return v is None or v in PROVIDER_CHOICES


def _opt_url(v: Any) -> bool:
    return v is None or is_http_url(v)


def is_http_url(v: Any) -> bool:
    """An http:// or https:// URL with a host (a `file:` or `ftp:` URL is never called)."""
    from urllib.parse import urlsplit

    if not isinstance(v, str):
        return False
    try:
        parts = urlsplit(v.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def _between(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and low <= v <= high


def _finite_pos(high: float | None = None) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        return _pos_number(v) and math.isfinite(v) and (high is None or v <= high)

    return check


def _opt_finite_pos(v: Any) -> bool:
    return v is None or _finite_pos()(v)


def _opt_command_line(v: Any) -> bool:
    """A command line that splits like a shell splits words (it is run without a shell)."""
    if v is None:
        return True
    if not isinstance(v, str):
        return False
    try:
        shlex.split(v)
    except ValueError:
        return False
    return True


def _path_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v)


def _command_lines(v: Any) -> bool:
    """A list of non-empty command lines, each split like `verify.*` (no shell)."""
    return isinstance(v, list) and all(
        _opt_command_line(x) and isinstance(x, str) and bool(x.strip()) for x in v
    )


def _opt_relative_paths(v: Any) -> bool:
    """File paths inside the project: relative, no `..` (they are read in each worktree)."""
    return v is None or (
        isinstance(v, list)
        and all(
            isinstance(x, str)
            and bool(x.strip())
            and not posixpath.isabs(x)
            and ".." not in posixpath.normpath(x).split("/")
            for x in v
        )
    )


def _opt_command(v: Any) -> bool:
    return (
        v is None
        or isinstance(v, str)
        or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    )


#: Every key this module validates, dotted, with its default.
SCHEMA: dict[str, Setting] = {
    "ai.provider": Setting(None, _provider, "one of " + ", ".join(PROVIDER_CHOICES)),
    "ai.model": Setting(None, _opt_str, "a model name or null"),
    "verify.build": Setting(
        None, _opt_command_line, "a command line with balanced quotes, or null"
    ),
    "verify.test": Setting(None, _opt_command_line, "a command line with balanced quotes, or null"),
    "verify.timeout": Setting(
        600, _finite_pos(MAX_SECONDS), f"a number of seconds > 0 and <= {MAX_SECONDS}"
    ),
    "limits.global_recovery": Setting(
        10, _between(1, MAX_RECOVERY), f"an integer from 1 to {MAX_RECOVERY:,}"
    ),
    "limits.implementation_retries": Setting(
        3, _between(0, MAX_RECOVERY), f"an integer from 0 to {MAX_RECOVERY:,}"
    ),
    "limits.review_rejections": Setting(
        3, _between(0, MAX_RECOVERY), f"an integer from 0 to {MAX_RECOVERY:,}"
    ),
    "limits.refinement_iterations": Setting(
        5, _between(0, MAX_RECOVERY), f"an integer from 0 to {MAX_RECOVERY:,}"
    ),
    "limits.phase_timeout": Setting(
        900, _finite_pos(MAX_SECONDS), f"a number of seconds > 0 and <= {MAX_SECONDS}"
    ),
    "limits.story_tokens": Setting(None, _opt_finite_pos, "a positive number or null"),
    "limits.story_cost_usd": Setting(None, _opt_finite_pos, "a positive number or null"),
    "limits.run_cost_usd": Setting(None, _opt_finite_pos, "a positive number or null"),
    "gates.before_implementation": Setting(False, _bool, "true or false"),
    "gates.before_done": Setting(False, _bool, "true or false"),
    "run.stop_conditions.max_retry_rate": Setting(0.5, _rate, "a rate between 0 and 1"),
    "run.stop_conditions.max_reject_rate": Setting(0.3, _rate, "a rate between 0 and 1"),
    "run.stop_conditions.max_consecutive_fails": Setting(3, _pos_int, "an integer >= 1"),
    "run.stop_conditions.max_total_attempts": Setting(50, _pos_int, "an integer >= 1"),
    "run.stop_conditions.min_attempted": Setting(4, _pos_int, "an integer >= 1"),
    "run.max_consecutive_escalations": Setting(2, _pos_int, "an integer >= 1"),
    "run.max_bounces": Setting(3, _nonneg_int, "an integer >= 0"),
    "run.cooldown_seconds": Setting(5, lambda v: _is_number(v) and v >= 0, "seconds >= 0"),
    "run.max_story_errors": Setting(2, _pos_int, "an integer >= 1"),
    "run.jobs": Setting(1, _between(1, 64), "an integer between 1 and 64"),
    "run.executor": Setting("local", lambda v: v in ("local", "ray"), "one of local, ray"),
    "run.ray.address": Setting(
        None, _opt_str, 'a Ray cluster address (e.g. "ray://head:10001" or "10.0.0.5:6379") or null'
    ),
    "run.ray.cache_dir": Setting(None, _opt_str, "a folder for the workers' clones, or null"),
    "run.ray.direct": Setting(True, _bool, "true or false"),
    "verify.resources": Setting(
        {},
        lambda v: (
            isinstance(v, dict)
            and all(isinstance(k, str) and _is_number(n) and n >= 0 for k, n in v.items())
        ),
        "a mapping of Ray resources to amounts >= 0 (e.g. {CPU: 2, docker: 1})",
    ),
    "run.done_means": Setting(
        "done", lambda v: v in ("done", "pr", "merged"), "one of done, pr, merged"
    ),
    "verify.baseline": Setting(True, _bool, "true or false"),
    "verify.protected": Setting(
        None,
        lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
        'a list of glob patterns (e.g. ["tests/", "*_test.go"]), [] for none, or null',
    ),
    "verify.junit": Setting(
        None, _opt_str, "a path (relative to the project) of a JUnit XML report, or null"
    ),
    "verify.max_parallel": Setting(
        None, lambda v: v is None or _between(1, 256)(v), "an integer between 1 and 256, or null"
    ),
    "notify.command": Setting(None, _opt_command, "a command line, an argument list or null"),
    "notify.webhook": Setting(None, _opt_url, "an http(s) URL or null"),
    "git.worktrees": Setting(True, _bool, "true or false"),
    "git.base_branch": Setting("", _opt_str, 'a branch name, or "" for the default branch'),
    "git.worktrees_dir": Setting(
        ".ai-sdlc/worktrees", lambda v: isinstance(v, str) and bool(v.strip()), "a folder path"
    ),
    "git.remote": Setting("origin", lambda v: isinstance(v, str) and bool(v.strip()), "a name"),
    "git.keep_failed_attempts": Setting(False, _bool, "true or false"),
    "git.draft": Setting(False, _bool, "true or false"),
    "git.auto_merge": Setting(False, _bool, "true or false"),
    "sandbox.enabled": Setting(True, _bool, "true or false"),
    "sandbox.required": Setting(True, _bool, "true or false"),
    "sandbox.writable": Setting([], _path_list, 'a list of folders, e.g. ["~/.m2"]'),
    "git.keep_worktrees": Setting(False, _bool, "true or false"),
    "worktree.setup": Setting([], _command_lines, "a list of command lines with balanced quotes"),
    "worktree.setup_inputs": Setting(
        None, _opt_relative_paths, "a list of file paths relative to the project, or null"
    ),
    "worktree.setup_timeout": Setting(
        900, _finite_pos(MAX_SECONDS), f"a number of seconds > 0 and <= {MAX_SECONDS}"
    ),
}

#: Settings an environment variable may make stricter but never looser: the recovery limits, the
#: phase timeout and the budgets (lower is stricter; null means no budget), the stage gates and
#: the sandbox switches (true is stricter). A cloned repository or a CI variable must not switch
#: a guardrail off.
GUARDRAILS: tuple[str, ...] = (
    "limits.global_recovery",
    "limits.implementation_retries",
    "limits.review_rejections",
    "limits.refinement_iterations",
    "limits.phase_timeout",
    "limits.story_tokens",
    "limits.story_cost_usd",
    "limits.run_cost_usd",
    "gates.before_implementation",
    "gates.before_done",
    "sandbox.enabled",
    "sandbox.required",
)

#: `ai.<provider>.base_url` keys checked here (the providers read them; a bad scheme would
#: only surface mid-run as "connection errors" counted as recoveries).
BASE_URL_KEYS = ("ai.openai.base_url", "ai.anthropic.base_url")

#: Keys of the `ai` section (their values are validated by the providers that read them).
AI_KEYS = (
    "provider",
    "model",
    "openai",
    "anthropic",
    "claude",
    "command",
    "tools",
    "max_turns",
    "timeouts",
    "max_output_tokens",
    "prices",
)

#: Sections whose inner keys are free-form here (validated by their owning package).
OPEN_SECTIONS = ("ai", "resilience")

#: Points the user config at `<folder>/config.yaml` instead of the platform's config folder.
USER_CONFIG_ENV = "AI_SDLC_CONFIG_HOME"


def _opt_env_name(v: Any) -> bool:
    return v is None or (
        isinstance(v, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) is not None
    )


def _opt_bool(v: Any) -> bool:
    return v is None or isinstance(v, bool)


def _opt_argv(v: Any) -> bool:
    return v is None or (isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v))


def _opt_preset(v: Any) -> bool:
    if v is None:
        return True
    from ai_sdlc.providers.command_provider import PRESETS

    return v in PRESETS


_MODEL = Setting(None, _opt_str, "a model name or null")
_KEY_ENV = Setting(None, _opt_env_name, "the name of an environment variable, e.g. OPENAI_API_KEY")
_BASE_URL = Setting(None, _opt_url, "an http(s) URL or null")
_STREAM = Setting(True, _opt_bool, "true or false")

#: `ai.<provider>.*`: what each provider reads (see the provider modules' docstrings).
PROVIDER_SCHEMA: dict[str, Setting] = {
    "openai.base_url": _BASE_URL,
    "openai.api_key_env": _KEY_ENV,
    "openai.model": _MODEL,
    "openai.stream": _STREAM,
    "anthropic.base_url": _BASE_URL,
    "anthropic.api_key_env": _KEY_ENV,
    "anthropic.model": _MODEL,
    "anthropic.stream": _STREAM,
    "claude.binary": Setting(None, _opt_str, "an executable name or path, or null"),
    "claude.model": _MODEL,
    "claude.max_retries": Setting(
        None, lambda v: v is None or _nonneg_int(v), "an integer >= 0 or null"
    ),
    "claude.extra_args": Setting(None, _opt_argv, "a list of arguments"),
    "command.preset": Setting(None, _opt_preset, "claude, codex, aider, gemini or null"),
    "command.output": Setting(
        None,
        # cli_output.OUTPUT_FORMATS
        lambda v: (
            v
            in (None, "text", "codex-jsonl", "gemini-json", "aider", "gemini-jsonl", "claude-json")
        ),
        "text, codex-jsonl, gemini-json, aider, gemini-jsonl, claude-json or null",
    ),
    "command.template": Setting(None, _opt_argv, "a non-empty argument list"),
    "command.read_only_template": Setting(None, _opt_argv, "a non-empty argument list"),
    "command.prompt_via": Setting(None, lambda v: v in (None, "file", "stdin"), "file or stdin"),
    "command.patterns": Setting(
        None, lambda v: v is None or isinstance(v, list), "a list of {pattern, kind}"
    ),
    "command.exit_codes": Setting(
        None, lambda v: v is None or isinstance(v, Mapping), "a mapping exit code -> kind"
    ),
    "command.model": _MODEL,
}
PROVIDER_SECTIONS = ("openai", "anthropic", "claude", "command")

#: A key whose name says it holds a secret; such keys are refused in config files.
SECRET_KEY = re.compile(r"key|token|secret|passw(?:or)?d|credential", re.IGNORECASE)
#: Names that match SECRET_KEY but hold none: token counts, and `*_env` (the *name* of the
#: environment variable that holds a key).
_NOT_SECRET = frozenset({"max_output_tokens", "story_tokens"})


def names_secret(dotted: str) -> bool:
    """True when a part of the dotted key names a credential (`ai.openai.api_key`)."""
    return any(
        SECRET_KEY.search(part) and part not in _NOT_SECRET and not part.endswith("_env")
        for part in dotted.split(".")
    )


def _secret_env_hint(dotted: str) -> str:
    if ".anthropic." in f".{dotted}.":
        variable = "ANTHROPIC_API_KEY"
    elif ".openai." in f".{dotted}.":
        variable = "OPENAI_API_KEY"
    else:
        return "put it in an environment variable (e.g. OPENAI_API_KEY), never in a config file"
    return (
        f"remove it and export {variable}=... instead (ai.<provider>.api_key_env names another "
        "variable); keys are read only from the environment"
    )


def _refuse_secret_keys(data: Mapping[str, Any], *, path: Path, doc: Any = None) -> None:
    """A config file never holds a secret: refuse any key that names one (value not shown)."""

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if names_secret(str(key)):
                raise InvalidInputError(
                    f"{dotted}: secrets do not belong in a config file (value not shown)",
                    path=str(path),
                    line=_line_of(doc, dotted.split(".")) if doc is not None else None,
                    hint=_secret_env_hint(dotted),
                )
            if isinstance(value, Mapping):
                walk(value, dotted + ".")

    walk(data, "")


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's config file: `$AI_SDLC_CONFIG_HOME/config.yaml`, else the platform's
    config folder (`~/.config/ai-sdlc` on Linux)."""
    env = os.environ if environ is None else environ
    home = env.get(USER_CONFIG_ENV)
    if home:
        return Path(home).expanduser() / "config.yaml"
    return user_config_dir(env) / "config.yaml"


def user_config_dir(env: Mapping[str, str]) -> Path:
    """The platform's per-user config folder for ai-sdlc. On Linux and the BSDs this is the
    XDG rule, computed here: importing platformdirs costs about 15 ms, on every command."""
    if sys.platform in ("win32", "darwin", "ios") or hasattr(sys, "getandroidapilevel"):
        import platformdirs

        return Path(platformdirs.user_config_dir("ai-sdlc", appauthor=False))
    # XDG Base Directory spec: an unset, empty or relative $XDG_CONFIG_HOME means ~/.config.
    xdg = env.get("XDG_CONFIG_HOME", "")
    if posixpath.isabs(xdg):
        return Path(xdg, "ai-sdlc")
    return Path(_home_folder(env), ".config", "ai-sdlc")


def _home_folder(env: Mapping[str, str]) -> str:
    """$HOME when it is an absolute path, else the account's home from the password database
    (a relative or empty HOME would put the config under the current folder)."""
    home = env.get("HOME", "")
    if posixpath.isabs(home):
        return home.rstrip("/") or "/"
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir.rstrip("/") or "/"


def mask_setting(dotted: str, value: Any) -> Any:
    """`value` fit to print: a secret-named key shows as ***, URLs lose their credentials,
    token shapes and the environment's secret values are masked."""
    from ai_sdlc.secrets import MASK, mask_urls, redact

    if names_secret(dotted) and value not in (None, ""):
        return MASK
    if isinstance(value, Mapping):
        return {str(k): mask_setting(f"{dotted}.{k}", v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_setting(dotted, v) for v in value]
    if isinstance(value, str):
        return redact(mask_urls(value))
    return value


def defaults() -> dict[str, Any]:
    data: dict[str, Any] = {}
    for dotted, setting in SCHEMA.items():
        _set_path(data, dotted.split("."), copy.deepcopy(setting.default))
    data.setdefault("resilience", {})
    return data


def _set_path(data: dict[str, Any], parts: list[str], value: Any) -> None:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _get_path(data: Mapping[str, Any], parts: list[str]) -> Any:
    node: Any = data
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(".".join(parts))
        node = node[part]
    return node


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = _plain(value)


def _merge_over_user(base: dict[str, Any], project: Mapping[str, Any]) -> None:
    """The project's values over the user's, except that a `null` the project file leaves as
    written by `init` (no value chosen) does not erase a value the user chose."""
    for key, value in project.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge_over_user(base[key], value)
        elif value is not None or base.get(key) is None:
            base[key] = _plain(value)


def _leaves(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every non-mapping value (and of empty mappings), in order."""
    out: list[str] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(_leaves(value, dotted + "."))
        else:
            out.append(dotted)
    return out


def _plain(value: Any) -> Any:
    """ruamel containers → dicts/lists, so nothing downstream depends on ruamel."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Config(msgspec.Struct):
    """The effective configuration of one project."""

    data: dict[str, Any]
    path: Path
    #: The user's config file (it may not exist).
    user_path: Path | None = None
    #: (source, data) from the highest layer down: env, project, user (for `sources`).
    layers: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: Dotted key → the AI_SDLC_* variable that set it.
    env_names: dict[str, str] | None = None

    def sources(self) -> dict[str, str]:
        """Every effective dotted key → where its value comes from: `env:AI_SDLC_…`,
        `project:<path>`, `user:<path>` or `default`."""
        out: dict[str, str] = {}
        for dotted in _leaves(self.data):
            parts = dotted.split(".")
            out[dotted] = "default"
            effective = _get_path(self.data, parts)
            for source, layer in self.layers:
                try:
                    found = _get_path(layer, parts)
                except KeyError:
                    continue
                if found is None and effective is not None:
                    continue  # an unset (null) project value under a user's value
                if source == "env":
                    names = self.env_names or {}
                    name = next(
                        (n for d, n in names.items() if dotted == d or dotted.startswith(d + ".")),
                        "AI_SDLC_",
                    )
                    source = f"env:{name}"
                out[dotted] = source
                break
        return out

    def effective(self) -> dict[str, dict[str, Any]]:
        """Dotted key → {"value" (secrets masked), "source"}, for `config` and `doctor`."""
        sources = self.sources()
        return {
            dotted: {
                "value": mask_setting(dotted, _get_path(self.data, dotted.split("."))),
                "source": sources[dotted],
            }
            for dotted in sources
        }

    def get(self, dotted: str, default: Any = None) -> Any:
        try:
            return _get_path(self.data, dotted.split("."))
        except KeyError:
            return default

    def section(self, name: str) -> dict[str, Any]:
        value = self.data.get(name)
        return value if isinstance(value, dict) else {}


# --- loading -------------------------------------------------------------------------------


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


def _load_document(path: Path) -> Any:
    """The config file as ruamel round-trip data (keeps comments and line numbers)."""
    text = _read_text(path)
    return None if text is None else _parse_document(text, path)


def _parse_document(text: str, path: Path) -> Any:
    from ruamel.yaml.error import MarkedYAMLError

    try:
        doc = _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = str(exc.problem or exc.context)
        if "duplicate key" in problem:
            hint = "a key appears twice in the same mapping: merge the two into one"
        else:
            hint = (
                "fix the YAML syntax (quote values that contain ': ' or start with a special "
                "character)"
            )
        raise InvalidInputError(
            f"invalid YAML: {problem}",
            path=str(path),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint=hint,
        ) from None
    except Exception as exc:  # ruamel raises a few unmarked errors
        raise InvalidInputError(f"invalid YAML: {exc}", path=str(path)) from None
    if doc is not None and not isinstance(doc, Mapping):
        raise InvalidInputError(
            "the config must be a mapping of sections (ai, verify, limits, ...)",
            path=str(path),
            line=1,
            hint="start from the file `ai-sdlc init` writes",
        )
    return doc


def _read_text(path: Path) -> str | None:
    """config.yaml's text (None when there is none): a regular file only, within the YAML
    limits (size, depth, alias expansion), so that no config can hang a command."""
    from ai_sdlc import untrusted

    try:
        data = untrusted.read_regular(path)
    except FileNotFoundError:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"cannot read config: not UTF-8 text ({exc.reason})",
            path=str(path),
            hint="save it as UTF-8",
        ) from None
    untrusted.check_yaml(text, str(path))
    return text


def _line_of(doc: Any, parts: list[str]) -> int | None:
    """1-based line of a dotted key in a ruamel document, when known."""
    node = doc
    line = None
    for part in parts:
        lc = getattr(node, "lc", None)
        if not isinstance(node, Mapping) or part not in node:
            break
        if lc is not None:
            with contextlib.suppress(KeyError, TypeError):
                line = lc.key(part)[0] + 1
        node = node[part]
    return line


def validate(data: Mapping[str, Any], *, path: Path, doc: Any = None) -> None:
    """Check every known key; unknown keys in known sections are errors with a suggestion."""

    def fail(dotted: str, message: str, hint: str | None = None) -> None:
        raise InvalidInputError(
            f"{dotted}: {message}",
            path=str(path),
            line=_line_of(doc, dotted.split(".")) if doc is not None else None,
            hint=hint,
        )

    known_prefixes = {d.rsplit(".", 1)[0] for d in SCHEMA}
    known_sections = {d.split(".", 1)[0] for d in SCHEMA} | set(OPEN_SECTIONS)

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if dotted in SCHEMA:
                setting = SCHEMA[dotted]
                if not setting.check(value):
                    fail(dotted, f"must be {setting.expected}, got {_shown_value(value)}")
                continue
            section = dotted.split(".", 1)[0]
            if prefix == "ai." and key not in AI_KEYS:
                fail(dotted, "unknown setting", _suggest(key, list(AI_KEYS)))
            if prefix == "ai." and key in PROVIDER_SECTIONS and value is not None:
                if not isinstance(value, Mapping):
                    fail(dotted, "must be a mapping of settings")
                own = sorted(k.split(".", 1)[1] for k in PROVIDER_SCHEMA if k.startswith(key + "."))
                for inner, setting_value in value.items():
                    spec = PROVIDER_SCHEMA.get(f"{key}.{inner}")
                    if spec is None:
                        fail(f"{dotted}.{inner}", "unknown setting", _suggest(str(inner), own))
                    elif not spec.check(setting_value) and f"{dotted}.{inner}" not in BASE_URL_KEYS:
                        fail(
                            f"{dotted}.{inner}",
                            f"must be {spec.expected}, got {_shown_value(setting_value)}",
                        )
                continue
            if section in OPEN_SECTIONS and "." in dotted:
                continue
            if not prefix and key not in known_sections:
                fail(
                    dotted,
                    "unknown section",
                    _suggest(key, sorted(known_sections)),
                )
            if isinstance(value, Mapping) and (
                dotted in known_prefixes or section in OPEN_SECTIONS
            ):
                walk(value, dotted + ".")
            elif dotted in known_prefixes:
                fail(dotted, "must be a mapping")
            else:
                fail(dotted, "unknown setting", _suggest(dotted, sorted(SCHEMA)))

    walk(data, "")
    for dotted in BASE_URL_KEYS:  # inside the open `ai` section, so not reached by walk()
        try:
            url = _get_path(data, dotted.split("."))
        except KeyError:
            continue
        if not (url is None or is_http_url(url)):
            fail(
                dotted,
                f"must be an http:// or https:// URL, got {_shown_url(url)}",
                "e.g. https://api.example.com/v1 (or null for the provider's default)",
            )
    resilience = data.get("resilience")
    if resilience:
        _validate_resilience(resilience, path=path, doc=doc)


def _validate_resilience(section: Any, *, path: Path, doc: Any) -> None:
    """`resilience.*` belongs to the resilience package; report its errors with file and line."""
    import re

    from ai_sdlc.resilience.config import load_settings

    try:
        load_settings(section)
    except InvalidInputError as exc:
        match = re.search(r"resilience(?:\.[\w-]+)+", exc.message)
        line = None
        if match and doc is not None:
            line = _line_of(doc, match.group(0).split("."))
        raise InvalidInputError(exc.message, path=str(path), line=line, hint=exc.hint) from None


def _shown_value(value: Any) -> str:
    """repr(value) with any credential in it masked."""
    from ai_sdlc.secrets import mask_urls, redact

    return redact(mask_urls(repr(value)))


def _shown_url(value: Any) -> str:
    from ai_sdlc.secrets import mask_url

    return repr(mask_url(value)) if isinstance(value, str) else repr(value)


def _suggest(word: str, choices: list[str]) -> str | None:
    import difflib  # only for a misspelt key

    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean '{close[0]}'?" if close else None


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """`AI_SDLC_PROVIDER`, `AI_SDLC_MODEL`, and `AI_SDLC_<SECTION>__<KEY>=<yaml scalar>`."""
    out: dict[str, Any] = {}
    if environ.get("AI_SDLC_PROVIDER"):
        _set_path(out, ["ai", "provider"], environ["AI_SDLC_PROVIDER"])
    if environ.get("AI_SDLC_MODEL"):
        _set_path(out, ["ai", "model"], environ["AI_SDLC_MODEL"])
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if len(parts) >= 2:
            _set_path(out, parts, parse_scalar(raw))
    return out


def _env_names(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted key → the AI_SDLC_* variable that sets it (as `_env_overrides` reads them)."""
    names = {
        ".".join(p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p): name
        for name in environ
        if name.startswith(ENV_PREFIX) and "__" in name
    }
    for name, dotted in (("AI_SDLC_PROVIDER", "ai.provider"), ("AI_SDLC_MODEL", "ai.model")):
        if environ.get(name):
            names[dotted] = name
    return names


def _looser(dotted: str, project: Any, wanted: Any) -> bool:
    """True when `wanted` would make the guardrail `dotted` less strict than `project`."""
    if dotted.startswith(("gates.", "sandbox.")):
        return bool(project) and not wanted
    if wanted is None:  # no limit at all
        return project is not None
    return project is not None and wanted > project


def _loosened(layer: Mapping[str, Any], base: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """(key, base value, layer value) of every guardrail `layer` sets looser than `base`."""
    for dotted in GUARDRAILS:
        parts = dotted.split(".")
        try:
            wanted = _get_path(layer, parts)
        except KeyError:
            continue
        current = _get_path(base, parts)
        if _looser(dotted, current, wanted):
            yield dotted, current, wanted


def _refuse_looser_guardrails(
    env: Mapping[str, Any],
    project: Mapping[str, Any],
    environ: Mapping[str, str],
    origin: Callable[[str], str],
) -> None:
    """An environment variable may tighten a guardrail, never loosen it (InvalidInputError)."""
    names = {
        ".".join(p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p): name
        for name in environ
        if name.startswith(ENV_PREFIX) and "__" in name
    }
    for dotted, current, _wanted in _loosened(env, project):
        name = names.get(dotted, ENV_PREFIX + dotted.upper().replace(".", "__"))
        shown = "null" if current is None else str(current).lower()
        raise InvalidInputError(
            f"{name}={environ.get(name, '')} would loosen the guardrail {dotted} (the project's "
            f"value is {shown}, from {origin(dotted)}); the "
            "environment may only make a guardrail stricter",
            hint=f"unset {name}, or change the project's value where it is reviewed: "
            f"`ai-sdlc config {dotted} <value>` (writes {CONFIG_RELPATH})",
        )


def parse_scalar(raw: str) -> Any:
    """A value typed on the command line or in the environment, read as YAML 1.2 the way the
    config file itself is read (`010` is 10, `yes` is text); text that is not YAML stays as is."""
    from ai_sdlc.store import fastload

    try:
        value = fastload.load(raw)
    except fastload.NotFast:
        from ruamel.yaml import YAML

        try:
            value = YAML(typ="safe", pure=True).load(raw)
        except Exception:  # any ruamel complaint: not YAML, so the text as typed
            return raw
    return value if value is not None or raw.strip() in ("null", "~", "") else raw


def _fast_document(path: Path) -> Any:
    """The config as plain data through the fast YAML 1.2 loader (libyaml); None when only the
    round-trip loader can tell (it also words the precise error)."""
    from ai_sdlc.store.fastload import NotFast, load

    try:
        text = _read_text(path)
    except InvalidInputError:
        return None  # the slow path raises the same error
    if text is None:
        return {}
    try:
        value = load(text)
    except NotFast:
        return None
    return value if value is None or isinstance(value, Mapping) else None


def _load_layer(path: Path) -> dict[str, Any]:
    """One config file as plain data, checked (secrets, schema) with file:line on any error;
    {} when there is no such file."""
    file_data = _fast_document(path)
    if isinstance(file_data, Mapping):
        try:
            _refuse_secret_keys(file_data, path=path)
            validate(file_data, path=path)
            plain: dict[str, Any] = _plain(file_data)
            return plain
        except InvalidInputError:
            pass  # the slow path below reports it with its line
    doc = _load_document(path)
    data: dict[str, Any] = _plain(doc) if doc else {}
    _refuse_secret_keys(data, path=path, doc=doc)
    validate(data, path=path, doc=doc)
    return data


def _refuse_user_loosening(user: Mapping[str, Any], project: Mapping[str, Any], path: Path) -> None:
    """The user's file may not hold a guardrail looser than the project's value (its own, or
    the default): a setting on one machine must not switch a reviewed guardrail off."""
    base = defaults()
    _deep_merge(base, project)
    for dotted, current, wanted in _loosened(user, base):
        shown = "null" if current is None else str(current).lower()
        raise InvalidInputError(
            f"{dotted}: {_render(wanted)} would loosen a guardrail (this project's value is "
            f"{shown}); the user config may only make a guardrail stricter",
            path=str(path),
            line=_line_of(_load_document(path), dotted.split(".")),
            hint=f"remove it from {path}, or set it in the project where it is reviewed: "
            f"`ai-sdlc config {dotted} <value>` (writes {CONFIG_RELPATH})",
        )


def load_config(root: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """defaults ⊕ user file ⊕ project file ⊕ environment, each checked."""
    environ = os.environ if environ is None else environ
    path = root / CONFIG_RELPATH
    user_path = user_config_path(environ)
    user_data = _load_layer(user_path)
    project_data = _load_layer(path)
    if user_data:
        _refuse_user_loosening(user_data, project_data, user_path)
    data = defaults()
    _deep_merge(data, user_data)
    _merge_over_user(data, project_data)
    env = _env_overrides(environ)
    layers = (("env", env), (f"project:{path}", project_data), (f"user:{user_path}", user_data))

    def origin(dotted: str) -> str:
        for source, layer in layers[1:]:
            with contextlib.suppress(KeyError):
                _get_path(layer, dotted.split("."))
                return source.partition(":")[2]
        return "the defaults"

    if env:
        validate(env, path=Path("<environment>"))
        _refuse_looser_guardrails(env, data, environ, origin)
        _deep_merge(data, env)
    return Config(
        data=data, path=path, user_path=user_path, layers=layers, env_names=_env_names(environ)
    )


def file_settings(root: Path, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """defaults ⊕ user file ⊕ project file, without the environment: what the files say (the
    guardrail record of `configguard` is kept against it)."""
    environ = os.environ if environ is None else environ
    data = defaults()
    _deep_merge(data, _load_layer(user_config_path(environ)))
    _merge_over_user(data, _load_layer(root / CONFIG_RELPATH))
    return data


# --- editing ---------------------------------------------------------------------------------


#: The `worktree.setup` line of `DEFAULT_CONFIG_TEXT` (`init` writes its proposal there).
DEFAULT_SETUP_LINE = (
    "  setup: []                    # command lines run in a new worktree (no shell), "
    'e.g. ["npm ci"]'
)


def write_default_config(root: Path, *, setup_line: str | None = None) -> bool:
    """Create config.yaml with the commented defaults (`setup_line`: the `worktree.setup` line
    to write instead of the default); False when it already exists."""
    from ai_sdlc.fsutil import atomic_write_text

    path = root / CONFIG_RELPATH
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    text = DEFAULT_CONFIG_TEXT
    if setup_line is not None:
        text = text.replace(DEFAULT_SETUP_LINE, setup_line)
    atomic_write_text(path, text)
    return True


def get_value(root: Path, dotted: str) -> Any:
    config = load_config(root)
    try:
        return _get_path(config.data, dotted.split("."))
    except KeyError:
        raise UsageError(
            f"unknown config key '{dotted}'", hint=_suggest(dotted, sorted(SCHEMA))
        ) from None


def set_value(root: Path, dotted: str, raw: str, *, user: bool = False) -> Any:
    """Set one dotted key in the project's config.yaml (or, with `user`, the user's), keeping
    every comment; validated before writing, and never a secret."""
    from ruamel.yaml.comments import CommentedMap

    from ai_sdlc.fsutil import atomic_write_text
    from ai_sdlc.locks import SidecarLock

    parts = [p for p in dotted.split(".") if p]
    if not parts or any(not p.replace("_", "").replace("-", "").isalnum() for p in parts):
        raise UsageError(f"'{dotted}' is not a dotted config key (e.g. limits.global_recovery)")
    path = user_config_path() if user else root / CONFIG_RELPATH
    if names_secret(dotted):
        raise InvalidInputError(
            f"{dotted}: secrets do not belong in a config file; nothing was written to {path}",
            hint=_secret_env_hint(dotted),
        )
    value = parse_scalar(raw)
    setting = SCHEMA.get(dotted)
    if setting is not None and not setting.check(value) and setting.check(raw):
        value = raw  # e.g. `verify.test false`: the command `false`, not the boolean
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_dir = path.parent if user else root / ".ai-sdlc" / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with SidecarLock(lock_dir / "config.yaml.lock"):
        current = _read_text(path)
        text = (DEFAULT_CONFIG_TEXT if not user else "") if current is None else current
        doc = _parse_document(text, path)
        if doc is None:
            doc = CommentedMap()
        node = doc
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, Mapping):
                child = CommentedMap()
                node[part] = child
            node = child
        node[parts[-1]] = value
        plain = _plain(doc)
        _refuse_secret_keys(plain, path=path, doc=doc)
        validate(plain, path=path, doc=doc)
        if (
            not any(d == dotted or d.startswith(dotted + ".") for d in SCHEMA)
            and parts[0] not in OPEN_SECTIONS
        ):
            raise UsageError(
                f"unknown config key '{dotted}'", hint=_suggest(dotted, sorted(SCHEMA))
            )
        if user:
            project = root / CONFIG_RELPATH
            _refuse_user_loosening(plain, _load_layer(project) if project.exists() else {}, path)
        atomic_write_text(path, _edited_text(text, parts, value, plain))
    return value


# --- line-exact edits ------------------------------------------------------------------------


def _edited_text(text: str, parts: list[str], value: Any, expected: Any) -> str:
    """`text` with only the lines of `parts` changed to hold `value`; when the file's shape
    does not allow that (flow mappings, anchors...), a full re-dump that keeps comments and
    writes null as `null`. Either result is re-read and must equal `expected`."""
    try:
        spliced = _splice(text, parts, value)
    except Exception:  # an odd layout: fall back to the full dump below
        spliced = None
    if spliced is not None and _same_settings(spliced, expected):
        return spliced
    yaml = _yaml()
    yaml.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    doc = yaml.load(text) or {}
    node = doc
    for part in parts[:-1]:
        if not isinstance(node.get(part), Mapping):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()


def _same_settings(text: str, expected: Any) -> bool:
    import json

    try:
        got = _plain(_yaml().load(text))
    except Exception:
        return False
    return json.dumps(got, sort_keys=True, default=repr) == json.dumps(
        expected, sort_keys=True, default=repr
    )


def _splice(text: str, parts: list[str], value: Any) -> str | None:
    """Replace (or insert) one setting's value in place; None when it cannot be done exactly."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    newline = "\r\n" if "\r\n" in text else "\n"
    root = _yaml().compose(text) if text.strip() else None
    rendered = _render(value)
    if root is None:
        return (
            text
            + ("" if not text or text.endswith("\n") else newline)
            + _lines(parts, rendered, 0, newline)
        )
    node = root
    for depth, part in enumerate(parts):
        if not isinstance(node, MappingNode) or node.flow_style or node.anchor:
            return None
        found = next(
            ((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == part),
            None,
        )
        if found is None:
            return _insert(text, node, parts[depth:], rendered, newline)
        key, child = found
        if depth < len(parts) - 1:
            node = child
            continue
        if getattr(child, "anchor", None) or child.tag.startswith("!"):
            return None
        if isinstance(child, ScalarNode) and child.value == "" and not child.style:
            colon = text.index(":", key.end_mark.index)  # `key:` with no value written
            return text[: colon + 1] + " " + rendered + text[colon + 1 :]
        start, end = child.start_mark.index, child.end_mark.index
        if isinstance(child, ScalarNode):
            return text[:start] + rendered + _keep_comment_column(text[end:], end - start, rendered)
        # A block list or mapping: the new value goes inline after the key.
        colon = text.index(":", key.end_mark.index)
        line_end = _end_of_line(text, end if text[end - 1 : end] != "\n" else end - 1)
        return text[: colon + 1] + " " + rendered + newline + text[line_end:]
    return None


def _keep_comment_column(rest: str, old_width: int, rendered: str) -> str:
    """`rest` (what follows the replaced value) with the spaces before a trailing comment
    adjusted so that the comment stays in its column where possible."""
    spaces = len(rest) - len(rest.lstrip(" "))
    if not rest[spaces:].startswith("#") or spaces == 0:
        return rest
    wanted = max(1, spaces + old_width - len(rendered))
    return " " * wanted + rest[spaces:]


def _insert(text: str, mapping: Any, parts: list[str], rendered: str, newline: str) -> str | None:
    if not mapping.value:
        return None
    last_value = mapping.value[-1][1]
    indent = mapping.value[0][0].start_mark.column
    end = last_value.end_mark
    at = end.index if end.column == 0 else _end_of_line(text, end.index)
    prefix = "" if at == 0 or text[at - 1] == "\n" else newline
    return text[:at] + prefix + _lines(parts, rendered, indent, newline) + text[at:]


def _end_of_line(text: str, index: int) -> int:
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _lines(parts: list[str], rendered: str, indent: int, newline: str) -> str:
    lines = [" " * (indent + 2 * i) + f"{part}:" for i, part in enumerate(parts[:-1])]
    lines.append(" " * (indent + 2 * (len(parts) - 1)) + f"{parts[-1]}: {rendered}")
    return newline.join(lines) + newline


_PLAIN_TEXT = re.compile(r"[A-Za-z0-9_./@+=-](?:[A-Za-z0-9 _./@+=,-]*[A-Za-z0-9_./@+=-])?\Z")


def _render(value: Any) -> str:
    """One YAML 1.2 flow value (JSON where a plain word would not read back the same)."""
    import json

    from ai_sdlc.store.fastload import resolves_to_text

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, str):
        if _PLAIN_TEXT.match(value) and resolves_to_text(value):
            return value
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_render(str(k))}: {_render(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)
