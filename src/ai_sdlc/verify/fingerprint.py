"""A content hash of a workspace, to tell "the implementation changed nothing".

In a git work tree the file list comes from real `git` (tracked + untracked-not-ignored, so
`.gitignore` is honoured); elsewhere the tree is walked. Either way the hash covers each file's
path, content, executable bit and symlink target, and skips folders that are never the
implementation's work (`.git`, virtualenvs, caches, `node_modules`, and `.ai-sdlc`, which the
runner itself writes during a phase). Those folders are pruned, never listed and filtered: git
gets them as exclude pathspecs and the walk does not descend into them, so the cost does not grow
with the number of stories.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from ai_sdlc.environ import current as current_environ
from ai_sdlc.errors import InvalidInputError
from ai_sdlc.git.run import git_options

EXCLUDED_DIRS = frozenset({".git", ".venv", "__pycache__", "node_modules", ".ai-sdlc"})
#: `git ls-files` pathspec: the workspace minus `EXCLUDED_DIRS` at any depth. Excluding them
#: here (not after listing) lets git skip those folders: with 20,000 stories under `.ai-sdlc/`
#: listing the project takes ~2 ms instead of ~0.3 s.
_PATHSPEC = (".", *(f":(exclude,glob)**/{name}/**" for name in sorted(EXCLUDED_DIRS)))
GIT_TIMEOUT_SECONDS = 120.0
#: Variables that would point git at another repository than the workspace's.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def workspace_fingerprint(path: Path) -> str:
    """sha256 over (relative path, kind, mode, content) of every file that belongs to the work."""
    root = path.resolve()
    if not root.is_dir():
        raise InvalidInputError(f"cannot fingerprint {path}: no such folder")
    listed = _git_files(root)
    files = listed if listed is not None else _walk_files(root)
    digest = hashlib.sha256()
    for relative in sorted(set(files)):
        if EXCLUDED_DIRS.intersection(relative.split("/")):
            continue
        digest.update(relative.encode("utf-8", errors="surrogateescape"))
        digest.update(b"\0")
        digest.update(_entry_digest(root / relative))
        digest.update(b"\0")
    return digest.hexdigest()


def _entry_digest(path: Path) -> bytes:
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


def _git(
    root: Path, *args: str, ceiling: Path | None = None
) -> subprocess.CompletedProcess[bytes] | None:
    env = {k: v for k, v in current_environ().items() if k not in _GIT_REDIRECTS}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # never take index.lock while an agent may be using git
    if ceiling is not None:
        env["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    try:
        return subprocess.run(
            ["git", *git_options(root), *args],  # no hook/fsmonitor; a story worktree pinned
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _git_files(root: Path) -> list[str] | None:
    """Tracked + untracked-not-ignored files relative to `root`, or None when git cannot say
    (no git, not a work tree, or `root` is itself ignored by an enclosing repository)."""
    listing_args = ("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--")
    if os.path.lexists(root / ".git"):
        # `root` is a work tree's top (a story worktree, a project at its repository's top) iff
        # git finds a repository there without looking above it: then one `ls-files` is all.
        listing = _git(root, *listing_args, *_PATHSPEC, ceiling=root.parent)
        if listing is not None and listing.returncode == 0:
            return [os.fsdecode(item) for item in listing.stdout.split(b"\0") if item]
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or top.returncode != 0:
        return None
    toplevel = Path(os.fsdecode(top.stdout.strip())).resolve()
    if toplevel != root:
        ignored = _git(root, "check-ignore", "-q", ".")
        if ignored is None or ignored.returncode == 0:
            return None
    listing = _git(root, *listing_args, *_PATHSPEC)
    if listing is None or listing.returncode != 0:
        return None
    return [os.fsdecode(item) for item in listing.stdout.split(b"\0") if item]


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
