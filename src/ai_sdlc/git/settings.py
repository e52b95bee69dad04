"""The `git.*` settings of `.ai-sdlc/config.yaml`, read once into a typed value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

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

    @classmethod
    def from_config(cls, config: Any) -> GitSettings:
        """From a `Config` (anything with `.get(dotted, default)`)."""
        return cls(
            worktrees=bool(config.get("git.worktrees", True)),
            base_branch=str(config.get("git.base_branch", "") or ""),
            worktrees_dir=str(config.get("git.worktrees_dir", "") or DEFAULT_WORKTREES_DIR),
            remote=str(config.get("git.remote", "") or "origin"),
            keep_failed_attempts=bool(config.get("git.keep_failed_attempts", False)),
            draft=bool(config.get("git.draft", False)),
            auto_merge=bool(config.get("git.auto_merge", False)),
            keep_worktrees=bool(config.get("git.keep_worktrees", False)),
        )

    def worktrees_root(self, project: Path) -> Path:
        folder = Path(self.worktrees_dir).expanduser()
        return folder if folder.is_absolute() else project / folder
