"""`GitWorkspace`: each story works in its own git worktree and branch.

The runner's `Workspace` seam (see `ai_sdlc.workflow.workspace`) implemented with git: the
worktree `.ai-sdlc/worktrees/<id>-<slug>/` on branch `ai-sdlc/<id>-<slug>` is created from the
base branch or resumed; a passing attempt is committed with explicit staging; a failing one is
saved as a patch and rolled back; a done story's branch is pushed and gets a pull request. Story
state is never written here: the fields to record are returned to the runner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.git import attempts, repo, staging, worktrees
from ai_sdlc.git.pulls import GitHubCli, Guard, call_directly, pr_body, pr_title
from ai_sdlc.git.run import REMOTE_TIMEOUT, GitError, TransientRemoteError, run
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.resilience import CircuitBreakerOpenError
from ai_sdlc.workflow.workspace import AttemptRecord, Finished, InPlace, Prepared, Workspace


class PublishError(GitError):
    """Pushing the branch or opening the PR failed (after the `github` policy's retries).

    The work is safe on the story branch; `ai-sdlc pr <id>` tries again.
    """


class GitWorkspace:
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
    ) -> None:
        self.root = root.resolve()
        self.settings = settings or GitSettings()
        self.guard = guard
        self.gh = gh
        self.verification = verification
        top = repo.toplevel(self.root)
        if top is None:
            raise GitError(f"{self.root} is not inside a git repository")
        if not repo.has_commit(top):
            raise GitError(
                f"the git repository at {top} has no commit yet: a story branch needs a base",
                hint="make a first commit, or run with --no-worktree",
            )
        self.top = top
        #: The project folder's place inside the repository ("" when it is the top).
        #: Story worktree tops already checked by `_own`, by folder.
        self._tops: dict[Path, Path] = {}
        self.prefix = self.root.relative_to(top)
        self.worktrees_root = self.settings.worktrees_root(self.root).resolve()

    @classmethod
    def from_config(
        cls, root: Path, config: Any, *, guard: Guard = call_directly, gh: str = "gh"
    ) -> GitWorkspace:
        """From the project's `Config` (`git.*`, and `verify.*` for the PR body)."""
        commands = [c for c in (config.get("verify.build"), config.get("verify.test")) if c]
        verification = (
            "passed: " + ", ".join(f"`{c}`" for c in commands)
            if commands
            else "no build or test command configured (verify.build / verify.test)"
        )
        return cls(
            root, GitSettings.from_config(config), guard=guard, gh=gh, verification=verification
        )

    # --- the Workspace protocol ---------------------------------------------------------------

    def prepare(self, story: Any) -> Prepared:
        branch, folder = self.location(story)
        self._keep_out_of_checkout()
        tree = worktrees.find(self.top, folder)
        if tree is not None and not tree.prunable and worktrees.is_worktree_folder(folder):
            if tree.branch != branch:
                raise GitError(
                    f"the worktree {folder} is on {tree.branch or 'a detached HEAD'}, "
                    f"not on the story branch {branch}",
                    hint=f"switch it back: git -C {folder} switch {branch}",
                )
            notice = None
            if staging.status(folder):
                shown = self._shown(folder)
                notice = f"resumed worktree {shown} (branch {branch}) with an earlier run's changes"
        else:
            if tree is not None:
                worktrees.prune(self.top)
            worktrees.require_free(folder)
            holder = worktrees.holder_of(self.top, branch)
            if holder is not None:
                raise GitError(
                    f"branch {branch} is checked out in {holder.path}",
                    hint="switch that checkout to another branch, then run again",
                )
            if repo.branch_exists(self.top, branch):
                worktrees.add(self.top, folder, branch, start=None)
                notice = f"recreated worktree {self._shown(folder)} from branch {branch}"
            else:
                base = self.base_branch()
                start = repo.start_point(self.top, base, self.settings.remote)
                worktrees.add(self.top, folder, branch, start=start)
                shown = self._shown(folder)
                notice = f"created worktree {shown} on new branch {branch} from {base}"
        attempts.adopt_head(folder, story.id)
        wanted = {"branch": branch, "worktree_path": self._shown(folder)}
        fields = {k: v for k, v in wanted.items() if story.frontmatter.get(k) != v}
        work = folder / self.prefix
        # A project in a subfolder of the repository whose subfolder holds nothing committed
        # yet (only its git-ignored .ai-sdlc state): the agents still work there.
        work.mkdir(parents=True, exist_ok=True)
        return Prepared(work, fields, notice)

    def read_only_violations(self, story: Any, path: Path) -> list[str]:
        return attempts.violations(self._own(path), story.id)

    def revert(self, story: Any, path: Path) -> None:
        top = self._own(path)
        changed = [p for p in attempts.violations(top, story.id) if not p.startswith("HEAD ")]
        attempts.rollback(top, story.id, changed)

    def attempt_passed(self, story: Any, path: Path, *, attempt: int) -> AttemptRecord:
        return AttemptRecord(commit=attempts.commit_attempt(self._own(path), story, attempt))

    def attempt_failed(self, story: Any, path: Path, *, attempt: int) -> AttemptRecord:
        top = self._own(path)
        diff = attempts.capture(top, story.id)
        if not self.settings.keep_failed_attempts:
            attempts.rollback(top, story.id)
        if diff is None:
            return AttemptRecord(summary="no files changed")
        return AttemptRecord(patch=diff.patch, summary=diff.summary)

    def finish(self, story: Any, path: Path) -> Finished:
        top = self._own(path)
        branch = repo.current_branch(top) or str(story.frontmatter.get("branch") or "")
        try:
            return self.publish(story, branch)
        except PublishError as exc:
            # The story is done and its work committed: a PR that cannot be opened now is
            # reported (outcome "error", with the command to retry), not a failed story.
            return Finished(outcome="error", message=str(exc))

    # --- publishing ----------------------------------------------------------------------------

    def publish(self, story: Any, branch: str) -> Finished:
        """Push `branch` and open (or reuse) its pull request; `ai-sdlc pr` calls this too."""
        later = f"ai-sdlc pr {story.id}"
        remote = self.settings.remote
        if not branch or not repo.branch_exists(self.top, branch):
            raise GitError(
                f"{story.id} has no branch to publish ({branch or 'none recorded'})",
                hint=f"run the story first: ai-sdlc run {story.id}",
            )
        if repo.remote_url(self.top, remote) is None:
            return Finished(
                outcome="skipped",
                message=f"no git remote {remote!r}: the work stays on branch {branch}; add the "
                f"remote, then run `{later}`",
            )
        base = self.base_branch()
        start = repo.start_point(self.top, base, remote)
        ahead = run(("git", "rev-list", "--count", f"{start}..{branch}"), self.top).stdout.strip()
        if ahead == "0":
            return Finished(
                outcome="skipped",
                message=f"branch {branch} has no commits ahead of {base}: no pull request needed",
            )
        gh = GitHubCli(self.top, executable=self.gh, guard=self.guard)
        try:
            self._push(branch)
            if not gh.available():
                return Finished(
                    outcome="skipped",
                    message=f"gh (GitHub CLI) not found on PATH: branch {branch} is pushed to "
                    f"{remote}; install gh and run `{later}` to open the pull request",
                )
            url = gh.existing(branch)
            outcome = "reused"
            if url is None:
                breakdown = _breakdown(story)
                body = pr_body(story, verification=self.verification, breakdown=breakdown)
                url = gh.create(
                    title=pr_title(story),
                    body=body,
                    head=branch,
                    base=base,
                    draft=self.settings.draft,
                )
                outcome = "opened"
            fields = {"pr_url": url}
            if self.settings.auto_merge:
                checks = gh.checks(branch)
                if not checks.passed:
                    return Finished(fields, "failed", checks.output or "checks failed")
                gh.merge(branch)
                return Finished(fields, "merged", f"pull request {url} merged (squash)")
            verb = "opened" if outcome == "opened" else "already open:"
            return Finished(fields, outcome, f"pull request {verb} {url}")
        except (GitError, TransientRemoteError, CircuitBreakerOpenError) as exc:
            raise PublishError(
                f"{story.id}: could not publish branch {branch}: {getattr(exc, 'message', exc)}",
                hint=f"the work is committed on {branch}; run `{later}` to try again",
            ) from None

    def _push(self, branch: str) -> None:
        remote = self.settings.remote
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        self.guard(
            lambda: run(
                ("git", "push", "--quiet", "--set-upstream", remote, refspec),
                self.top,
                remote=True,
                timeout=REMOTE_TIMEOUT,
            )
        )

    # --- helpers -------------------------------------------------------------------------------

    def base_branch(self) -> str:
        return self.settings.base_branch or repo.default_branch(self.top, self.settings.remote)

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
        folder = self.worktrees_root / name
        if isinstance(recorded_path, str) and recorded_path:
            candidate = (self.root / recorded_path).resolve()
            if candidate.parent == self.worktrees_root:
                folder = candidate
        return branch, folder

    def _own(self, path: Path) -> Path:
        """The top of the story worktree holding `path`; refuses any other folder (above all
        the user's own checkout) before anything is reset or cleaned. Asked of git once per
        folder (a worktree's top does not move while it exists)."""
        top = self._tops.get(path)
        if top is None or not top.is_dir():
            top = repo.toplevel(path)
            if top is None or top == self.top or top.parent != self.worktrees_root:
                raise GitError(f"{path} is not a story worktree under {self.worktrees_root}")
            self._tops[path] = top
        return top

    def _shown(self, folder: Path) -> str:
        try:
            return folder.relative_to(self.root).as_posix()
        except ValueError:
            return str(folder)

    def _keep_out_of_checkout(self) -> None:
        """Make the worktrees folder invisible to the main checkout's `git status` (projects
        initialised before `worktrees/` was in `.ai-sdlc/.gitignore`)."""
        self.worktrees_root.mkdir(parents=True, exist_ok=True)
        marker = self.worktrees_root / ".gitignore"
        if not marker.exists():
            marker.write_text("# ai-sdlc story worktrees: not for git\n*\n", encoding="utf-8")


def _breakdown(story: Any) -> str:
    from ai_sdlc.workflow.ledger import breakdown_text

    total = int(story.frontmatter.get("total_recovery_attempts") or 0)
    raw = story.frontmatter.get("recovery_breakdown") or {}
    breakdown = {str(k): int(v) for k, v in dict(raw).items()}
    return breakdown_text(total, breakdown)


def select_workspace(
    root: Path,
    config: Any,
    *,
    no_worktree: bool = False,
    guard: Guard = call_directly,
    gh: str = "gh",
) -> tuple[Workspace, str | None]:
    """The workspace for a run, and a one-line notice when isolation is off.

    `--no-worktree` or `git.worktrees: false` → the project folder itself; outside a git
    repository (or one without a commit) → the project folder, with a notice saying so.
    """
    if no_worktree or not GitSettings.from_config(config).worktrees:
        return InPlace(root), None
    top = repo.toplevel(root)
    if top is None:
        return InPlace(root), (
            "not a git repository: agents work in the project folder itself (no worktree, "
            "branch, commits or rollback)"
        )
    if not repo.has_commit(top):
        return InPlace(root), (
            "the git repository has no commit yet: agents work in the project folder itself "
            "(make a first commit to get a worktree per story)"
        )
    return GitWorkspace.from_config(root, config, guard=guard, gh=gh), None


__all__ = ["GitWorkspace", "PublishError", "select_workspace"]
