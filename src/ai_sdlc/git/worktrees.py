"""Story worktrees: one `git worktree` and branch `ai-sdlc/<id>-<slug>` per story.

Only `git worktree add/remove/prune` are used: the user's checkout (its branch, index and
uncommitted files) is never switched, reset or cleaned.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ai_sdlc.git.run import GitError, git
from ai_sdlc.locks import SidecarLock
from ai_sdlc.store.ids import slugify

BRANCH_PREFIX = "ai-sdlc/"
_STORY_NAME = re.compile(r"(S-[0-9]{4,})(?:-|$)")


@dataclass(frozen=True)
class Worktree:
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
    clean = slugify(slug or "") if slug else ""
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


def add(top: Path, path: Path, branch: str, *, start: str | None) -> None:
    """Create the worktree at `path` on `branch`: a new branch from `start`, or (start None) the
    existing branch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if start is None:
        git(top, "worktree", "add", "--quiet", str(path), branch)
    else:
        git(top, "worktree", "add", "--quiet", "--no-track", "-b", branch, str(path), start)


def remove(top: Path, path: Path, *, force: bool = False) -> None:
    """Remove a worktree (its branch stays). `force` also drops uncommitted work."""
    args = ["worktree", "remove"]
    if force:
        args += ["--force", "--force"]
    git(top, *args, str(path))


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
