"""What `worktree.setup` made, recorded so that an attempt that changes it is caught.

The worktree's environment (`.venv`, `node_modules`) is git-ignored and inside the worktree,
which agents may write: a `.pth` or `sitecustomize.py` dropped into its site-packages runs in
the test process and could forge the results, unseen by the review (it is not in the diff).
Setup records a digest of each file it made, under the worktree's git folder (which agents
cannot write); verification compares before it runs.

How much is read, by kind (cheap enough to do before every verification):
- a layered venv (`ai-sdlc worktrees venv`, ~80 KB): every file, by content;
- another venv (uv sync, a full pip build): `pyvenv.cfg`, `bin/`, and in site-packages the
  names of the top-level entries, the content of the files that run at interpreter start
  (`*.pth`, `sitecustomize.py`, `usercustomize.py`) and each package folder's files by status
  (`_tree`: an edit inside `_pytest/` is seen without reading the package);
- `node_modules`: the names of its top-level packages (and of `@scope/` folders) and of
  `.bin` (dot folders are the tools' caches, left out), and each package's files by status.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ai_sdlc.worktree_env.pyvenv import MARKER

#: At most this many entries are recorded for one folder (a digest, not a copy).
LIMIT = 20_000
#: Files larger than this (bytes) are recorded by size and modification time, not content.
BIG = 1_000_000
#: The record of the files inside an installed package folder (`node_modules/uvu/**`).
TREE = "/**"
#: At most this many files are read for one package folder.
TREE_LIMIT = 200_000


def _entry(path: Path, content: bool) -> str:
    """One file's record: a link's target, or a file's size and (when asked) content hash."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            return "dir"
        if not content:
            return "file"
        info = path.stat()
        if info.st_size > BIG:  # a package a story's new dependency installed: not re-read
            return f"size:{info.st_size}:mtime:{info.st_mtime_ns}"
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable:{exc.strerror}"


def _starts(name: str) -> bool:
    """A file Python runs at interpreter start when it is in a site folder."""
    return name.endswith(".pth") or name in ("sitecustomize.py", "usercustomize.py")


def _walk(root: Path, work: Path, out: dict[str, str]) -> None:
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in sorted(dirs + files):
            if len(out) >= LIMIT:
                return
            path = here / name
            if name == "__pycache__":
                continue
            out[path.relative_to(work).as_posix()] = _entry(path, content=True)
        dirs[:] = [d for d in dirs if d != "__pycache__" and not (here / d).is_symlink()]


def _list(
    folder: Path,
    work: Path,
    out: dict[str, str],
    content: bool = False,
    dots: bool = True,
    trees: bool = False,
) -> None:
    """One record per entry of `folder`; `trees`: and one per package folder (`name/**`) for
    the files inside it (`_tree`)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries[:LIMIT]:
        path = Path(entry.path)
        if entry.name == "__pycache__" or (not dots and entry.name.startswith(".")):
            continue  # caches the tests write (`.cache`, `.vite`), never a package
        relative = path.relative_to(work).as_posix()
        out[relative] = _entry(path, content or _starts(entry.name))
        if trees and entry.is_dir(follow_symlinks=False) and not entry.name.startswith("@"):
            out[relative + TREE] = _tree(path)


def _tree(folder: Path) -> str:
    """The files of an installed package, by status: path, size, modification time, and the
    change time (which no process can set back; left out for a file hard-linked elsewhere,
    e.g. uv's cache, whose change time moves when another install links it) or the inode.
    Python's bytecode caches are left out: verification never reads them (see
    `verify.commands`)."""
    digest = hashlib.sha256()
    count = 0
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            count += 1
            if count > TREE_LIMIT:
                return f"tree:{digest.hexdigest()}:over {TREE_LIMIT} files"
            path = os.path.join(here, name)
            try:
                info = os.lstat(path)
            except OSError as exc:
                digest.update(f"{path}\0unreadable:{exc.strerror}\n".encode())
                continue
            moved = info.st_ctime_ns if info.st_nlink == 1 else f"ino{info.st_ino}"
            line = f"{os.path.relpath(path, folder)}\0{info.st_size}:{info.st_mtime_ns}:{moved}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
    return f"tree:{digest.hexdigest()}"


def environment_digest(work: Path) -> dict[str, str]:
    """Path (relative to `work`) → record, for the environment folders setup made in `work`."""
    out: dict[str, str] = {}
    venv = work / ".venv"
    if (venv / "pyvenv.cfg").is_file() and not venv.is_symlink():
        if (venv / MARKER).is_file():
            _walk(venv, work, out)
        else:
            out[".venv/pyvenv.cfg"] = _entry(venv / "pyvenv.cfg", content=True)
            _list(venv / "bin", work, out, content=True)
            for site in sorted(venv.glob("lib*/python*/site-packages")):
                if not site.parent.parent.is_symlink():  # `lib64` → `lib`: once is enough
                    _list(site, work, out, trees=True)
    modules = work / "node_modules"
    if modules.is_dir() and not modules.is_symlink():
        _list(modules, work, out, dots=False, trees=True)
        _list(modules / ".bin", work, out)
        for scope in sorted(modules.glob("@*")):
            _list(scope, work, out, dots=False, trees=True)
    return out


def changed(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """The paths added, removed or changed between two digests (sorted). A package folder's
    files recorded by an earlier ai-sdlc (no `name/**` record) are not compared."""
    old = not any(p.endswith(TREE) for p in recorded)
    paths = recorded.keys() | now.keys()
    return sorted(
        p
        for p in paths
        if recorded.get(p) != now.get(p) and not (old and p.endswith(TREE) and p not in recorded)
    )
