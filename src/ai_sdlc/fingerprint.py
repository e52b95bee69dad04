"""A content hash of a plain folder, to tell "the implementation changed nothing" outside git.

In a git work tree the runner asks git instead (`ai_sdlc.git.changes`: `git status` and
`git diff` read only the files whose metadata changed, so their cost follows the change, not the
repository). This is the fallback for a project that is not in a git repository (or sits in a
folder its repository ignores): every file is hashed, so its cost grows with the folder. The
hash covers each file's path, content, executable bit and symlink target, and skips folders
that are never the implementation's work (`.git`, virtualenvs, caches, `node_modules`, and
`.ai-sdlc`, which the runner itself writes during a phase); the walk never descends into them.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ai_sdlc.errors import InvalidInputError

EXCLUDED_DIRS = frozenset({".git", ".venv", "__pycache__", "node_modules", ".ai-sdlc"})


def workspace_fingerprint(path: Path) -> str:
    """sha256 over (relative path, kind, mode, content) of every file that belongs to the work."""
    root = path.resolve()
    if not root.is_dir():
        raise InvalidInputError(f"cannot fingerprint {path}: no such folder")
    digest = hashlib.sha256()
    for relative in sorted(_walk_files(root)):
        digest.update(relative.encode("utf-8", errors="surrogateescape"))
        digest.update(b"\0")
        digest.update(entry_digest(root / relative))
        digest.update(b"\0")
    return digest.hexdigest()


def entry_digest(path: Path) -> bytes:
    """What one entry is: deleted, a link and its target, a folder, or a file's executable bit
    and content hash."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return b"deleted"
    except OSError as exc:
        return f"unreadable:{exc.errno}".encode()
    if stat.S_ISLNK(info.st_mode):
        return b"link:" + os.fsencode(os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        return b"dir"  # a git submodule or a symlink-free nested repo: its files are its own
    if not stat.S_ISREG(info.st_mode):
        return b"special"
    executable = b"x" if info.st_mode & stat.S_IXUSR else b"-"
    try:
        with path.open("rb") as handle:
            content = hashlib.file_digest(handle, "sha256").digest()
    except OSError as exc:
        return f"unreadable:{exc.errno}".encode()
    return b"file:" + executable + content


def _walk_files(root: Path) -> Iterable[str]:
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(folder)
        kept: list[str] = []
        for name in dirnames:
            if name in EXCLUDED_DIRS:
                continue
            if (base / name).is_symlink():
                filenames.append(name)  # hashed as a link, never followed
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            yield (base / name).relative_to(root).as_posix()
