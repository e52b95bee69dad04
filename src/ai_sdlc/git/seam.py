"""Where a story's agents and verification run, and what happens to their work.

The runner asks its `StoryWorkspace` for the folder of a story's work and tells it how each
implementation attempt ended; the workspace never writes story state (`.ai-sdlc/stories/`):
it returns what the runner should record (branch, worktree path, commit, patch text, PR url)
and the state owner writes it. Two implementations exist: `InPlace` (the project folder itself,
the behaviour outside git or with `--no-worktree`) and the git worktree workspace in
`ai_sdlc.git.workspace` (one worktree and branch per story, commits, rollback, pull requests).
The seam lives on the git floor, below the engine that uses it, so that its git implementation
imports nothing from above.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import msgspec

from ai_sdlc.fingerprint import workspace_fingerprint
from ai_sdlc.git import changes
from ai_sdlc.git.changes import ChangeSet
from ai_sdlc.git.feedback import PullFeedback
from ai_sdlc.git.run import GitError


class Prepared(msgspec.Struct, frozen=True):
    """The folder a story's phases run in, and the fields to record in its frontmatter."""

    path: Path
    #: Frontmatter fields to set (`branch`, `worktree_path`), empty when nothing changes.
    fields: dict[str, Any] = msgspec.field(default_factory=dict)
    #: One line for the user ("created worktree …", "resumed …"), or None.
    notice: str | None = None


class AttemptChanges(msgspec.Struct, frozen=True):
    """What became of one implementation attempt's changes."""

    #: The commit made for a passing attempt (None when nothing was committed).
    commit: str | None = None
    #: The work's content key (`StoryWorkspace.fingerprint`) right after that commit, when known:
    #: the review compares with it to reuse the attempt's verification.
    key: str | None = None
    #: The failed attempt's diff (saved by the owner as `attempts/<n>.patch`), or None.
    patch: str | None = None
    #: A short summary of the failed diff, fed to the next attempt's prompt.
    summary: str = ""


class Publication(msgspec.Struct, frozen=True):
    """The result of the done step (push + pull request)."""

    fields: dict[str, Any] = msgspec.field(default_factory=dict)
    #: "opened", "reused", "retargeted", "skipped", "merged", "error"
    outcome: str = "skipped"
    message: str = ""
    #: What kept a needed publication from happening ("remote", "gh"); "" when it happened
    #: or was not needed (no commits ahead). `ai-sdlc pr` fails on it.
    missing: str = ""
    #: The PR is open and the pull-request loop (`pr.loop`) follows it: the story waits
    #: in review instead of being done.
    review: bool = False
    #: The commit pushed (the branch's tip), when a push happened.
    head: str = ""


class Conflict(msgspec.Struct, frozen=True):
    """A story branch that no longer merges cleanly into the branch it builds on (a sibling
    merged first): the files in conflict, and the story's own change to them (for the agent
    that resolves it)."""

    target: str
    files: list[str]
    story_side: str = ""


class Environment(Protocol):
    """A story worktree's own environment (`ai_sdlc.worktree_env.setup.WorktreeEnvironment`,
    a floor above git), made ready before each phase."""

    def ensure(self, work: Path) -> Any:
        """Set the worktree's environment up, or check it still is; raise when it cannot be."""
        ...


class StoryWorkspace(Protocol):
    """The seam between the runner and the place its agents work."""

    def prepare(self, story: Any) -> Prepared:
        """Create or resume the story's folder (called before every phase)."""
        ...

    def base_commit(self, story: Any, path: Path) -> str | None:
        """The commit the story's work started from (None: no such commit to compare with)."""
        ...

    def fingerprint(self, story: Any, path: Path, *, checked: bool = False) -> str:
        """The content key of the work in `path`: equal exactly when the work is the same
        (asked of git where there is one: its cost follows the change, not the project).
        `checked`: the story's last `read_only_violations` found none and nothing ran in
        `path` since (no agent, verification, baseline, setup): its look may answer."""
        ...

    def changes(self, story: Any, path: Path, *, checked: bool = False) -> ChangeSet | None:
        """The story's change against its base (its earlier commits and the uncommitted work),
        or None where no base is known (the project folder itself). `checked`: as for
        `fingerprint`, the story's last read-only check or commit of all its work."""
        ...

    def read_only_violations(self, story: Any, path: Path) -> list[str]:
        """Paths a read-only phase changed (ignoring `.ai-sdlc/`, ignored files and the
        agents' known scratch files); empty when the phase kept its hands off."""
        ...

    def revert(self, story: Any, path: Path) -> None:
        """Undo uncommitted changes in `path` (after a read-only violation)."""
        ...

    def settle(self, story: Any, path: Path) -> list[str]:
        """After children ran in `path`: put the workspace's git metadata back (its `.git`
        pointer, no nested repository) before anything else runs there; what a child had
        changed, one line each, for the runner to count (empty: nothing)."""
        ...

    def attempt_passed(self, story: Any, path: Path, *, attempt: int) -> AttemptChanges:
        """An implementation attempt passed verification: keep (commit) its changes."""
        ...

    def attempt_failed(self, story: Any, path: Path, *, attempt: int) -> AttemptChanges:
        """An implementation attempt failed: save its diff and roll the code back."""
        ...

    def finish(self, story: Any, path: Path, *, checked: bool = False) -> Publication:
        """The story is done: publish the work (push, pull request). `checked`: as for
        `fingerprint`."""
        ...

    def conflicts(self, story: Any) -> Conflict | None:
        """The story's branch no longer merges cleanly into what it builds on (None: it does,
        or there is no branch)."""
        ...

    def pull_feedback(self) -> PullFeedback | None:
        """The pull-request loop's `gh` client (None: no loop here: `pr.loop` off, no git)."""
        ...

    def retire(self, story: Any) -> str | None:
        """A story the pull-request loop finished: its worktree goes (as `finish` does for a
        story done at once); a note for the user, or None when there was nothing to do."""
        ...


class InPlace:
    """Agents work in the project folder itself; nothing is committed or rolled back.

    No story base is known here, so an attempt's work is what changed during it (`fingerprint`
    before and after): asked of git when the folder is in a repository that does not ignore it,
    else by hashing every file of the folder (`workspace_fingerprint`, the fallback outside
    git). Read-only phases are left to the providers' own checks.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        #: The git work tree's top holding `root` (None: not git's), once asked.
        self._top: tuple[Path | None] | None = None

    def prepare(self, story: Any) -> Prepared:
        return Prepared(self.root)

    def base_commit(self, story: Any, path: Path) -> str | None:
        return None  # the user's own folder: no untouched base to compare with

    def fingerprint(self, story: Any, path: Path, *, checked: bool = False) -> str:
        top = self._git_top()
        if top is None:
            return workspace_fingerprint(path)
        return changes.work_state(top).key

    def changes(self, story: Any, path: Path, *, checked: bool = False) -> ChangeSet | None:
        return None

    def _git_top(self) -> Path | None:
        if self._top is None:
            try:
                self._top = (changes.repository_top(self.root),)
            except GitError:  # git is not installed
                self._top = (None,)
        return self._top[0]

    def read_only_violations(self, story: Any, path: Path) -> list[str]:
        return []

    def revert(self, story: Any, path: Path) -> None:
        return None

    def settle(self, story: Any, path: Path) -> list[str]:
        return []  # the project folder's own git metadata: the sandbox leaves it writable

    def attempt_passed(self, story: Any, path: Path, *, attempt: int) -> AttemptChanges:
        return AttemptChanges()

    def attempt_failed(self, story: Any, path: Path, *, attempt: int) -> AttemptChanges:
        return AttemptChanges()

    def finish(self, story: Any, path: Path, *, checked: bool = False) -> Publication:
        return Publication()

    def conflicts(self, story: Any) -> Conflict | None:
        return None  # no branch here

    def pull_feedback(self) -> PullFeedback | None:
        return None  # no branch, no pull request

    def retire(self, story: Any) -> str | None:
        return None
