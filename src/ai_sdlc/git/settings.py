"""The `git.*` settings of `.ai-sdlc/config.yaml`, read once into a typed value."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from ai_sdlc.config import Config

DEFAULT_WORKTREES_DIR = ".ai-sdlc/worktrees"


class GitSettings(msgspec.Struct, frozen=True):
    #: One worktree and branch per story (off: agents work in the project folder).
    worktrees: bool = True
    #: Branch stories start from and PRs target; empty: the repository's default branch.
    base_branch: str = ""
    #: Where story worktrees live, relative to the project folder (or absolute).
    worktrees_dir: str = DEFAULT_WORKTREES_DIR
    remote: str = "origin"
    #: Leave a failed attempt's changes in the worktree instead of rolling them back.
    keep_failed_attempts: bool = False
    draft: bool = False
    auto_merge: bool = False
    #: Keep a done story's worktree (and its environment) instead of removing it.
    keep_worktrees: bool = False
    #: The pull-request loop (`pr.loop`, or `git.auto_merge`): an open PR is followed.
    pr_loop: bool = False
    #: Bots whose PR feedback is taken (`pr.trusted_bots`).
    trusted_bots: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Config) -> GitSettings:
        """From the typed `git` section of a `Config`."""
        typed = config.typed()
        git = typed.git
        return cls(
            worktrees=git.worktrees,
            base_branch=git.base_branch,
            worktrees_dir=git.worktrees_dir or DEFAULT_WORKTREES_DIR,
            remote=git.remote or "origin",
            keep_failed_attempts=git.keep_failed_attempts,
            draft=git.draft,
            auto_merge=git.auto_merge,
            keep_worktrees=git.keep_worktrees,
            pr_loop=typed.pr.loop or git.auto_merge,
            trusted_bots=tuple(typed.pr.trusted_bots),
        )

    def worktrees_root(self, project: Path) -> Path:
        folder = Path(self.worktrees_dir).expanduser()
        return folder if folder.is_absolute() else project / folder
