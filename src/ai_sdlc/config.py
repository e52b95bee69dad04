"""`.ai-sdlc/config.yaml`: defaults, validation with file:line errors, env overrides, and
comment-preserving edits for `ai-sdlc config key value`.

The effective config is a plain nested dict (defaults ⊕ file ⊕ environment). Sections that belong
to another package (`resilience.policies`, provider sub-sections under `ai`) are passed through here
and validated by their owners.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import io
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError, UsageError

CONFIG_RELPATH = Path(".ai-sdlc") / "config.yaml"
ENV_PREFIX = "AI_SDLC_"

PROVIDER_CHOICES = ("scripted", "dry-run", "openai", "anthropic", "claude", "command")

DEFAULT_CONFIG_TEXT = """\
# ai-sdlc configuration. Edit by hand or with `ai-sdlc config <dotted.key> <value>`.
# Every key is optional; the values shown are the defaults.

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

limits:
  global_recovery: 10          # every recovery of every kind counts; the story blocks here
  implementation_retries: 3
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

notify:                        # told when a run halts (the diagnostic JSON)
  command: null                # e.g. ["python", "notify.py"]: run without a shell, JSON on stdin
  webhook: null                # e.g. https://hooks.example.com/...: JSON POSTed
"""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, int | float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class Setting:
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
    return v is None or (isinstance(v, str) and v.startswith(("http://", "https://")))


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
    "verify.build": Setting(None, _opt_str, "a command line or null"),
    "verify.test": Setting(None, _opt_str, "a command line or null"),
    "verify.timeout": Setting(600, _pos_number, "a number of seconds > 0"),
    "limits.global_recovery": Setting(10, _pos_int, "an integer >= 1"),
    "limits.implementation_retries": Setting(3, _nonneg_int, "an integer >= 0"),
    "limits.review_rejections": Setting(3, _nonneg_int, "an integer >= 0"),
    "limits.refinement_iterations": Setting(5, _nonneg_int, "an integer >= 0"),
    "limits.phase_timeout": Setting(900, _pos_number, "a number of seconds > 0"),
    "limits.story_tokens": Setting(None, _opt_pos_number, "a positive number or null"),
    "limits.story_cost_usd": Setting(None, _opt_pos_number, "a positive number or null"),
    "limits.run_cost_usd": Setting(None, _opt_pos_number, "a positive number or null"),
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
    "notify.command": Setting(None, _opt_command, "a command line, an argument list or null"),
    "notify.webhook": Setting(None, _opt_url, "an http(s) URL or null"),
}

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


def _plain(value: Any) -> Any:
    """ruamel containers → dicts/lists, so nothing downstream depends on ruamel."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass
class Config:
    """The effective configuration of one project."""

    data: dict[str, Any]
    path: Path

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
    from ruamel.yaml.error import MarkedYAMLError

    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read config: {exc}", path=str(path)) from None
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
                    fail(dotted, f"must be {setting.expected}, got {value!r}")
                continue
            section = dotted.split(".", 1)[0]
            if prefix == "ai." and key not in AI_KEYS:
                fail(dotted, "unknown setting", _suggest(key, list(AI_KEYS)))
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


def _suggest(word: str, choices: list[str]) -> str | None:
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


def parse_scalar(raw: str) -> Any:
    """A value typed on the command line or in the environment, read as a YAML scalar."""
    import yaml

    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    # YAML 1.1 would read yes/no/on/off as booleans; only true/false are booleans here.
    if isinstance(value, bool) and raw.strip().lower() not in ("true", "false"):
        return raw
    return value if value is not None or raw.strip() in ("null", "~", "") else raw


def _fast_document(path: Path) -> Any:
    """The config as plain data through the fast YAML 1.2 loader; None when only the
    round-trip loader can tell (it also words the precise error)."""
    from ai_sdlc.store.fastload import NotFast, load

    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError):
        return None
    try:
        value = load(text)
    except NotFast:
        return None
    return value if value is None or isinstance(value, Mapping) else None


def load_config(root: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    path = root / CONFIG_RELPATH
    data = defaults()
    file_data = _fast_document(path)
    valid = False
    if isinstance(file_data, Mapping):
        try:
            validate(file_data, path=path)
            valid = True
        except InvalidInputError:
            valid = False
    if not valid:  # slow path: ruamel finds the line of whatever is wrong
        doc = _load_document(path)
        file_data = _plain(doc) if doc else {}
        validate(file_data, path=path, doc=doc)
    if file_data:
        _deep_merge(data, file_data)
    env = _env_overrides(os.environ if environ is None else environ)
    if env:
        validate(env, path=Path("<environment>"))
        _deep_merge(data, env)
    return Config(data=data, path=path)


# --- editing ---------------------------------------------------------------------------------


def write_default_config(root: Path) -> bool:
    """Create config.yaml with the commented defaults; False when it already exists."""
    from ai_sdlc.fsutil import atomic_write_text

    path = root / CONFIG_RELPATH
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, DEFAULT_CONFIG_TEXT)
    return True


def get_value(root: Path, dotted: str) -> Any:
    config = load_config(root)
    try:
        return _get_path(config.data, dotted.split("."))
    except KeyError:
        raise UsageError(
            f"unknown config key '{dotted}'", hint=_suggest(dotted, sorted(SCHEMA))
        ) from None


def set_value(root: Path, dotted: str, raw: str) -> Any:
    """Set one dotted key in config.yaml, keeping every comment; validated before writing."""
    from filelock import FileLock
    from ruamel.yaml.comments import CommentedMap

    from ai_sdlc.fsutil import atomic_write_text

    parts = [p for p in dotted.split(".") if p]
    if not parts or any(not p.replace("_", "").replace("-", "").isalnum() for p in parts):
        raise UsageError(f"'{dotted}' is not a dotted config key (e.g. limits.global_recovery)")
    value = parse_scalar(raw)
    setting = SCHEMA.get(dotted)
    if setting is not None and not setting.check(value) and setting.check(raw):
        value = raw  # e.g. `verify.test false`: the command `false`, not the boolean
    path = root / CONFIG_RELPATH
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_dir = root / ".ai-sdlc" / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_dir / "config.yaml.lock")):
        doc = _load_document(path)
        if doc is None:
            doc = _yaml().load(DEFAULT_CONFIG_TEXT) if not path.exists() else CommentedMap()
        node = doc
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, Mapping):
                child = CommentedMap()
                node[part] = child
            node = child
        node[parts[-1]] = value
        plain = _plain(doc)
        validate(plain, path=path, doc=doc)
        if (
            not any(d == dotted or d.startswith(dotted + ".") for d in SCHEMA)
            and parts[0] not in OPEN_SECTIONS
        ):
            raise UsageError(
                f"unknown config key '{dotted}'", hint=_suggest(dotted, sorted(SCHEMA))
            )
        buf = io.StringIO()
        _yaml().dump(doc, buf)
        atomic_write_text(path, buf.getvalue())
    return value
