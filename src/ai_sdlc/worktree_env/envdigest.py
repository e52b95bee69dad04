"""What `worktree.setup` made, recorded so that an attempt that changes it is caught.

The worktree's environment (`.venv`, `node_modules`) is git-ignored and inside the worktree,
which agents may write: a `.pth` or `sitecustomize.py` dropped into its site-packages runs in
the test process and could forge the results, unseen by the review (it is not in the diff).
Setup records a digest of each file it made, under the worktree's git folder (which agents
cannot write); verification compares before it runs.

How much is read, by kind (cheap enough to do before every verification):
- a layered venv (`ai-sdlc worktrees venv`, ~80 KB): every file, by content;
- another venv (uv sync, a full pip build): `pyvenv.cfg`, `bin/`, and in site-packages the
  names of the top-level entries and the content of the files that run at interpreter start
  (`*.pth`, `sitecustomize.py`, `usercustomize.py`); a package's own files are not read;
- `node_modules`: the names of its top-level packages (and of `@scope/` folders) and of
  `.bin` (dot folders are the tools' caches, left out); a package's own files are not read.
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
    folder: Path, work: Path, out: dict[str, str], content: bool = False, dots: bool = True
) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries[:LIMIT]:
        path = Path(entry.path)
        if entry.name == "__pycache__" or (not dots and entry.name.startswith(".")):
            continue  # caches the tests write (`.cache`, `.vite`), never a package
        out[path.relative_to(work).as_posix()] = _entry(path, content or _starts(entry.name))


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
                    _list(site, work, out)
    modules = work / "node_modules"
    if modules.is_dir() and not modules.is_symlink():
        _list(modules, work, out, dots=False)
        _list(modules / ".bin", work, out)
        for scope in sorted(modules.glob("@*")):
            _list(scope, work, out, dots=False)
    return out


def changed(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """The paths added, removed or changed between two digests (sorted)."""
    return sorted(p for p in recorded.keys() | now.keys() if recorded.get(p) != now.get(p))
