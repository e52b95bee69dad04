"""Reading config files: where they are, their text within the YAML limits, their parsed
document (with line numbers for messages)."""

from __future__ import annotations

import contextlib
import os
import posixpath
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ai_sdlc.environ import home_folder
from ai_sdlc.errors import InvalidInputError

CONFIG_RELPATH = Path(".ai-sdlc") / "config.yaml"

#: Points the user config at `<folder>/config.yaml` instead of the platform's config folder.
USER_CONFIG_ENV = "AI_SDLC_CONFIG_HOME"


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
    return Path(home_folder(env), ".config", "ai-sdlc")


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
