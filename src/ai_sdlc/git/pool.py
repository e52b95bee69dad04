"""`WorktreePool`: a done story's worktree is parked and reused by the next story (issue 35).

Beside 20,000 committed files, `git worktree add` (0.30 s), git's racy re-read of the fresh
tree (0.15–0.45 s) and `git worktree remove` (0.17 s) cost more than the rest of a story. So a
done story's worktree with nothing committable left is parked instead of removed: its HEAD
detached (the branch is free again), the folder moved to `<worktrees>/.pool/<entry>`. The next
story that needs a new worktree takes it: `checkout --force` of the story's branch (git writes
only what differs from the parked commit, and the untouched files keep their index entries, so
nothing is re-read), `clean -ffdx` (every untracked and ignored file of the earlier story goes,
its environment with it: the setup stamp is dropped so `worktree.setup` makes it again), then
the folder is moved to the story's place. Every git command in a pooled folder is pinned to the
git folder found from the main repository, and its `.git` pointer is put back first.

An interrupted switch is safe: until the last move the folder stays in the pool, and a pooled
folder found holding a branch (killed between the checkout and the move) is detached again by
`release`, so the story's branch is free and the next take switches and cleans it anew.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ai_sdlc.git import gitmeta, worktrees
from ai_sdlc.git.run import GitError, git, pin, unpin

#: The pool's folder under the worktrees folder (no story name starts with a dot).
POOL_DIR = ".pool"
#: Parked worktrees kept at most (each is a whole checkout on disk).
CAPACITY = 2
#: The environment setup's record in a worktree's git folder (`worktree_env.setup`).
ENV_STAMP = "ai-sdlc-setup.json"


class WorktreePool:
    """Parked story worktrees of the repository whose main checkout is `top` (shared git folder
    `common_dir`), kept under `folder`/.pool."""

    def __init__(self, top: Path, common_dir: Path, folder: Path) -> None:
        self.top = top
        self.common_dir = common_dir
        self.folder = folder / POOL_DIR

    def owns(self, path: Path) -> bool:
        """Whether `path` is a folder of the pool."""
        return _canonical(path).parent == _canonical(self.folder)

    def entries(self) -> list[tuple[Path, Path]]:
        """(folder, its git folder) of each parked worktree the main repository lists."""
        try:
            names = sorted(p for p in self.folder.iterdir() if p.is_dir())
        except OSError:
            return []
        found: list[tuple[Path, Path]] = []
        for path in names:
            admin = worktrees.git_dir_of(self.common_dir, path)
            if admin is not None:
                found.append((path, admin))
        return found

    def park(self, tree: Path) -> bool:
        """Park the story worktree at `tree` (nothing committable in it: the caller checked).
        False when the pool is full or git cannot move it (the caller removes it instead)."""
        admin = worktrees.git_dir_of(self.common_dir, tree)
        if admin is None or len(self.entries()) >= CAPACITY:
            return False
        slot = self.folder / admin.name
        if slot.exists():
            return False
        gitmeta.put_back_pointer(tree, admin)
        pin(tree, admin)
        try:
            # The branch is free again; the files and the index stay as they are.
            git(tree, "update-ref", "--no-deref", "-m", "ai-sdlc: parked", "HEAD", "HEAD")
        finally:
            unpin(tree)
        self.folder.mkdir(parents=True, exist_ok=True)
        # False (git refused, e.g. a submodule): the caller removes the detached worktree.
        return git(self.top, "worktree", "move", str(tree), str(slot), check=False).ok

    def release(self, path: Path) -> None:
        """Detach the pooled worktree at `path` that holds a branch (a switch interrupted
        before its move): it is a pool member again, the branch free."""
        admin = worktrees.git_dir_of(self.common_dir, path)
        if admin is None:
            raise GitError(f"{path} is not a git worktree of the repository at {self.common_dir}")
        gitmeta.put_back_pointer(path, admin)
        pin(path, admin)
        try:
            git(path, "update-ref", "--no-deref", "-m", "ai-sdlc: released", "HEAD", "HEAD")
        finally:
            unpin(path)

    def take(self, folder: Path, branch: str) -> Path | None:
        """A parked worktree switched to the existing `branch`, cleaned and moved to `folder`;
        its git folder, or None when the pool is empty."""
        for slot, admin in self.entries():
            gitmeta.put_back_pointer(slot, admin)
            with contextlib.suppress(FileNotFoundError):
                (admin / ENV_STAMP).unlink()
            pin(slot, admin)
            try:
                git(slot, "checkout", "--force", "--quiet", branch)
                git(slot, "clean", "-ffdxq")
            finally:
                unpin(slot)
            folder.parent.mkdir(parents=True, exist_ok=True)
            git(self.top, "worktree", "move", str(slot), str(folder))
            return worktrees.pin_tree(self.common_dir, folder)
        return None


def _canonical(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()
