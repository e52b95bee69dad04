"""Story worktrees: one `git worktree` and branch `ai-sdlc/<id>-<slug>` per story.

Only `git worktree add/remove/prune` are used: the user's checkout (its branch, index and
uncommitted files) is never switched, reset or cleaned.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import msgspec

from ai_sdlc.git import gitmeta
from ai_sdlc.git.repo import read_git_file
from ai_sdlc.git.run import GitError, git, pin, unpin
from ai_sdlc.locks import SidecarLock
from ai_sdlc.secrets import redact_title
from ai_sdlc.store.ids import slugify

BRANCH_PREFIX = "ai-sdlc/"
_STORY_NAME = re.compile(r"(S-[0-9]{4,})(?:-|$)")
#: A branch name that stays one field of an `update-ref --stdin` line: no space, no control
#: character (nor any other character `git check-ref-format` refuses anywhere in a name).
_ONE_FIELD = re.compile(r"[^\x00-\x20\x7f~^:?*\[\\]+")


class Worktree(msgspec.Struct, frozen=True):
    """One entry of `git worktree list --porcelain`."""

    path: Path
    head: str = ""
    branch: str | None = None
    prunable: bool = False
    locked: bool = False

    @property
    def story_id(self) -> str | None:
        """The story a branch `ai-sdlc/S-0001-…` belongs to."""
        if not self.branch or not self.branch.startswith(BRANCH_PREFIX):
            return None
        match = _STORY_NAME.match(self.branch[len(BRANCH_PREFIX) :])
        return match.group(1) if match else None


def story_name(story_id: str, slug: str | None) -> str:
    """`S-0001-add-login`: the branch suffix and the worktree folder's name."""
    clean = slugify(redact_title(slug)) if slug else ""  # a slug made before titles were redacted
    return f"{story_id}-{clean}" if clean and clean != "story" else story_id


def branch_for(story_id: str, slug: str | None) -> str:
    return BRANCH_PREFIX + story_name(story_id, slug)


def listing(top: Path) -> list[Worktree]:
    """Every worktree of the repository (the main checkout first)."""
    text = git(top, "worktree", "list", "--porcelain").stdout
    out: list[Worktree] = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        if "worktree" not in fields:
            continue
        branch = fields.get("branch")
        out.append(
            Worktree(
                path=Path(fields["worktree"]),
                head=fields.get("HEAD", ""),
                branch=branch.removeprefix("refs/heads/") if branch else None,
                prunable="prunable" in fields,
                locked="locked" in fields,
            )
        )
    return out


def claimed(common_dir: Path, path: Path, branch_ref: str) -> bool | None:
    """Whether a worktree of the repository is registered at `path` or has `branch_ref` checked
    out, read from the repository's git folder without a process (gitrepository-layout(5):
    `HEAD`, and `worktrees/<id>/gitdir` naming the linked worktree's `.git` file next to its
    `worktrees/<id>/HEAD`); None when an entry cannot be read for certain (ask `listing`)."""
    wanted = _canonical(path)
    try:
        if _names(common_dir / "HEAD", branch_ref):
            return True
        try:
            with os.scandir(common_dir / "worktrees") as entries:
                folders = [Path(e.path) for e in entries]
        except FileNotFoundError:
            return False  # no linked worktree at all
    except OSError:
        return None
    for entry in folders:
        try:
            text = read_git_file(entry / "gitdir").decode("utf-8")
            if _names(entry / "HEAD", branch_ref):
                return True
        except (OSError, UnicodeDecodeError):  # also a half-made entry (no `gitdir` yet)
            return None
        if not text.endswith("\n") or "\n" in text[:-1]:
            return None
        dot_git = Path(text[:-1])
        if not dot_git.is_absolute():  # `worktree.useRelativePaths`
            dot_git = entry / dot_git
        if _canonical(dot_git.parent) == wanted:
            return True
    return False


def git_dir_of(common_dir: Path, path: Path) -> Path | None:
    """The git folder of the linked worktree at `path`, found in the main repository's
    `worktrees/` (the entry whose `gitdir` file names `<path>/.git`): never read from the
    worktree's own `.git` file, which an agent can rewrite. None when no entry names it."""
    wanted = _canonical(path)
    folder = common_dir / "worktrees"
    first = folder / path.name  # git names the entry after the folder (plus a number if taken)
    try:
        with os.scandir(folder) as entries:
            others = sorted(Path(e.path) for e in entries if Path(e.path) != first)
    except OSError:
        return None
    for entry in (first, *others):
        try:
            text = read_git_file(entry / "gitdir").decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not text.endswith("\n") or "\n" in text[:-1]:
            continue
        dot_git = Path(text[:-1])
        if not dot_git.is_absolute():  # `worktree.useRelativePaths`
            dot_git = entry / dot_git
        if _canonical(dot_git.parent) == wanted:
            return entry
    return None


def pin_tree(common_dir: Path, path: Path) -> Path:
    """Pin the story worktree at `path` to its git folder (`run.pin`): every later git command
    in it names that folder and `path` explicitly. Refused when the main repository has no
    worktree there."""
    git_dir = git_dir_of(common_dir, path)
    if git_dir is None:
        raise GitError(f"{path} is not a git worktree of the repository at {common_dir}")
    pin(path, git_dir)
    return git_dir


def restore_git_file(path: Path, git_dir: Path) -> bool:
    """Point the `.git` file of the story worktree at `path` back at `git_dir` when a child
    rewrote, removed or replaced it (by a link or a folder): ai-sdlc's own git never reads it,
    but the next agent, the verification commands and the user's `git -C <worktree>` do; True
    when it did (`gitmeta.put_back_pointer`)."""
    return gitmeta.put_back_pointer(path, git_dir) is not None


def _names(head: Path, ref: str) -> bool:
    return read_git_file(head) == f"ref: {ref}\n".encode()


def find(top: Path, path: Path) -> Worktree | None:
    return find_in(listing(top), path)


def find_in(trees: list[Worktree], path: Path) -> Worktree | None:
    """The entry of `trees` (one `listing`) for the folder `path`."""
    wanted = _canonical(path)
    for tree in trees:
        if _canonical(tree.path) == wanted:
            return tree
    return None


def holder_of(top: Path, branch: str) -> Worktree | None:
    """The worktree that has `branch` checked out, if any."""
    return holder_in(listing(top), branch)


def holder_in(trees: list[Worktree], branch: str) -> Worktree | None:
    for tree in trees:
        if tree.branch == branch:
            return tree
    return None


#: Seconds a worktree change waits for another process's (a checkout of a big repository).
LOCK_TIMEOUT = 120.0


def serialised(common_dir: Path) -> SidecarLock:
    """One process at a time lists, adds or prunes the repository's worktrees. `git worktree
    add` writes `.git/worktrees/<name>/` file by file, and a concurrent `worktree add` or
    `worktree list` (parallel stories) that reads the half-made entry fails with "failed to
    read .../commondir". The lock file lives in the repository's common git folder, as git's
    own locks do."""
    return SidecarLock(common_dir / "ai-sdlc-worktrees.lock", timeout=LOCK_TIMEOUT)


def prune(top: Path) -> None:
    """Forget worktrees whose folders were deleted by hand."""
    git(top, "worktree", "prune")


def add(top: Path, path: Path, branch: str, *, start: str | None, checkout: bool = True) -> None:
    """Create the worktree at `path` on `branch`: a new branch from `start`, or (start None) the
    existing branch. `checkout` False: its files are not written yet (`sparse.fill` does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    held_back = () if checkout else ("--no-checkout",)
    if start is None:
        git(top, "worktree", "add", "--quiet", *held_back, str(path), branch)
    else:
        git(
            top,
            "worktree",
            "add",
            "--quiet",
            *held_back,
            "--no-track",
            "-b",
            branch,
            str(path),
            start,
        )


def create_branch(top: Path, branch: str, commit: str, start: str, *, checkpoint: str) -> None:
    """Create `branch` at `commit` (no upstream, as `--no-track`) and point the story's
    `checkpoint` ref there too, in one `update-ref` transaction: the branch is refused if it
    exists, and no agent can run before its checkpoint is recorded."""
    if not _ONE_FIELD.fullmatch(branch):  # a name git refuses too; never a second command
        raise GitError(f"{branch!r} is not a valid branch name")
    spec = f"create refs/heads/{branch} {commit}\nupdate {checkpoint} {commit}\n"
    message = f"branch: Created from {start}"
    git(top, "update-ref", "-m", message, "--stdin", input=spec)


def remove(top: Path, path: Path, *, force: bool = False) -> None:
    """Remove a worktree (its branch stays). `force` also drops uncommitted work."""
    args = ["worktree", "remove"]
    if force:
        args += ["--force", "--force"]
    git(top, *args, str(path))
    unpin(path)


def is_worktree_folder(path: Path) -> bool:
    return (path / ".git").is_file()


def clear_empty(path: Path) -> bool:
    """Remove `path` if it is an empty folder (a leftover blocking `worktree add`)."""
    try:
        if path.is_dir() and not any(path.iterdir()):
            shutil.rmtree(path)
            return True
    except OSError:
        return False
    return False


def require_free(path: Path) -> None:
    if path.exists() and not clear_empty(path):
        raise GitError(
            f"{path} exists but is not a git worktree of this repository",
            hint="move it away (it may hold work), then run again",
        )


def _canonical(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()
