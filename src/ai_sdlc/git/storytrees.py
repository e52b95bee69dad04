"""`StoryTrees`: where a repository's story worktrees are, and which folders are theirs.

A story's branch and worktree folder come from its frontmatter (or its id and slug); a path is
accepted as a story worktree only when the main repository lists it under the worktrees folder
(never the user's own checkout, whatever its `.git` file says), and each top is asked of git
once per folder, then kept (a worktree's top does not move while it exists).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.git import gitmeta, worktrees
from ai_sdlc.git import run as run_git
from ai_sdlc.git.run import GitError


class StoryTrees:
    """The story worktrees of the project at `root` in the repository whose main checkout is
    `top`, kept under `folder` (`git.worktrees_dir`)."""

    def __init__(self, root: Path, top: Path, common_dir: Path, folder: Path) -> None:
        self.root = root
        self.top = top
        self._common_dir = common_dir
        self.folder = folder
        #: The project folder's place inside the repository ("" when it is the top).
        self.prefix = root.relative_to(top)
        #: Story worktree tops already checked by `own` (or made by `prepare`), by folder.
        self._tops: dict[Path, Path] = {}

    def location(self, story: Any) -> tuple[str, Path]:
        """The story's branch and worktree folder: the recorded ones, else derived from its id
        and slug. A recorded `worktree_path` outside the worktrees folder is refused."""
        fm = story.frontmatter
        recorded_branch = fm.get("branch")
        branch = (
            str(recorded_branch)
            if isinstance(recorded_branch, str) and recorded_branch.startswith("ai-sdlc/")
            else worktrees.branch_for(story.id, fm.get("slug"))
        )
        name = branch.removeprefix(worktrees.BRANCH_PREFIX)
        recorded_path = fm.get("worktree_path")
        folder = self.folder / name
        if isinstance(recorded_path, str) and recorded_path:
            candidate = (self.root / recorded_path).resolve()
            if candidate.parent == self.folder or self._registered(candidate, branch):
                folder = candidate
        return branch, folder

    def _registered(self, folder: Path, branch: str) -> bool:
        """Whether `folder` is a worktree of this repository on the story's `branch`: a story
        worktree made before `git.worktrees_dir` changed is used where it is, not stranded."""
        if folder.parent == self.folder or not worktrees.is_worktree_folder(folder):
            return False
        tree = worktrees.find(self.top, folder)
        if tree is None or tree.prunable or tree.branch != branch:
            return False
        self._tops[folder / self.prefix] = folder
        return True

    def remember(self, work: Path, top: Path) -> None:
        """`work` is in the story worktree `top` (git listed it as ours a moment ago)."""
        self._tops[work] = top

    def forget(self, top: Path) -> None:
        """The story worktree `top` was removed."""
        self._tops = {k: v for k, v in self._tops.items() if v != top}

    def own(self, path: Path) -> Path:
        """The top of the story worktree holding `path`; refuses any other folder (above all
        the user's own checkout) before anything is reset or cleaned. Asked of git once per
        folder, or known from `prepare` (a worktree's top does not move while it exists)."""
        top = self._tops.get(path)
        if top is None or not top.is_dir():
            top = self._story_top(path)
            if top is None:
                raise GitError(f"{path} is not a story worktree under {self.folder}")
            self._tops[path] = top
        return top

    def restore_git_file(self, top: Path) -> None:
        """After our own git is done with an attempt (it never reads the worktree's `.git`
        file): undo an agent's rewrite of that file for the next agent and verification."""
        pinned = run_git.pinned(top)
        if pinned is not None and pinned[0] == top:
            worktrees.restore_git_file(top, pinned[1])

    def settle(self, top: Path) -> list[str]:
        """The story worktree `top`'s git metadata put back after children ran in it
        (`gitmeta.settle`): what they had changed."""
        pinned = run_git.pinned(top)
        if pinned is None or pinned[0] != top:
            pinned = (top, worktrees.pin_tree(self._common_dir, top))
        return gitmeta.settle(top, pinned[1])

    def _story_top(self, path: Path) -> Path | None:
        """The story worktree holding `path` (a folder right under the worktrees folder that
        the main repository lists as its worktree), pinned to its git folder; None otherwise.
        Told by the main repository alone: the worktree's `.git` file is the agent's to
        rewrite."""
        try:
            inside = path.resolve().relative_to(self.folder)
        except (OSError, ValueError):
            return None
        if not inside.parts:
            return None
        top = self.folder / inside.parts[0]
        if not top.is_dir() or worktrees.git_dir_of(self._common_dir, top) is None:
            return None
        worktrees.pin_tree(self._common_dir, top)
        return top

    def shown(self, folder: Path) -> str:
        """`folder` as the user reads it: relative to the project folder when inside it."""
        try:
            return folder.relative_to(self.root).as_posix()
        except ValueError:
            return str(folder)

    def keep_out_of_checkout(self) -> None:
        """Make the worktrees folder invisible to the main checkout's `git status` (projects
        initialised before `worktrees/` was in `.ai-sdlc/.gitignore`)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        marker = self.folder / ".gitignore"
        if not marker.exists():
            marker.write_text("# ai-sdlc story worktrees: not for git\n*\n", encoding="utf-8")
