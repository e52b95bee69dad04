"""Which story branches no longer merge cleanly into what they build on (a sibling merged
first), for `status`, `list` and `show` to say so before `ai-sdlc run <id>` resolves it; and
the stories that cannot get a branch, their unmerged dependencies' branches conflicting with
each other (a state of its own: the way out is merging those dependencies first).

Cheap enough for every board: only stories that have a branch (`branch` in frontmatter) and
are in progress, blocked or done are considered, and those still to start with two
dependencies or more; one `for-each-ref --no-merged` keeps only branches not yet merged into
the base, then one `git merge-tree` (objects only, nothing checked out) per such story.
Outside git, or with no such story, no git runs at all. A git failure answers "no conflicts":
a board never breaks on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.git import repo
from ai_sdlc.git.basebranch import BaseBranch
from ai_sdlc.git.repo import RefSnapshot
from ai_sdlc.git.run import GitError, git
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.stacking import clash_of, conflicting_files, dependencies
from ai_sdlc.git.worktrees import BRANCH_PREFIX, Worktree

#: Statuses whose branch may still be waiting to merge (backlog and ready have none yet).
CHECKED_STATUSES = frozenset({"in-progress", "in-review", "blocked", "done"})


class Collision(msgspec.Struct, frozen=True):
    """The story's branch conflicts in `files` with `target` (the base branch, or the unmerged
    branch of the dependency it is stacked on); or, with `between` (two dependency ids), the
    story has no branch and cannot get one: its unmerged dependencies' branches (`target` and
    `other`) conflict with each other, a state of its own whose way out is merging them."""

    target: str
    files: list[str]
    between: list[str] = msgspec.field(default_factory=list)
    other: str | None = None

    def text(self, story_id: str) -> str:
        """One line for the board, `list` and `worktrees`: what conflicts and the way out."""
        files = ", ".join(self.files)
        if self.between:
            a, b = self.between
            return f"dependencies {a} and {b} conflict in {files}: merge them first"
        return f"conflicts: {files} (ai-sdlc run {story_id})"


def story_collisions(
    root: Path, settings: GitSettings, stories: Iterable[Any]
) -> dict[str, Collision]:
    """Story id → its `Collision`, for the stories whose branch conflicts with what it builds
    on; empty outside git, without story branches, or when git cannot tell."""
    stories = list(stories)
    candidates = [(s, b) for s in stories if (b := _branch_of(s))]
    stacked = [s for s in stories if _may_stack_on_two(s)]
    if not candidates and not stacked:
        return {}
    try:
        return _collisions(root, settings, candidates, stacked)
    except (GitError, OSError):
        return {}


def _may_stack_on_two(story: Any) -> bool:
    """A story still to finish with two dependencies or more: its branch builds on all that
    are unmerged, which must merge with each other."""
    if story.status in ("done", "abandoned"):
        return False
    return len(dependencies(story)) >= 2


def _branch_of(story: Any) -> str | None:
    branch = story.frontmatter.get("branch")
    if story.status not in CHECKED_STATUSES or not isinstance(branch, str):
        return None
    return branch if branch.startswith(BRANCH_PREFIX) else None


def _collisions(
    root: Path, settings: GitSettings, candidates: list[tuple[Any, str]], stacked: list[Any]
) -> dict[str, Collision]:
    found = repo.locate(root)
    if found is None or not found.has_commit:
        return {}
    top = found.top
    refs = RefSnapshot(top, found.common_dir)
    base_branch = BaseBranch(top, found.common_dir, settings)
    refs.ask(*base_branch.ref_names())
    base, start = base_branch.start_point(base_branch.name(refs), refs)
    unmerged = _unmerged(top, start.sha)
    by_story = {Worktree(Path("."), branch=b).story_id: b for b in unmerged}
    out: dict[str, Collision] = {}
    for story, branch in candidates:
        if branch not in unmerged:
            continue  # merged into the base (or gone): nothing can conflict
        target, target_sha = base, start.sha
        for dep in dependencies(story):  # stacked on an unmerged dependency: against it
            dep_branch = by_story.get(dep)
            if dep_branch is not None and dep_branch != branch:
                target, target_sha = dep_branch, unmerged[dep_branch]
                break
        try:
            files = conflicting_files(top, branch, target_sha)
        except GitError:
            continue
        if files:
            out[story.id] = Collision(target, files)
    for story in stacked:
        deps = [(d, b, unmerged[b]) for d in dependencies(story) if (b := by_story.get(d))]
        own = _branch_of(story) or story.frontmatter.get("branch")
        tip = unmerged.get(own) if isinstance(own, str) else None
        if tip is not None and deps:  # a branch already made: what it lacks still to merge
            deps = deps[:1] + [d for d in deps[1:] if not _contains(top, tip, d[2])]
        clash = _between(top, deps)
        if clash is not None:
            out[story.id] = clash
    return out


def _contains(top: Path, tip: str, sha: str) -> bool:
    return git(top, "merge-base", "--is-ancestor", sha, tip, check=False).ok


def _between(top: Path, deps: list[tuple[str, str, str]]) -> Collision | None:
    try:
        clash = clash_of(top, deps)
    except GitError:
        return None
    if clash is None:
        return None
    return Collision(clash.first, clash.files, list(clash.stories), clash.other)


def _unmerged(top: Path, base_sha: str) -> dict[str, str]:
    """Branch → tip of every story branch not merged into `base_sha` (one `for-each-ref`)."""
    done = git(
        top,
        "for-each-ref",
        f"--no-merged={base_sha}",
        "--format=%(objectname) %(refname)",
        f"refs/heads/{BRANCH_PREFIX}",
    )
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        sha, _, ref = line.partition(" ")
        out[ref.removeprefix("refs/heads/")] = sha
    return out


__all__ = ["CHECKED_STATUSES", "Collision", "story_collisions"]
