"""`GitWorkspace`: each story works in its own git worktree and branch.

The runner's `StoryWorkspace` seam (`ai_sdlc.git.seam`) implemented with git: the
worktree `.ai-sdlc/worktrees/<id>-<slug>/` on branch `ai-sdlc/<id>-<slug>` is created from the
base branch or resumed; a passing attempt is committed with explicit staging; a failing one is
saved as a patch and rolled back; a done story's branch is pushed and gets a pull request. Story
state is never written here: the fields to record are returned to the runner.

Git is asked as little as a run allows (each call forks a process): facts that do not change
while a run uses the repository are kept on the workspace (the repository's top, the base
branch, `user.email`, the remote's URL, the top of each story worktree we made), and so is the
checkpoint sha this process last wrote or read for each story. Anything an agent can change
between phases (HEAD, the worktree's files, the checked-out branch) is read again, in as few
calls as git allows (`status --porcelain=v2` gives HEAD with the changes), or read without a
process where git's own files answer for certain: refs from the files ref store (`RefFiles`,
else one `for-each-ref` for several questions), the new commit's sha from the checkpoint ref
`update-ref <ref> HEAD` just wrote, and whether a new story's folder or branch is taken by a
worktree (else `git worktree list`).

Split out: which branch is the base (`basebranch.BaseBranch`), where the story worktrees are
(`storytrees.StoryTrees`) and publishing (`publishing.Publishing`, a mixin). What is left (about
500 lines) stays one class on purpose: prepare, the attempt commits and publishing share its
per-story memory (checkpoints, the commit a branch was created from, vetted tips, checked work
states), which is what lets a run skip git calls.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ai_sdlc.git import attempts, gitmeta, repo, stacking, staging, worktrees
from ai_sdlc.git import changes as work_changes
from ai_sdlc.git import run as run_git
from ai_sdlc.git.basebranch import BaseBranch
from ai_sdlc.git.changes import ChangeSet
from ai_sdlc.git.pool import WorktreePool
from ai_sdlc.git.publishing import PublishError, Publishing
from ai_sdlc.git.pulls import GitHubCli, Guard, call_directly
from ai_sdlc.git.repo import RefSnapshot
from ai_sdlc.git.run import GitError, TransientRemoteError, run
from ai_sdlc.git.seam import (
    AttemptChanges,
    Conflict,
    Environment,
    InPlace,
    Prepared,
    Publication,
    StoryWorkspace,
)
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.sparse import SparseTrees
from ai_sdlc.git.storytrees import StoryTrees
from ai_sdlc.locks import held
from ai_sdlc.resilience import CircuitBreakerOpenError

if TYPE_CHECKING:
    from ai_sdlc.config import Config


class GitWorkspace(Publishing):
    """One worktree and branch per story in the git repository holding `root`.

    `guard` runs every `git push` and `gh` call (pass `GuardFactory.git`, the `github` policy);
    `gh` is the GitHub CLI executable; `verification` is the line the PR body shows under
    "Verification" (e.g. the build/test commands that passed).
    """

    def __init__(
        self,
        root: Path,
        settings: GitSettings | None = None,
        *,
        guard: Guard = call_directly,
        gh: str = "gh",
        verification: str = "passed",
        location: repo.Location | None = None,
    ) -> None:
        self.root = root.resolve()
        self.settings = settings or GitSettings()
        self.guard = guard
        self.gh = gh
        self.verification = verification
        # `location`: what `select_workspace` already asked git about `root`.
        found = location or repo.locate(self.root)
        if found is None:
            raise GitError(f"{self.root} is not inside a git repository")
        top = found.top
        if not found.has_commit:
            raise GitError(
                f"the git repository at {top} has no commit yet: a story branch needs a base",
                hint="make a first commit, or run with --no-worktree",
            )
        self.top = top
        self._common_dir = found.common_dir
        #: The checkpoint sha this process last wrote or read, by story: read again from the ref
        #: by each `prepare`, then carried forward (an agent cannot move it behind our back).
        self._checkpoints: dict[str, str] = {}
        #: Story → the commit its branch was created from in this process, kept while the
        #: story's checkpoint descends from it (so `publish` knows the branch is ahead).
        self._origins: dict[str, str] = {}
        #: Story → the commit its branch forked from, as `base_commit` found it.
        self._bases: dict[str, str] = {}
        #: Story → its worktree as the last read-only check that found nothing changed
        #: (nothing committable, HEAD at the checkpoint), or the last commit of all its work,
        #: left it: clean at that HEAD. Any other call about the story drops it; used only
        #: when the caller says nothing ran in the worktree since (`checked`).
        self._checked: dict[str, work_changes.WorkState] = {}
        #: The branch stories start from and their pull requests target (resolved once).
        self.base_branch = BaseBranch(top, self._common_dir, self.settings)
        #: Story → a commit of its branch whose history since the start point is known to keep
        #: the commit rules (checked by `incoming`, or made by this process on such a commit):
        #: `publish` checks the branch again unless its tip is this commit.
        self._vetted: dict[str, str] = {}
        #: `user.email` and the remotes' URLs, read once (see `_config`).
        self._facts: repo.ConfigFacts | None = None
        self.worktrees_root = self.settings.worktrees_root(self.root).resolve()
        #: Where the story worktrees are, and which folders are theirs.
        self.trees = StoryTrees(self.root, top, self._common_dir, self.worktrees_root)
        #: Done stories' worktrees parked for the next story (no whole-tree checkout each).
        self.pool = WorktreePool(top, self._common_dir, self.worktrees_root)
        self.prefix = self.trees.prefix
        #: Story worktrees leave the project's `.ai-sdlc/` out (a committed backlog).
        self.sparse = SparseTrees(self._common_dir, PurePosixPath(self.prefix.as_posix()))
        #: Where story branches build on: stacked on unmerged dependencies, kept up to date.
        self.stacks = stacking.StoryStacks(
            top,
            self._common_dir,
            self.base_branch,
            identity=lambda: self._identity(self.top),
            widen=self._widen,
        )
        #: Story → what the worktree's setup commands changed of its git metadata in
        #: `prepare`, until `settle` hands it to the runner.
        self._unsettled: dict[str, list[str]] = {}
        #: Gives each story worktree its own environment (`worktree.setup`); None: nothing.
        self.environment: Environment | None = None

    @classmethod
    def from_config(
        cls,
        root: Path,
        config: Config,
        *,
        guard: Guard = call_directly,
        gh: str = "gh",
        location: repo.Location | None = None,
    ) -> GitWorkspace:
        """From the project's `Config` (`git.*`, and `verify.*` for the PR body)."""
        commands = [c for _, c in config.typed().verify.commands()]
        verification = (
            "passed: " + ", ".join(f"`{c}`" for c in commands)
            if commands
            else "**Unverified**: nothing was built or tested (`verify.none: true`: the project "
            "runs no verify command on purpose); review and test this change yourself"
        )
        return cls(
            root,
            GitSettings.from_config(config),
            guard=guard,
            gh=gh,
            verification=verification,
            location=location,
        )

    # --- the StoryWorkspace protocol ------------------------------------------------------------

    def _worktrees_serialised(self) -> AbstractContextManager[None]:
        """Held across listing and creating worktrees (see `worktrees.serialised`)."""
        return held(
            worktrees.serialised(self._common_dir),
            busy=f"the worktrees of {self.top} stayed locked",
            hint="wait for the other run to finish creating its worktree, then run again",
        )

    def prepare(self, story: Any) -> Prepared:
        self._checked.pop(story.id, None)
        branch, folder = self.location(story)
        self.trees.keep_out_of_checkout()
        with self._worktrees_serialised():
            if folder.is_dir():  # git metadata a child left changed (a killed run): put back
                admin = worktrees.git_dir_of(self._common_dir, folder)
                if admin is not None:  # counted as the killed run's reserved attempt
                    gitmeta.settle(folder, admin)
            cp_ref = attempts.checkpoint_ref(story.id)
            refs = RefSnapshot(self.top, self._common_dir)
            trees = self._new_story_trees(branch, folder, refs) or worktrees.listing(self.top)
            tree = worktrees.find_in(trees, folder)
            origin: str | None = None
            if tree is not None and not tree.prunable and worktrees.is_worktree_folder(folder):
                if tree.branch != branch:
                    raise GitError(
                        f"the worktree {folder} is on {tree.branch or 'a detached HEAD'}, "
                        f"not on the story branch {branch}",
                        hint=f"switch it back: git -C {folder} switch {branch}",
                    )
                head = tree.head
                admin = worktrees.pin_tree(self._common_dir, folder)
                # An older version's full checkout leaves `.ai-sdlc/` out from now on.
                self.sparse.ensure(folder, admin, head=tree.head or None)
                dirty = bool(staging.status(folder))
                notice = None
                if dirty:
                    shown = self.trees.shown(folder)
                    notice = (
                        f"resumed worktree {shown} (branch {branch}) with an earlier run's changes"
                    )
            else:
                if tree is not None:
                    worktrees.prune(self.top)
                    trees = [t for t in trees if not t.prunable]  # what `prune` just forgot
                worktrees.require_free(folder)
                holder = worktrees.holder_in(trees, branch)
                if holder is not None and self.pool.owns(holder.path):
                    self.pool.release(holder.path)  # a switch interrupted before its move
                    holder = None
                if holder is not None:
                    raise GitError(
                        f"branch {branch} is checked out in {holder.path}",
                        hint="switch that checkout to another branch, then run again",
                    )
                branch_ref = f"refs/heads/{branch}"
                refs.ask(branch_ref, cp_ref, *self.base_branch.ref_names(trees))
                existing = refs.get(branch_ref)
                if existing is not None:
                    self._add(folder, branch, existing.sha)
                    head = existing.sha
                    notice = f"recreated worktree {self.trees.shown(folder)} from branch {branch}"
                else:
                    base = self.base_branch.name(refs, trees)
                    start, start_ref = self.base_branch.start_point(base, refs)
                    # A dependency done but not merged: the story builds on its branch (not
                    # on two that conflict: refused before anything is created).
                    self.stacks.refuse_clash(story, base, refs)
                    stack = self.stacks.start(story, base, start_ref.sha, refs)
                    if stack.story is not None:
                        start, base = stack.branch, stack.branch
                    head = origin = stack.sha
                    # The branch and its checkpoint in one transaction, at the commit just read
                    # (`worktree add -b` would resolve `start` again, and run `git branch`).
                    worktrees.create_branch(self.top, branch, origin, start, checkpoint=cp_ref)
                    self._add(folder, branch, origin)
                    for other, sha in stack.extra:  # further unmerged dependencies
                        head = self.stacks.merge_in(story, branch, folder, other, sha) or head
                    shown = self.trees.shown(folder)
                    notice = f"created worktree {shown} on new branch {branch} from {base}"
                    if stack.extra:
                        notice += " (merged in " + ", ".join(b for b, _ in stack.extra) + ")"
                dirty = False  # a worktree just checked out
        recorded = refs.get(cp_ref)
        recorded_sha = origin if origin is not None else recorded.sha if recorded else None
        if origin is not None:
            self._vetted[story.id] = origin
        elif head:
            # Commits the branch gained that this process did not make (an agent's own, left by
            # a run killed after it committed) are checked before they are adopted.
            self._vet(story, branch, folder, head, refs, fallback=recorded_sha)
        if origin is None and head and not dirty:
            # A branch that lacks newer commits of what it builds on gets them first (a merge).
            moved, target = self.stacks.up_to_date(story, branch, folder, refs)
            if story.frontmatter.get("pr_pending"):  # a PR round: the base as the remote has it
                moved, target, warning = self._remote_base(
                    story, branch, folder, refs, moved, target
                )
                if warning:
                    notice = f"{notice}; {warning}" if notice else warning
            if moved is not None:
                if self._vetted.get(story.id) == head:
                    self._vetted[story.id] = moved  # our merge, on a checked history
                head = moved
                note = f"brought branch {branch} up to date with {target} (merge)"
                notice = f"{notice}; {note}" if notice else note
        known = (head, recorded_sha) if head else None
        checkpoint = attempts.adopt_head(folder, story.id, known=known, dirty=dirty)
        self._checkpoints[story.id] = checkpoint
        self._origins.pop(story.id, None)
        self._bases.pop(story.id, None)
        if origin is not None and checkpoint == origin:
            self._origins[story.id] = origin
        wanted = {"branch": branch, "worktree_path": self.trees.shown(folder)}
        fields = {k: v for k, v in wanted.items() if story.frontmatter.get(k) != v}
        work = folder / self.prefix
        # A project in a subfolder of the repository whose subfolder holds nothing committed
        # yet (only its git-ignored .ai-sdlc state): the agents still work there.
        work.mkdir(parents=True, exist_ok=True)
        self.trees.remember(work, folder)  # listed by git as a worktree of ours a moment ago
        if self.environment is not None:
            try:  # a failure stops the run before any attempt
                self.environment.ensure(work)
            finally:  # its commands are children: what they did is counted by `settle`
                self._unsettled[story.id] = self.trees.settle(folder)
        return Prepared(work, fields, notice)

    def _remote_base(
        self,
        story: Any,
        branch: str,
        folder: Path,
        refs: RefSnapshot,
        moved: str | None,
        target: str,
    ) -> tuple[str | None, str, str | None]:
        """Merge the base branch as fetched from the remote (a PR round: the PR is merged
        into what the remote has, which may have moved). Returns (new HEAD or `moved`, what was
        merged, a warning when the remote could not be reached: the local base stands)."""
        stack = self.stacks.builds_on(story, refs)
        if stack.story is not None:  # stacked on a dependency's branch: that is its base
            return moved, target, None
        try:
            fetched = self.fetch_base(self.base_branch.name(refs))
        except (GitError, TransientRemoteError, CircuitBreakerOpenError) as exc:
            why = getattr(exc, "message", str(exc))
            return moved, target, f"could not fetch the base branch: {why}"
        if fetched is None:
            return moved, target, None
        merged = self.stacks.merge_in(story, branch, folder, *fetched)
        if merged is None:
            return moved, target, None
        return merged, f"{target}, {fetched[0]}" if moved is not None else fetched[0], None

    def settle(self, story: Any, path: Path) -> list[str]:
        """Also what the worktree's setup commands did during `prepare` (before the runner
        had an attempt to count it on)."""
        found = self._unsettled.pop(story.id, [])
        return found + self.trees.settle(self.trees.own(path))

    def _add(self, folder: Path, branch: str, commit: str) -> None:
        """Add the worktree of the existing `branch` (at `commit`) at `folder`, pinned, checked
        out without the project's `.ai-sdlc/` when its tree holds one (`sparse`: a committed
        backlog costs nothing per story); a parked worktree switched to it when the pool has
        one (`pool`: only the difference from its last commit is written)."""
        admin = self.pool.take(folder, branch)
        if admin is not None:
            self.sparse.ensure(folder, admin, head=commit)
            return
        cone = self.sparse.plan(self.top, commit)
        whole = cone is not None and not cone.needed
        worktrees.add(self.top, folder, branch, start=None, checkout=whole)
        admin = worktrees.pin_tree(self._common_dir, folder)
        if not whole:
            self.sparse.fill(folder, admin, cone)

    def _widen(self, top: Path) -> None:
        """Before an attempt is committed, saved or rolled back: folders that appeared in the
        worktree (the agent's, or a merge's) join its sparse checkout (`sparse.ensure`), so
        none of the work is left out."""
        pinned = run_git.pinned(top)
        if pinned is not None and pinned[0] == top:
            self.sparse.ensure(top, pinned[1])

    def conflicts(self, story: Any) -> Conflict | None:
        """The story's branch no longer merges cleanly into what it builds on (its unmerged
        dependency's branch, else the base branch): a sibling merged first."""
        branch = self.location(story)[0]
        found = self.stacks.conflicts(story, branch)
        if found is None or story.frontmatter.get("status") != "done":
            return found
        # A done story whose pull request is no longer open (merged, squash-merged or closed)
        # has nothing to bring up to date: asked of gh only when there is a conflict.
        gh = GitHubCli(self.top, executable=self.gh, guard=self.guard)
        if story.frontmatter.get("pr_url") and self._has_remote(self.settings.remote):
            try:
                if gh.available() and gh.open_pr(branch) is None:
                    return None
            except (GitError, TransientRemoteError, CircuitBreakerOpenError):
                pass  # GitHub unreachable: git's answer stands
        return found

    def _new_story_trees(
        self, branch: str, folder: Path, refs: RefSnapshot
    ) -> list[worktrees.Worktree] | None:
        """For a story certainly new to the repository (no folder, no worktree registered there
        or on its branch, no branch), `prepare` needs of `git worktree list` only the entry of
        the checkout itself (its branch may be the base): read from the ref store instead.
        None when any of it cannot be told without git."""
        if not refs.from_files or os.path.lexists(folder):
            return None
        branch_ref = f"refs/heads/{branch}"
        if worktrees.claimed(self._common_dir, folder, branch_ref) is not False:
            return None
        if refs.get(branch_ref) is not None:
            return None
        return [worktrees.Worktree(self.top, branch=refs.head)]

    def base_commit(self, story: Any, path: Path) -> str | None:
        """The commit the story's branch started from (its merge base with the base branch):
        what the judge compares the story's tests and counts against."""
        origin = self._origins.get(story.id) or self._bases.get(story.id)
        if origin is not None:
            return origin
        top = self.trees.own(path)
        builds_on = self.stacks.builds_on(story)  # a stacked story: its dependency's branch
        found = run(("git", "merge-base", "HEAD", builds_on.sha), top, check=False)
        base = (found.stdout.strip() or None) if found.returncode == 0 else None
        if base is not None:  # the fork point does not move while this process runs it
            self._bases[story.id] = base
        return base

    def fingerprint(self, story: Any, path: Path, *, checked: bool = False) -> str:
        """`checked`: the caller's last read-only check of the story found nothing changed and
        nothing ran in the worktree since; then that check's `git status` answers (no second
        one: about 0.05 s beside 20,000 files)."""
        seen = self._checked.pop(story.id, None)
        if checked and seen is not None:
            return seen.key
        return work_changes.work_state(self.trees.own(path)).key

    def changes(self, story: Any, path: Path, *, checked: bool = False) -> ChangeSet:
        """Against `base_commit`; against the checkpoint when the fork point cannot be told
        (a base branch since deleted). `checked`: as for `fingerprint` (after a commit of all
        the work, the review's look needs no `git status`, and compares two commits)."""
        seen = self._checked.pop(story.id, None)
        top = self.trees.own(path)
        try:
            base = self.base_commit(story, path)
        except GitError:
            base = None
        if base is None:
            base = attempts.checkpoint(top, story.id, self._checkpoints.get(story.id))
        return work_changes.change_set(top, base, seen if checked else None)

    def read_only_violations(self, story: Any, path: Path) -> list[str]:
        self._checked.pop(story.id, None)
        top = self.trees.own(path)
        found, head = attempts.looked_violations(
            top, story.id, base=self._checkpoints.get(story.id)
        )
        if not found:  # nothing committable at the checkpoint
            self._checked[story.id] = work_changes.clean_state(head)
        return found

    def revert(self, story: Any, path: Path) -> None:
        self._checked.pop(story.id, None)
        top = self.trees.own(path)
        self._widen(top)
        base = self._checkpoints.get(story.id)
        found = attempts.violations(top, story.id, base=base)
        changed = [p for p in found if not p.startswith("HEAD ")]
        attempts.rollback(top, story.id, changed, base=base)
        self.trees.restore_git_file(top)

    def attempt_passed(self, story: Any, path: Path, *, attempt: int) -> AttemptChanges:
        self._checked.pop(story.id, None)
        base = self._checkpoints.get(story.id)
        self._widen(self.trees.own(path))
        sha = attempts.commit_attempt(
            self.trees.own(path),
            story,
            attempt,
            base=base,
            identity=self._identity,
            common_dir=self._common_dir,
        )
        if sha is not None:
            self._checkpoints[story.id] = sha  # a child of the checkpoint: origins still hold
            if base is not None and self._vetted.get(story.id) == base:
                self._vetted[story.id] = sha  # our commit, on a checked history
        self.trees.restore_git_file(self.trees.own(path))
        if sha is None:
            return AttemptChanges()
        # The commit holds every committable change: the work tree is clean at it.
        self._checked[story.id] = work_changes.clean_state(sha)
        return AttemptChanges(commit=sha, key=work_changes.clean_key(sha))

    def attempt_failed(self, story: Any, path: Path, *, attempt: int) -> AttemptChanges:
        self._checked.pop(story.id, None)
        top = self.trees.own(path)
        self._widen(top)
        base = self._checkpoints.get(story.id)
        diff = attempts.capture(top, story.id, base=base)
        if not self.settings.keep_failed_attempts:
            attempts.rollback(top, story.id, base=base)
        self.trees.restore_git_file(top)
        if diff is None:
            return AttemptChanges(summary="no files changed")
        return AttemptChanges(patch=diff.patch, summary=diff.summary)

    def finish(self, story: Any, path: Path, *, checked: bool = False) -> Publication:
        """`checked`: as for `fingerprint`; then the done worktree is removed without git's
        own look at it (the check just saw nothing uncommitted but scratch files)."""
        clean = self._checked.pop(story.id, None) is not None and checked
        top = self.trees.own(path)
        recorded = str(story.frontmatter.get("branch") or "")
        # The story worktree's refs (read from files, else one `for-each-ref`) say whether its
        # HEAD is still on the recorded branch (an agent may have switched it), and answer
        # `publish`'s questions.
        refs = RefSnapshot(top, self._common_dir)
        branch = ""
        if recorded:
            refs.ask(f"refs/heads/{recorded}", *self.base_branch.ref_names())
            found = refs.get(f"refs/heads/{recorded}")
            if found is not None and found.checked_out:
                branch = recorded
        if not branch:
            branch = repo.current_branch(top) or recorded
        try:
            finished = self.publish(story, branch, refs=refs)
        except PublishError as exc:
            # The story is done and its work committed: a PR that cannot be opened now is
            # reported (outcome "error", with the command to retry), not a failed story.
            return Publication(outcome="error", message=str(exc))
        if finished.review or self.settings.keep_worktrees:  # in review: rounds work there
            return finished
        return self._remove_done(top, finished, clean=clean)

    def retire(self, story: Any) -> str | None:
        if self.settings.keep_worktrees:
            return None
        folder = self.trees.location(story)[1]
        if not folder.is_dir():
            return None
        return self._remove_done(folder, Publication()).message

    def _remove_done(self, top: Path, finished: Publication, *, clean: bool = False) -> Publication:
        """A done story's worktree goes, with its environment (git-ignored files such as the
        worktree's `.venv`): its work is committed on the branch (and pushed, where there is
        a remote). `git worktree remove` refuses a worktree with changes or untracked files:
        when those are only scratch (bytecode caches) it is forced, else the worktree stays
        and the message says so. `clean`: our own last look found only scratch, and nothing
        ran since: forced at once (git's look would cost another `status`). A worktree with
        nothing committable is parked for the next story when the pool has room (`pool`)."""
        shown = self.trees.shown(top)
        try:
            with self._worktrees_serialised():
                if self._park(top, clean=clean):
                    self.trees.forget(top)
                    note = f"removed worktree {shown} (parked for the next story; "
                    note += "git.keep_worktrees: true keeps it)"
                    message = f"{finished.message}; {note}" if finished.message else note
                    return Publication(finished.fields, finished.outcome, message)
                try:
                    worktrees.remove(self.top, top, force=clean)
                except GitError:
                    if staging.committable(staging.status(top)):
                        raise
                    worktrees.remove(self.top, top, force=True)
        except GitError as exc:
            note = f"kept worktree {shown}: it has uncommitted work ({exc.message.strip()})"
        else:
            self.trees.forget(top)
            note = f"removed worktree {shown} (git.keep_worktrees: true keeps it)"
        message = f"{finished.message}; {note}" if finished.message else note
        return Publication(finished.fields, finished.outcome, message)

    def _park(self, top: Path, *, clean: bool) -> bool:
        """Park the done worktree at `top` when nothing committable is left in it (looked at
        through the git folder found from the main repository, whatever its `.git` says)."""
        if not clean:
            admin = worktrees.git_dir_of(self._common_dir, top)
            if admin is None:
                return False
            gitmeta.put_back_pointer(top, admin)
            run_git.pin(top, admin)
            if staging.committable(staging.status(top)):
                return False
        return self.pool.park(top)

    def _identity(self, top: Path) -> dict[str, str]:
        return attempts.identity_env(self._config(top).user_email)

    def location(self, story: Any) -> tuple[str, Path]:
        """The story's branch and worktree folder (see `StoryTrees.location`)."""
        return self.trees.location(story)


def select_workspace(
    root: Path,
    config: Any,
    *,
    no_worktree: bool = False,
    guard: Guard = call_directly,
    gh: str = "gh",
) -> tuple[StoryWorkspace, str | None]:
    """The workspace for a run, and a one-line notice when isolation is off or the checkout
    has uncommitted changes the story's worktree will not have.

    `--no-worktree` or `git.worktrees: false` → the project folder itself; outside a git
    repository (or one without a commit) → the project folder, with a notice saying so.
    """
    if no_worktree or not GitSettings.from_config(config).worktrees:
        return InPlace(root), None
    found = repo.locate(root)
    if found is None:
        return InPlace(root), (
            "not a git repository: agents work in the project folder itself (no worktree, "
            "branch, commits or rollback)"
        )
    if not found.has_commit:
        return InPlace(root), (
            "the git repository has no commit yet: agents work in the project folder itself "
            "(make a first commit to get a worktree per story)"
        )
    workspace = GitWorkspace.from_config(root, config, guard=guard, gh=gh, location=found)
    return workspace, uncommitted_notice(found.top)


def uncommitted_notice(top: Path) -> str | None:
    """One line when the checkout at `top` has uncommitted changes: a story's worktree starts
    from commits, so the user's edits are neither seen by the agents nor judged; silence would
    let them think otherwise. None when it is clean (`.ai-sdlc/` never counts)."""
    try:
        changed = [c.path for c in staging.status(top)]
    except GitError:
        return None  # a status git cannot give is not worth a run's failure
    if not changed:
        return None
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return (
        f"uncommitted changes in your checkout ({shown}) stay out of the story's worktree, "
        "which starts from commits: commit them first if the story needs them"
    )


__all__ = ["GitWorkspace", "PublishError", "select_workspace", "uncommitted_notice"]
