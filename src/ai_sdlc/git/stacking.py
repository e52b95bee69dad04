"""Stacked story branches and keeping a story branch up to date with what it builds on.

A story whose dependency is done but not merged into the base branch builds on that
dependency's code: its branch starts from the dependency's branch (several such dependencies:
from the first, with the others merged in at creation), and its pull request targets that
branch until the dependency is merged, then the base branch. A story branch that lacks newer
commits of the branch it builds on (the base, or its dependency's branch) gets them by a merge
(never a rebase: nothing pushed is rewritten, no force-push). Whether the dependencies are done
is decided elsewhere (the graph rule); this module only answers *where* a branch builds on.

All git through `ai_sdlc.git.run` (hardened, no shell).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.git.basebranch import BaseBranch
from ai_sdlc.git.repo import RefSnapshot
from ai_sdlc.git.run import GitError, git
from ai_sdlc.git.seam import Conflict
from ai_sdlc.git.worktrees import BRANCH_PREFIX, Worktree

#: The merge commit's message (the story id added by the caller).
MERGE_SUBJECT = "Merge {target} into {branch}"


class Stack(msgspec.Struct, frozen=True):
    """Where a story's branch builds on: `branch` (the dependency's branch, or the base),
    `sha` its tip, and `extra`: further unmerged dependency branches merged in at creation."""

    branch: str
    sha: str
    #: The dependency whose branch this is (None: the base branch).
    story: str | None = None
    extra: tuple[tuple[str, str], ...] = ()


class MergeConflict(GitError):
    """Bringing a story branch up to date stopped on conflicting files."""

    def __init__(self, message: str, *, files: list[str], target: str) -> None:
        super().__init__(message)
        self.files = files
        self.target = target


class DependenciesConflictError(AiSdlcError):
    """The story cannot start: the branches of its unmerged dependencies conflict with each
    other, so no branch can build on all of them. Nothing was touched (exit 1); the way out
    is to merge those dependencies into the base branch first (`way_out`)."""

    def __init__(self, story_id: str, clash: DependencyClash, base: str) -> None:
        super().__init__(
            f"{story_id} cannot start: {clash.describe()}", hint=clash.way_out(story_id, base)
        )
        self.story_id = story_id
        self.clash = clash


class DependencyClash(msgspec.Struct, frozen=True):
    """The unmerged branches a story builds on that conflict: `first` (the branch it would
    start from) and `other`, in `files`; `stories` are the two dependency ids."""

    stories: tuple[str, str]
    first: str
    other: str
    files: list[str]

    def describe(self) -> str:
        a, b = self.stories
        return (
            f"its unmerged dependencies {a} and {b} conflict "
            f"({self.first} and {self.other}: {', '.join(self.files)})"
        )

    def way_out(self, story_id: str, base: str) -> str:
        """The one way out: merge the dependencies into the base branch (resolving the
        conflict once, by a person), then run the story again; it then starts from the base."""
        return (
            f"merge them into {base} first (their pull requests, or 'git switch {base} && "
            f"git merge {self.first} && git merge {self.other}', resolving the conflict), "
            f"then 'ai-sdlc run {story_id}'"
        )


def clash_of(top: Path, deps: Sequence[tuple[str, str, str]]) -> DependencyClash | None:
    """The first conflict between the unmerged dependency branches `deps` ((id, branch, tip),
    as `unmerged_dependencies` gives them): each further one against the first, asked of
    `git merge-tree` (objects only). None: they merge cleanly (or there are fewer than two)."""
    if len(deps) < 2:
        return None
    first_id, first_branch, first_sha = deps[0]
    for dep, branch, sha in deps[1:]:
        files = conflicting_files(top, sha, first_sha)
        if files:
            return DependencyClash((first_id, dep), first_branch, branch, files)
    return None


def dependencies(story: Any) -> list[str]:
    """The story ids the story depends on, as its frontmatter lists them."""
    raw = story.frontmatter.get("dependencies") or []
    return [str(d) for d in raw] if isinstance(raw, list) else []


def story_branches(top: Path) -> dict[str, tuple[str, str]]:
    """Story id → (branch, tip) of every local `ai-sdlc/S-…` branch (one `for-each-ref`)."""
    done = git(
        top, "for-each-ref", "--format=%(objectname) %(refname)", f"refs/heads/{BRANCH_PREFIX}"
    )
    out: dict[str, tuple[str, str]] = {}
    for line in done.stdout.splitlines():
        sha, _, ref = line.partition(" ")
        branch = ref.removeprefix("refs/heads/")
        story = Worktree(Path("."), branch=branch).story_id
        if story is not None and story not in out:
            out[story] = (branch, sha)
    return out


def is_ancestor(top: Path, commit: str, of: str) -> bool:
    return git(top, "merge-base", "--is-ancestor", commit, of, check=False).ok


def merged(top: Path, sha: str, bases: Iterable[str]) -> bool:
    """Whether the commit `sha` is in any of `bases` (the base branch, local or remote)."""
    return any(is_ancestor(top, sha, b) for b in bases)


def unmerged_dependencies(
    top: Path,
    story: Any,
    bases: Sequence[str],
    branches: Mapping[str, tuple[str, str]] | None = None,
) -> list[tuple[str, str, str]]:
    """(dependency id, branch, tip) of each dependency whose branch exists and is not merged
    into the base (`bases`: its commits), in the story's order."""
    wanted = dependencies(story)
    if not wanted:
        return []
    known = story_branches(top) if branches is None else branches
    out: list[tuple[str, str, str]] = []
    for dep in wanted:
        found = known.get(dep)
        if found is not None and not merged(top, found[1], bases):
            out.append((dep, found[0], found[1]))
    return out


def stack_for(top: Path, story: Any, base: str, base_sha: str, bases: Sequence[str]) -> Stack:
    """Where the story builds on: its first unmerged dependency's branch (the others merged in
    at creation), else the base branch."""
    deps = unmerged_dependencies(top, story, bases)
    if not deps:
        return Stack(base, base_sha)
    first, *others = deps
    return Stack(first[1], first[2], first[0], tuple((b, s) for _d, b, s in others))


def merge_in(
    tree: Path, branch: str, target: str, sha: str, *, env: Mapping[str, str], story_id: str
) -> str | None:
    """Merge `sha` (the tip of `target`) into the story branch checked out at `tree`; the new
    HEAD, or None when `sha` was already in it. Conflicts: the merge is undone (the worktree
    as before) and `MergeConflict` names the files."""
    if is_ancestor(tree, sha, "HEAD"):
        return None
    message = (
        MERGE_SUBJECT.format(target=target, branch=branch) + f"\n\nAI-SDLC-Story: {story_id}\n"
    )
    done = git(tree, "merge", "--no-ff", "--no-edit", "-m", message, sha, check=False, env=env)
    if done.ok:
        return git(tree, "rev-parse", "HEAD").stdout.strip()
    files = git(tree, "diff", "--name-only", "--diff-filter=U", check=False).stdout.split()
    git(tree, "merge", "--abort", check=False)
    if not files:
        raise GitError(f"could not merge {target} into {branch}: {done.stderr.strip()[-500:]}")
    raise MergeConflict(
        f"{branch} no longer merges cleanly with {target}: conflicts in {', '.join(files)}",
        files=files,
        target=target,
    )


def conflicting_files(top: Path, branch: str, target: str) -> list[str]:
    """The files that conflict when `branch` is merged into `target` (empty: it merges
    cleanly), asked of `git merge-tree --write-tree` (nothing checked out; objects only)."""
    done = git(
        top,
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        target,
        branch,
        check=False,
    )
    if done.returncode == 0:
        return []
    if done.returncode != 1:
        raise GitError(f"could not tell whether {branch} merges into {target}: {done.stderr}")
    return sorted(set(done.stdout.splitlines()[1:]) - {""})


def story_side(top: Path, branch: str, target: str, files: Sequence[str]) -> str:
    """The story's own change to `files` since it forked from `target` (a diff)."""
    fork = git(top, "merge-base", branch, target, check=False).stdout.strip()
    if not fork:
        return ""
    return git(top, "diff", fork, branch, "--", *files, check=False).stdout


def merge_resolving(
    tree: Path, branch: str, target: str, sha: str, *, env: Mapping[str, str], story_id: str
) -> str:
    """Merge `sha` into the story branch at `tree`, each conflicting hunk taking `target`'s
    side (already merged, reviewed code is never lost); the story's side is for its agent to
    bring back on top (a counted rework). The new HEAD."""
    message = (
        MERGE_SUBJECT.format(target=target, branch=branch)
        + f" (conflicts: {target}'s side taken, the story's redone in rework)"
        + f"\n\nAI-SDLC-Story: {story_id}\n"
    )
    git(tree, "merge", "--no-ff", "--no-edit", "-X", "theirs", "-m", message, sha, env=env)
    return git(tree, "rev-parse", "HEAD").stdout.strip()


class StoryStacks:
    """What the story branches of the repository whose main checkout is `top` build on, and
    bringing them up to date: `identity` gives the environment a merge commit needs,
    `widen` adds folders a merge brought to a sparse worktree."""

    def __init__(
        self,
        top: Path,
        common_dir: Path,
        base_branch: BaseBranch,
        *,
        identity: Callable[[], Mapping[str, str]],
        widen: Callable[[Path], None],
    ) -> None:
        self.top = top
        self._common_dir = common_dir
        self.base_branch = base_branch
        self._identity = identity
        self._widen = widen

    def start(self, story: Any, base: str, base_sha: str, refs: RefSnapshot) -> Stack:
        """Where a new branch of the story starts (`stack_for`): a dependency's unmerged
        branch, else the base branch at `base_sha`."""
        if not dependencies(story):
            return Stack(base, base_sha)
        bases = self.base_branch.commits(base, refs)
        return stack_for(self.top, story, base, base_sha, bases)

    def refuse_clash(self, story: Any, base: str, refs: RefSnapshot) -> None:
        """Before a new branch of the story is created: `DependenciesConflictError` when its
        unmerged dependencies conflict with each other (nothing created yet)."""
        if len(dependencies(story)) < 2:
            return
        deps = unmerged_dependencies(self.top, story, self.base_branch.commits(base, refs))
        clash = clash_of(self.top, deps)
        if clash is not None:
            raise DependenciesConflictError(story.id, clash, base)

    def clash(self, story: Any) -> tuple[DependencyClash, str] | None:
        """Whether the story's unmerged dependencies conflict with each other (`clash_of`),
        with the base branch's name: what `run --dry-run` warns of."""
        if len(dependencies(story)) < 2:
            return None
        refs = RefSnapshot(self.top, self._common_dir)
        base = self.base_branch.name(refs)
        deps = unmerged_dependencies(self.top, story, self.base_branch.commits(base, refs))
        found = clash_of(self.top, deps)
        return (found, base) if found is not None else None

    def builds_on(self, story: Any, refs: RefSnapshot | None = None) -> Stack:
        """What the story's branch builds on now: its first unmerged dependency's branch, else
        the base branch (its local branch, else the remote-tracking one)."""
        refs = refs if refs is not None else RefSnapshot(self.top, self._common_dir)
        base = self.base_branch.name(refs)
        start, start_ref = self.base_branch.start_point(base, refs)
        stack = self.start(story, base, start_ref.sha, refs)
        return stack if stack.story is not None else Stack(start, start_ref.sha)

    def merge_in(self, story: Any, branch: str, folder: Path, target: str, sha: str) -> str | None:
        """Merge `target` (at `sha`) into the story branch in `folder` (`merge_in`)."""
        env = self._identity()
        moved = merge_in(folder, branch, target, sha, env=env, story_id=story.id)
        if moved is not None:
            self._widen(folder)  # folders the merge brought join the sparse checkout
        return moved

    def up_to_date(
        self, story: Any, branch: str, folder: Path, refs: RefSnapshot
    ) -> tuple[str | None, str]:
        """Merge newer commits of what the story builds on into its branch: the new HEAD (None
        when it had them all) and the names of what was merged. A conflict with the base (or
        the first dependency) is resolved as `merge_resolving` says; a further dependency
        that conflicts with the first raises `DependenciesConflictError` before anything is
        merged (a branch made before that dependency was added, or before it conflicted)."""
        stack = self.builds_on(story, refs)
        self._refuse_extra_clash(story, folder, stack, refs)  # before any merge
        try:
            moved = self.merge_in(story, branch, folder, stack.branch, stack.sha)
        except MergeConflict:
            # The runner counted this as a rework (`conflicts`) before the phase: the merge
            # keeps the base's side of each conflicting hunk, the agent redoes the story's.
            env = self._identity()
            moved = merge_resolving(
                folder, branch, stack.branch, stack.sha, env=env, story_id=story.id
            )
            self._widen(folder)
        names = [stack.branch]
        for other, sha in stack.extra:  # further unmerged dependencies (a conflict stops)
            moved = self.merge_in(story, branch, folder, other, sha) or moved
            names.append(other)
        return moved, ", ".join(names)

    def _refuse_extra_clash(
        self, story: Any, folder: Path, stack: Stack, refs: RefSnapshot
    ) -> None:
        for other, sha in stack.extra:
            if is_ancestor(folder, sha, "HEAD"):
                continue  # merged in already (a person may have resolved it there)
            files = conflicting_files(self.top, sha, stack.sha)
            if files:
                other_id = Worktree(Path("."), branch=other).story_id or other
                clash = DependencyClash(
                    (stack.story or stack.branch, other_id), stack.branch, other, files
                )
                raise DependenciesConflictError(story.id, clash, self.base_branch.name(refs))

    def conflicts(self, story: Any, branch: str) -> Conflict | None:
        """The story's `branch` no longer merges cleanly into what it builds on (its unmerged
        dependency's branch, else the base branch): a sibling merged first."""
        refs = RefSnapshot(self.top, self._common_dir)
        refs.ask(f"refs/heads/{branch}", *self.base_branch.ref_names())
        tip = refs.get(f"refs/heads/{branch}")
        if tip is None:
            return None
        stack = self.builds_on(story, refs)
        if stack.sha == tip.sha or is_ancestor(self.top, stack.sha, tip.sha):
            return None  # nothing new to merge
        files = conflicting_files(self.top, branch, stack.sha)
        if not files:
            return None
        return Conflict(stack.branch, files, story_side(self.top, branch, stack.sha, files))


__all__ = [
    "DependenciesConflictError",
    "DependencyClash",
    "MergeConflict",
    "Stack",
    "StoryStacks",
    "clash_of",
    "conflicting_files",
    "dependencies",
    "merge_in",
    "merge_resolving",
    "merged",
    "stack_for",
    "story_branches",
    "story_side",
    "unmerged_dependencies",
]
