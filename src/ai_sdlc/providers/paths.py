"""The path rules every provider shares: what a model (or a scripted rule) may name below a
workspace, judged first on the text (`path_problem`), then on the real path (`confine`).

Absolute paths, `~`, `..` and NUL are refused; for writing also backslashes and any `.git` or
`.ai-sdlc` component, case-insensitively, so that nothing but ai-sdlc writes its story files,
counters or config; symlinks are followed and must stay inside the workspace.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

#: Folders a model or a scripted rule may read but never write, at any depth and in any letter
#: case (`.AI-SDLC/` is the same folder on a case-insensitive file system).
PROTECTED_DIRS = frozenset({".git", ".ai-sdlc"})


class PathRefused(ValueError):
    """A path an agent or a rule may not use; the message says why."""


def path_problem(raw: object, *, write: bool) -> str | None:
    """Why `raw` may not be used below a workspace (judged on the text alone), or None.

    Absolute paths, `~`, `..` and NUL are refused; for writing also backslashes (a Windows
    separator in disguise) and any `.git` or `.ai-sdlc` component, case-insensitively: nothing
    but ai-sdlc itself writes its story files, counters or config.
    """
    if not isinstance(raw, str):
        return "is not a string"
    if "\x00" in raw:
        return "contains a NUL character"
    text = raw.strip()
    if write and not text:
        return "is empty"
    if write and "\\" in raw:
        return "contains a backslash"
    pure = PurePosixPath(text or ".")
    if pure.is_absolute() or text.startswith("~") or (len(text) > 1 and text[1] == ":"):
        return "is absolute; use a path relative to the workspace"
    if ".." in pure.parts:
        return "climbs out with '..'; paths must stay inside the workspace"
    if write:
        protected = _protected_part(pure.parts)
        if protected is not None:
            return f"points into {protected} (a protected folder: never written by an agent)"
    return None


def _protected_part(parts: Sequence[str]) -> str | None:
    for part in parts:
        if part.casefold() in PROTECTED_DIRS:
            return part
    return None


def confine(root: Path, raw: object, *, write: bool = False) -> Path:
    """The one confinement check every provider uses: the real path of `raw` below `root`.

    Refuses what `path_problem` refuses, then resolves symlinks and refuses a result outside
    `root` or (for writing) the root itself or anything inside a protected folder.
    """
    problem = path_problem(raw, write=write)
    if problem is not None:
        raise PathRefused(f"{raw!r} {problem}")
    assert isinstance(raw, str)
    base = Path(os.path.realpath(root))
    resolved = Path(os.path.realpath(base / (raw.strip() or ".")))
    if resolved != base and not resolved.is_relative_to(base):
        raise PathRefused(f"{raw!r} leads outside the workspace (symlink) to {resolved}")
    if write:
        rel = resolved.relative_to(base)
        protected = _protected_part(rel.parts)
        if resolved == base or protected is not None:
            raise PathRefused(f"{raw!r} is not writable (protected folder)")
    return resolved
