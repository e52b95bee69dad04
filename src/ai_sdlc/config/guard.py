"""Guardrail settings changed behind the tool's back are refused until a person confirms them.

`.ai-sdlc/config.yaml` sits next to the worktree: an agent or a verify command can raise
`limits.global_recovery` or set `verify.test: "true"`, and the next run would simply obey. So
the guardrail keys of the config files (those the models mark `guard=`: every key under
`limits`, `verify`, `gates`, `sandbox`, `worktree`, `git.worktrees` and `pr.trusted_bots`:
anything that would loosen a guardrail) are recorded as
*accepted* outside the project, in the user's state folder (`statehome`), where nothing done in
the project (an edit, `git clean -xfd`, `rm -rf .ai-sdlc`) reaches them. A run compares
the files with that record when it starts and again before every phase and every
verification; any difference stops it (exit 3) naming each key, until a person confirms:
`ai-sdlc config --accept` accepts the files as they are, and `ai-sdlc config KEY VALUE`
accepts the key it sets. The first run of a project records its settings silently. The
environment is not part of the record: it can only tighten a guardrail (see `config`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ai_sdlc.config.files import CONFIG_RELPATH, user_config_path
from ai_sdlc.config.keys import GUARDED, SCHEMA, SECTIONS
from ai_sdlc.config.layers import file_settings
from ai_sdlc.errors import InvalidInputError
from ai_sdlc.secrets import redact
from ai_sdlc.statehome import ProjectState

#: Top-level sections all of whose keys are guarded, and the other guarded keys: derived from
#: the models' markers (`keys.GUARDED`).
GUARDED_SECTIONS = tuple(
    s
    for s in SECTIONS
    if "." not in s and all(k in GUARDED for k in SCHEMA if k.startswith(s + "."))
)
GUARDED_KEYS = tuple(k for k in GUARDED if k.split(".", 1)[0] not in GUARDED_SECTIONS)
RECORD = "config-guardrails.json"


class ConfigChangedError(InvalidInputError):
    """Guardrail settings differ from the accepted ones (exit 3)."""

    def __init__(self, message: str, changes: dict[str, list[str]], *, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.changes = changes


def is_guarded(dotted: str) -> bool:
    return dotted.split(".", 1)[0] in GUARDED_SECTIONS or any(
        dotted == k or dotted.startswith(k + ".") for k in GUARDED_KEYS
    )


def guarded_values(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted guardrail key → value, from merged config data."""
    out: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping) and value:
                walk(value, dotted + ".")
            elif is_guarded(dotted):
                out[dotted] = value

    walk(settings, "")
    return out


def fingerprint(values: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(values)).hexdigest()


def _canonical(values: Mapping[str, Any]) -> bytes:
    return json.dumps(values, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")


def _new_default(key: str, now: Mapping[str, Any]) -> bool:
    """`key` is in `now` at its default value (recorded by an older ai-sdlc without it)."""
    setting = SCHEMA.get(key)
    return setting is not None and key in now and now[key] == setting.default


class GuardrailRecord:
    """The accepted guardrail settings of one project."""

    def __init__(self, root: Path, environ: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.environ = os.environ if environ is None else environ
        self.home = ProjectState(root, self.environ)
        self._stamp: tuple[Any, ...] | None = None
        self._values: dict[str, Any] = {}

    def current(self) -> dict[str, Any]:
        """The files' guardrail values now (re-read only when a file's stamp changed)."""
        paths = (self.root / CONFIG_RELPATH, user_config_path(self.environ))
        stamp = tuple(_stamp(p) for p in paths)
        if stamp != self._stamp:
            self._values = guarded_values(file_settings(self.root, self.environ))
            self._stamp = stamp
        return dict(self._values)

    def accepted(self) -> list[dict[str, Any]]:
        """The record, when there is one ([]: the project never ran here)."""
        blob = self.home.read(RECORD)
        if blob is None:
            return []
        try:
            data = json.loads(blob)
        except ValueError:
            data = None
        values = data.get("values") if isinstance(data, dict) else None
        return [values if isinstance(values, dict) else {"<record>": "unreadable"}]

    def save(self, values: Mapping[str, Any]) -> None:
        blob = _canonical({"fingerprint": fingerprint(values), "values": dict(values)})
        self.home.write(RECORD, blob)

    def changes(self) -> dict[str, tuple[Any, Any]]:
        """Key → (accepted, now) for every guardrail key that differs from a record; when no
        record exists yet (a project's first run), the settings are recorded now."""
        now = self.current()
        records = self.accepted()
        if not records:
            self.save(now)
            return {}
        out: dict[str, tuple[Any, Any]] = {}
        for record in records:
            for key in sorted(set(record) | set(now)):
                if key not in record and _new_default(key, now):
                    continue  # a key a newer ai-sdlc added, at its default: nothing changed
                if record.get(key, _MISSING) != now.get(key, _MISSING) and key not in out:
                    out[key] = (record.get(key, _MISSING), now.get(key, _MISSING))
        return out

    def check(self, when: str) -> None:
        """Raise `ConfigChangedError` when the files' guardrails differ from the accepted."""
        changed = self.changes()
        if not changed:
            return
        listed = "; ".join(f"{k}: {shown(a)} -> {shown(b)}" for k, (a, b) in changed.items())
        raise ConfigChangedError(
            f"guardrail settings were changed outside `ai-sdlc config` {when}: {listed} "
            f"({self.root / CONFIG_RELPATH}, or the user's config)",
            {k: [shown(a), shown(b)] for k, (a, b) in changed.items()},
            hint="if a person made this change, confirm it with `ai-sdlc config --accept` "
            "(or set each key with `ai-sdlc config KEY VALUE`); otherwise put the old values "
            "back (an agent or a verify command may have edited the file)",
        )

    def accept(self, keys: str | None = None) -> dict[str, tuple[Any, Any]]:
        """Accept the files as they are (`keys` None), or only the keys at/under the dotted
        `keys` (what `ai-sdlc config KEY VALUE` just set); returns what changed."""
        now = self.current()
        records = self.accepted()
        if not records or keys is None:
            differences = self.changes() if records else {}
            self.save(now)
            return differences
        base = dict(records[0])
        changed: dict[str, tuple[Any, Any]] = {}
        for key in set(base) | set(now):
            if key == keys or key.startswith(keys + "."):
                if base.get(key, _MISSING) != now.get(key, _MISSING):
                    changed[key] = (base.get(key, _MISSING), now.get(key, _MISSING))
                if key in now:
                    base[key] = now[key]
                else:
                    base.pop(key, None)
        self.save(base)
        return changed


class _Missing:
    def __repr__(self) -> str:
        return "(unset)"


_MISSING: Any = _Missing()


def shown(value: Any) -> str:
    """A value for a message (JSON, redacted; `(unset)` for a missing key)."""
    if value is _MISSING:
        return "(unset)"
    return redact(json.dumps(value, ensure_ascii=False, default=str))


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns
