"""A story worktree's git metadata is ai-sdlc's, never a child's (issue 32, case 2).

A child (an agent, a verify or setup command, anything they start) may write anything in its
worktree, the `.git` pointer file and `.git` entries below the top included. ai-sdlc's own git
never reads them (`run.pin` names the git folder found in the main repository), but the user's
plain `git status` does: a pointer naming a git folder of the child's, or a nested repository
with its own config, runs the child's `core.fsmonitor`, pager or `diff.external` unconfined,
and an empty nested repository makes `git add -A` fail. So after every child `settle` puts
the pointer back (a regular file naming the worktree's git folder, as `git worktree add` wrote
it) and removes every `.git` below the top (what is left of a nested repository is an ordinary
folder: the failed attempt's roll-back cleans it), and returns what it found, for the runner to
count as a failed attempt. Every other config the user's git reads in a worktree (system,
global, the repository's `config` and the worktree's `config.worktree` under the main git
folder) is out of every child's reach, so drivers a worktree's `.gitattributes` names run only
when the user configured them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ai_sdlc.git.repo import read_git_file
from ai_sdlc.git.run import GitError, git

#: Characters of a rewritten pointer shown in the finding.
SHOWN = 120


def settle(top: Path, git_dir: Path) -> list[str]:
    """Put the git metadata of the story worktree at `top` back: its `.git` pointer names
    `git_dir`, no `.git` exists below the top, no folder below it has the shape of a bare
    repository git has not been told about, no link leads into another repository. What a
    child had changed, one line each (empty: nothing)."""
    found: list[str] = []
    fault = put_back_pointer(top, git_dir)
    if fault is not None:
        found.append(f"the worktree's .git pointer was {fault} (put back)")
    walk = Walk.of(top)
    found += [f"nested git repository {p} (removed)" for p in remove_nested(top, walk.dot_gits)]
    found += _remove_bare(top, walk.bare)
    found += _remove_links(top, walk.links, git_dir.parent.parent)
    return found


def pointer_fault(top: Path, git_dir: Path) -> str | None:
    """What is wrong with the `.git` pointer of the worktree at `top` (None: it names
    `git_dir`, as a regular file of one line)."""
    dot_git = top / ".git"
    try:
        mode = os.lstat(dot_git).st_mode
    except FileNotFoundError:
        return "removed"
    if stat.S_ISLNK(mode):
        return "replaced by a symbolic link"
    if stat.S_ISDIR(mode):
        return "replaced by a folder"
    if not stat.S_ISREG(mode):
        return "replaced by a special file"
    try:
        text = read_git_file(dot_git).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return "made unreadable"
    if text.startswith("gitdir: ") and text.endswith("\n") and "\n" not in text[:-1]:
        named = Path(text[len("gitdir: ") : -1])
        if _canonical(named if named.is_absolute() else top / named) == _canonical(git_dir):
            return None
    shown = text.strip().replace("\n", " ")
    return f"rewritten ({shown[:SHOWN]}{'…' if len(shown) > SHOWN else ''})"


def put_back_pointer(top: Path, git_dir: Path) -> str | None:
    """Make the `.git` pointer of the worktree at `top` name `git_dir` again, whatever was put
    in its place (a file, a link, a folder); what was wrong with it, or None."""
    fault = pointer_fault(top, git_dir)
    if fault is None:
        return None
    dot_git = top / ".git"
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        _remove_tree(dot_git)
    temporary = top / f".git.ai-sdlc-{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o644)
    try:
        os.write(fd, f"gitdir: {git_dir}\n".encode())
    finally:
        os.close(fd)
    os.replace(temporary, dot_git)  # replaces a file or a link itself, never its target
    still = pointer_fault(top, git_dir)
    if still is not None:
        raise GitError(f"the .git pointer of {top} could not be put back: it is {still}")
    return fault


class Walk:
    """One walk of a worktree: every `.git` entry (file, folder, link) below its top (the top's
    own pointer excepted), every folder holding a `HEAD`, `objects` and `refs` (a bare
    repository's shape, which git also finds going up from a folder), every link to a folder
    (never followed). A folder a child made unreadable is opened to its owner first (ai-sdlc
    runs as the user the child runs as)."""

    def __init__(self) -> None:
        self.dot_gits: list[Path] = []
        self.bare: list[Path] = []
        self.links: list[Path] = []

    @classmethod
    def of(cls, top: Path) -> Walk:
        walk = cls()
        folders = [top]
        while folders:
            folder = folders.pop()
            entries = _entries(folder)
            if folder != top and {e.name for e in entries} >= _BARE:
                walk.bare.append(folder)
            for entry in entries:
                if entry.name == ".git":
                    if folder != top:
                        walk.dot_gits.append(Path(entry.path))
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
                    elif entry.is_symlink() and entry.is_dir():
                        walk.links.append(Path(entry.path))
                except OSError:
                    continue
        walk.dot_gits.sort()
        return walk


#: What makes a folder a git repository to git's discovery, without a `.git` in it.
_BARE = frozenset({"HEAD", "objects", "refs"})


def nested(top: Path) -> list[Path]:
    """Every `.git` entry below `top` (see `Walk`)."""
    return Walk.of(top).dot_gits


def remove_nested(top: Path, found: list[Path] | None = None) -> list[str]:
    """Remove every nested `.git` below `top` (`found`, else see `nested`); their paths
    relative to `top`."""
    removed = []
    for path in nested(top) if found is None else found:
        if path.is_dir() and not path.is_symlink():
            _remove_tree(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        removed.append(path.relative_to(top).as_posix())
    return removed


def _remove_bare(top: Path, folders: list[Path]) -> list[str]:
    """A folder of bare-repository shape whose `HEAD` git does not track (a committed fixture
    of the project is left alone): its `HEAD` goes, so git no longer takes it for one."""
    found = []
    for folder in sorted(folders):
        head = (folder / "HEAD").relative_to(top).as_posix()
        tracked = git(top, "ls-files", "-z", "--", f":(literal){head}").stdout
        if tracked:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / "HEAD")
        found.append(
            f"nested bare git repository {folder.relative_to(top).as_posix()} (HEAD removed)"
        )
    return found


def _remove_links(top: Path, links: list[Path], common_dir: Path) -> list[str]:
    """A link to a folder outside the worktree inside another git repository (where a plain
    git run in the link's folder goes: to the folder it resolves to, then up): removed. Links
    into the project's own repository, or into no repository, are left alone."""
    inside, own = _canonical(top), _canonical(common_dir)
    found = []
    for link in sorted(links):
        target = _canonical(link)
        if target == inside or inside in target.parents:
            continue
        repository = next(
            (p for p in (target, *target.parents) if os.path.lexists(p / ".git")), None
        )
        if repository is None or _canonical(repository / ".git") == own:
            continue
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        found.append(
            f"link {link.relative_to(top).as_posix()} into the git repository {repository} "
            "(removed)"
        )
    return found


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except PermissionError:
        try:
            os.chmod(folder, stat.S_IMODE(os.lstat(folder).st_mode) | stat.S_IRWXU)
            with os.scandir(folder) as it:
                return list(it)
        except OSError:
            raise GitError(
                f"{folder} cannot be searched for nested git repositories",
                hint="remove it by hand, then run again",
            ) from None
    except (FileNotFoundError, NotADirectoryError):
        return []


def _remove_tree(path: Path) -> None:
    """`rmtree` that opens to its owner what a child made unwritable or unreadable first."""

    def retry(function: Callable[..., Any], name: str, _info: object) -> None:
        parent = os.path.dirname(name)
        os.chmod(parent, stat.S_IMODE(os.lstat(parent).st_mode) | stat.S_IRWXU)
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, stat.S_IMODE(os.lstat(name).st_mode) | stat.S_IRWXU)
            shutil.rmtree(name)
        else:
            function(name)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


def _canonical(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()
