"""Bytecode a verification may start with, so its private pycache folder is not empty.

Each Python verification keeps its bytecode in a fresh folder of its own (`PYTHONPYCACHEPREFIX`,
see `commands.run_commands`): a `.pyc` forged in the worktree's git-ignored `__pycache__` must
not run. Empty, that folder made every run compile pytest and the standard library from source
(0.7 s of CPU of a 0.9 s run). `seed` links into it the bytecode of the modules this process
has imported from folders no sandboxed child may write: a file there is as protected as its
source, and Python would read it anyway without the prefix. Python still checks each file
against its source (mtime and size) before using it. The links are symbolic: a child writing
through one is refused (the sandbox judges the file it leads to), and Python replaces a stale
one with a new file of the child's own. Nothing from a writable root, nothing reached through a
symbolic or hard link that could lead into one, and nothing when there is no sandbox (then no
folder is protected from the child).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

#: Modules whose bytecode a verification gets, at most (the standard library and a test
#: runner's are a few hundred).
MAX_FILES = 4000


def seed(prefix: Path, writable: Iterable[str]) -> int:
    """Link the protected bytecode of this process's imported modules into `prefix`, laid out
    as Python looks for it there; return how many files were linked."""
    roots = tuple(_real(root) for root in writable if root)
    made: set[Path] = set()
    linked = 0
    for source, cached in _imported():
        if linked >= MAX_FILES:
            break
        if not _protected(source, roots) or not _protected(cached, roots):
            continue
        try:
            found = os.lstat(cached)
            if stat.S_ISLNK(found.st_mode) or found.st_nlink != 1 or os.path.islink(source):
                continue  # a link: another name of this file may lie in a writable root
        except OSError:
            continue
        target = prefix / os.path.dirname(source).lstrip(os.sep)
        try:
            if target not in made:
                target.mkdir(parents=True, exist_ok=True)
                made.add(target)
            os.symlink(cached, target / os.path.basename(cached))
        except OSError:
            continue
        linked += 1
    return linked


def _imported() -> Iterable[tuple[str, str]]:
    """(source, its bytecode in `__pycache__`) of each module imported from a source file in a
    folder reached without a symbolic link (its target may be writable)."""
    tag = sys.implementation.cache_tag
    real: dict[str, bool] = {}  # folder -> it is its own real path
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        cached = getattr(module, "__cached__", None)
        if not (isinstance(source, str) and isinstance(cached, str)) or not source.endswith(".py"):
            continue
        folder, pycache = os.path.dirname(source), os.path.dirname(cached)
        if pycache != os.path.join(folder, "__pycache__") or f".{tag}." not in cached:
            continue  # another prefix's, or an optimised or foreign file
        if pycache not in real:
            real[pycache] = os.path.realpath(pycache) == pycache
        if real[pycache]:
            yield source, cached


def _protected(path: str, roots: tuple[str, ...]) -> bool:
    return os.path.isabs(path) and not any(
        path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots
    )


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))
