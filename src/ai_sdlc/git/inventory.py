"""The story worktrees of a project, their state, and pruning those whose story is finished."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.git import repo, stacking, staging, worktrees
from ai_sdlc.git.pool import WorktreePool
from ai_sdlc.git.run import GitError
from ai_sdlc.git.settings import GitSettings

#: Story statuses whose worktree `ai-sdlc worktrees prune` removes (`archived`: the story was
#: moved out of the backlog by `ai-sdlc archive`).
FINISHED_STATUSES = ("done", "abandoned", "archived")


@dataclass(frozen=True)
class WorktreeState:
    story: str
    status: str
    branch: str | None
    path: str
    #: "clean", "dirty" or "missing" (folder deleted by hand).
    state: str
    ahead: int | None
    behind: int | None
    changed: list[str]
    #: The dependency whose unmerged branch this story's branch builds on (a stacked branch).
    stacked_on: str | None = None
    #: Files that conflict when the branch is merged into what it builds on (a sibling merged
    #: first): `ai-sdlc run <id>` brings it up to date as a counted rework.
    conflicts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def repository_top(root: Path) -> Path:
    top = repo.toplevel(root)
    if top is None:
        raise GitError(
            f"{root} is not inside a git repository: there are no story worktrees",
            hint="story worktrees exist only in git repositories (git init, first commit)",
        )
    return top


def story_worktrees(
    root: Path,
    settings: GitSettings,
    status_of: Callable[[str], str],
    dependencies_of: Callable[[str], list[str]] | None = None,
) -> list[WorktreeState]:
    """Every worktree of the repository that belongs to a story (on an `ai-sdlc/S-…` branch),
    wherever it is: one made before `git.worktrees_dir` changed is listed (and pruned) too.
    `dependencies_of`: a story's dependencies, to show the stack and conflicts against it."""
    top = repository_top(root)
    base = settings.base_branch or _default(top, settings.remote)
    base_ref = _base_ref(top, base, settings.remote) if base else None
    branches = stacking.story_branches(top) if dependencies_of is not None else {}
    out: list[WorktreeState] = []
    for tree in worktrees.listing(top):
        story_id = tree.story_id
        if story_id is None or tree.path.resolve() == top.resolve():
            continue
        shown = _relative(tree.path, root)
        if tree.prunable or not tree.path.is_dir():
            out.append(
                WorktreeState(
                    story_id, status_of(story_id), tree.branch, shown, "missing", None, None, []
                )
            )
            continue
        _pin(top, tree.path)  # its git folder as the main repository knows it
        changed = staging.committable(staging.status(tree.path))
        counts = repo.ahead_behind(tree.path, base_ref) if base_ref else None
        stacked_on, target = _builds_on(top, story_id, base_ref, dependencies_of, branches)
        conflicts = (
            stacking.conflicting_files(top, tree.branch, target)
            if target is not None and tree.branch
            else []
        )
        out.append(
            WorktreeState(
                story_id,
                status_of(story_id),
                tree.branch,
                shown,
                "dirty" if changed else "clean",
                counts[0] if counts else None,
                counts[1] if counts else None,
                changed,
                stacked_on,
                conflicts,
            )
        )
    return sorted(out, key=lambda w: w.story)


def _builds_on(
    top: Path,
    story_id: str,
    base_ref: str | None,
    dependencies_of: Callable[[str], list[str]] | None,
    branches: dict[str, tuple[str, str]],
) -> tuple[str | None, str | None]:
    """(the dependency the story is stacked on or None, the ref its branch builds on)."""
    if dependencies_of is None or base_ref is None:
        return None, base_ref
    for dep in dependencies_of(story_id):
        found = branches.get(dep)
        if found is not None and not stacking.merged(top, found[1], [base_ref]):
            return dep, found[0]
    return None, base_ref


def _pin(top: Path, path: Path) -> None:
    """Pin the story worktree at `path` (`worktrees.pin_tree`): what an agent wrote in its
    `.git` file does not decide which repository is asked about it."""
    worktrees.pin_tree(_common_dir(top), path)


@functools.lru_cache(maxsize=8)
def _common_dir(top: Path) -> Path:
    found = repo.locate(top)
    if found is None:
        raise GitError(f"{top} is no longer a git repository")
    return found.common_dir


@dataclass(frozen=True)
class PruneResult:
    removed: list[str]
    kept: dict[str, str]


def prune(
    root: Path, states: list[WorktreeState], *, force: bool = False, pool: Path | None = None
) -> PruneResult:
    """Remove the worktrees of finished stories; a dirty one only with `force`. Branches stay.
    `pool`: the worktrees folder whose parked worktrees (`git/pool`) go too (disk back)."""
    top = repository_top(root)
    removed: list[str] = []
    kept: dict[str, str] = {}
    forget_missing = False
    for wt in states:
        if wt.status not in FINISHED_STATUSES:
            continue
        if wt.state == "missing":
            forget_missing = True
            removed.append(wt.path)
            continue
        if wt.state == "dirty" and not force:
            kept[wt.path] = (
                f"uncommitted work ({', '.join(wt.changed[:5])}"
                f"{', …' if len(wt.changed) > 5 else ''}); use --force to discard it"
            )
            continue
        worktrees.remove(top, root / wt.path, force=force or wt.state == "dirty")
        removed.append(wt.path)
    found = repo.locate(top) if pool is not None else None
    if pool is not None and found is not None:
        parked = WorktreePool(top, found.common_dir, pool.resolve())
        for slot, _ in parked.entries():
            worktrees.remove(top, slot, force=True)  # nothing of a story's is left in it
            removed.append(_relative(slot, root))
    if forget_missing:
        worktrees.prune(top)
    return PruneResult(removed, kept)


def _default(top: Path, remote: str) -> str | None:
    try:
        return repo.default_branch(top, remote)
    except GitError:
        return None


def _base_ref(top: Path, base: str, remote: str) -> str | None:
    try:
        return repo.start_point(top, base, remote)
    except GitError:
        return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
