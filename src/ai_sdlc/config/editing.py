"""`ai-sdlc config KEY VALUE` and `init`'s file: a value typed by its key's model, written into
the file in place (every comment kept), checked before it is written and never a secret."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ai_sdlc.config.effective import _get_path, _plain
from ai_sdlc.config.files import CONFIG_RELPATH, _parse_document, _read_text, user_config_path
from ai_sdlc.config.keys import OPEN_SECTIONS, SCHEMA, SECTIONS
from ai_sdlc.config.layers import _load_layer, _refuse_user_loosening, load_config, parse_scalar
from ai_sdlc.config.secrets import _refuse_secret_keys, _secret_env_hint, names_secret
from ai_sdlc.config.text import DEFAULT_CONFIG_TEXT, DEFAULT_SETUP_LINE
from ai_sdlc.config.validate import shown_value, suggest, type_hint, validate
from ai_sdlc.config.yamledit import edited_text
from ai_sdlc.errors import InvalidInputError, UsageError


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
            f"unknown config key '{dotted}'", hint=suggest(dotted, sorted(SCHEMA))
        ) from None


def typed_value(dotted: str, raw: str) -> Any:
    """`raw` as typed on the command line, typed by the key's model: read as YAML 1.2 (`010`
    is 10), but kept as text where the key holds text (`ai.model 4` is "4", `verify.test
    false` the command `false`). A value of the wrong type is left for `validate` to refuse
    with the file, the line, the key and its type."""
    value = parse_scalar(raw)
    setting = SCHEMA.get(dotted)
    if (
        setting is not None
        and not isinstance(value, str)  # YAML made it something else: maybe text was meant
        and not setting.check(value)
        and setting.check(raw)
    ):
        return raw
    return value


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
    # A mistyped key is the command line's fault, not the file's: said before any file is read.
    if (
        not any(d == dotted or d.startswith(dotted + ".") for d in (*SCHEMA, *SECTIONS))
        and parts[0] not in OPEN_SECTIONS
    ):
        raise UsageError(f"unknown config key '{dotted}'", hint=suggest(dotted, sorted(SCHEMA)))
    value = typed_value(dotted, raw)
    setting = SCHEMA.get(dotted)
    if setting is not None and not setting.check(value):
        # The value typed on the command line is wrong, not the file: a usage error (exit 2,
        # as `ai-sdlc set` says of a bad value), with no file position.
        raise UsageError(
            f"{dotted}: must be {setting.expected}, got {shown_value(value)}",
            hint=type_hint(dotted),
        )
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
        if user:
            project = root / CONFIG_RELPATH
            _refuse_user_loosening(plain, _load_layer(project) if project.exists() else {}, path)
        atomic_write_text(path, edited_text(text, parts, value, live=doc, where=str(path)))
    return value
