"""Bytecode a verification may start with, so its private pycache folder is not empty.

Each Python verification keeps its bytecode in a fresh folder of its own (`PYTHONPYCACHEPREFIX`,
see `commands.run_commands`): a `.pyc` forged in the worktree's git-ignored `__pycache__` must
not run. Empty, that folder made every run compile pytest and the standard library from source
(0.7 s of CPU of a 0.9 s run). `seed` links into it the bytecode of the modules this process
has imported from folders no sandboxed child may write: a file there is as protected as its
source, and Python would read it anyway without the prefix. Python still checks each file
against its source (mtime and size) before using it. The links are symbolic, to a file or to a
whole `__pycache__` folder: a child writing through one is refused (the sandbox judges the file
it leads to); Python replaces a stale file link with a new file of the child's own, and
compiles in memory what it cannot write through a folder link. Nothing from a writable root,
nothing reached through a symbolic or hard link that could lead into one, and nothing when there
is no sandbox (then no folder is protected from the child).
"""

from __future__ import annotations

import os
import stat
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

#: Links a verification's folder gets, at most (a folder holds one link for a whole
#: `__pycache__`; a folder with a package below it one link per file).
MAX_LINKS = 4000
#: Of those, links to single files, at most: the standard library's first. A process that
#: imported an API client's type modules (anthropic: 2,354 files in folders holding packages)
#: made as many links per session, each a new inode (0.2-0.4 s), for bytecode no verification
#: reads.
MAX_FILE_LINKS = 200


class Seeds:
    """The folder of seeded bytecode every verification of one session shares.

    Built once, at the first verification, and read-only to every child: the children's
    bytecode goes nowhere (Python compiles in memory what it cannot write), so nothing a
    verification leaves there can stand for another's source. A folder built per
    verification cost its links and their removal each time (0.5–1 s of system time per
    verification on a busy ext4 disk). Reused only while none of its links leads into the
    writable roots of the verification at hand; else a new one is built. `close` removes
    every folder (the session's owner calls it when the command ends: a process running many
    commands, or a worker, must not keep them until exit); a folder is also removed if the
    object goes unclosed, or at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folders: list[tempfile.TemporaryDirectory[str]] = []
        self._targets: tuple[str, ...] = ()

    def prefix(self, writable: Iterable[str]) -> str:
        """The folder to name in `PYTHONPYCACHEPREFIX` for children that may write `writable`."""
        roots = tuple(_real(root) for root in writable if root)
        with self._lock:
            if not self._folders or not all(_protected(t, roots) for t in self._targets):
                folder = tempfile.TemporaryDirectory(prefix="ai-sdlc-bytecode-")
                self._targets = tuple(_seed(Path(folder.name), roots))
                self._folders.append(folder)
            return self._folders[-1].name

    def close(self) -> None:
        """Remove every folder built so far; a later `prefix` builds a new one."""
        with self._lock:
            folders, self._folders, self._targets = self._folders, [], ()
        for folder in folders:
            folder.cleanup()  # its links only: what they lead to stays


def seed(prefix: Path, writable: Iterable[str]) -> int:
    """Link the protected bytecode of this process's imported modules into `prefix`, laid out
    as Python looks for it there; return how many links were made."""
    return len(_seed(prefix, tuple(_real(root) for root in writable if root)))


def _seed(prefix: Path, roots: tuple[str, ...]) -> list[str]:
    """Seed `prefix`; return what its links lead to.

    A folder no other seeded folder lies below gets one link to its whole `__pycache__` when
    every entry there is a plain file with no other name: each link is a new inode, and
    thousands of them cost more than the compiling they save. Any other folder gets a folder of
    its own in `prefix` with one link per file, the standard library's first (every Python
    child imports it), up to `MAX_FILE_LINKS`."""
    wanted: dict[str, list[str]] = {}
    for source, cached in _imported():
        if _protected(source, roots) and _protected(cached, roots) and not os.path.islink(source):
            wanted.setdefault(os.path.dirname(source), []).append(cached)
    holding = {os.path.dirname(folder) for folder in wanted}  # a seeded folder lies below
    holding |= {up for folder in holding for up in _ancestors(folder)}
    targets: list[str] = []
    per_file: list[tuple[str, list[str]]] = []
    for folder, files in sorted(wanted.items()):
        pycache = os.path.join(folder, "__pycache__")
        if folder not in holding and _plain_files_only(pycache):
            if len(targets) < MAX_LINKS and _link(pycache, prefix / folder.lstrip(os.sep)):
                targets.append(pycache)
        else:
            per_file.append((folder, files))
    stdlib, installed = _stdlib_folders()
    # The standard library first, then the folders with the fewest modules: a folder of
    # hundreds is an API client's generated types, which no test run imports.
    per_file.sort(
        key=lambda item: (not _in_stdlib(item[0], stdlib, installed), len(item[1]), item[0])
    )
    budget = min(MAX_FILE_LINKS, MAX_LINKS - len(targets))
    for folder, files in per_file:
        for cached in files:
            if budget <= 0:
                return targets
            name = prefix / folder.lstrip(os.sep) / os.path.basename(cached)
            if _single_name(cached) and _link(cached, name):
                targets.append(cached)
                budget -= 1
    return targets


def _stdlib_folders() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The base installation's standard library folders, and its folders of installed packages
    (which may lie inside them), whatever venv this is."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars={**base, "installed_base": sys.base_prefix})
    return (
        tuple(_real(paths[key]) for key in ("stdlib", "platstdlib") if paths.get(key)),
        tuple(_real(paths[key]) for key in ("purelib", "platlib") if paths.get(key)),
    )


def _in_stdlib(folder: str, stdlib: tuple[str, ...], installed: tuple[str, ...]) -> bool:
    def below(roots: tuple[str, ...]) -> bool:
        return any(folder == root or folder.startswith(root + os.sep) for root in roots)

    return below(stdlib) and not below(installed)


def _link(real: str, name: Path) -> bool:
    try:
        name.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(real, name)
    except OSError:
        return False
    return True


def _ancestors(folder: str) -> Iterable[str]:
    while True:
        up = os.path.dirname(folder)
        if up == folder:
            return
        yield up
        folder = up


def _single_name(path: str) -> bool:
    """A plain file no symbolic link leads to or from and with no second name: a hard link's
    other name may lie in a writable root, and a write through it would change this file."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_nlink == 1


def _plain_files_only(pycache: str) -> bool:
    """Every entry of `pycache` is a plain file with a single name (no link, no folder below)."""
    try:
        with os.scandir(pycache) as entries:
            for entry in entries:
                found = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
                    return False
    except OSError:
        return False
    return True


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
