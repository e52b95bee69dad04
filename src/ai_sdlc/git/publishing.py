"""Publishing a done story's branch: vet its commits, push it, open (or reuse, retarget) its
pull request. Under the pull-request loop (`pr.loop`, `git.auto_merge`) the PR is then followed
(`git/feedback`, `engine/pullrequests`): merging waits for approval and green checks.

A mixin of `GitWorkspace` (`ai_sdlc.git.workspace`), not a class of its own: it reads and keeps
the workspace's per-story memory (vetted tips, the commit a branch was created from, the last
checkpoint) and its once-read config facts, which is what lets `publish` skip git calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.git import incoming, repo, stacking
from ai_sdlc.git.basebranch import BaseBranch
from ai_sdlc.git.feedback import PullFeedback
from ai_sdlc.git.pulls import GitHubCli, Guard, pr_body, pr_title
from ai_sdlc.git.repo import RefSnapshot
from ai_sdlc.git.run import REMOTE_TIMEOUT, GitError, TransientRemoteError, run
from ai_sdlc.git.seam import Publication
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.storytrees import StoryTrees
from ai_sdlc.resilience import CircuitBreakerOpenError
from ai_sdlc.store.schema import breakdown_text


class PublishError(GitError):
    """Pushing the branch or opening the PR failed (after the `github` policy's retries).

    The work is safe on the story branch; `ai-sdlc pr <id>` tries again.
    """


class Publishing:
    """`GitWorkspace`'s publishing steps; the attributes below are set by its `__init__`."""

    top: Path
    settings: GitSettings
    guard: Guard
    gh: str
    verification: str
    base_branch: BaseBranch
    stacks: stacking.StoryStacks
    trees: StoryTrees
    _common_dir: Path
    _checkpoints: dict[str, str]
    _origins: dict[str, str]
    _vetted: dict[str, str]
    _facts: repo.ConfigFacts | None

    def publish(self, story: Any, branch: str, *, refs: RefSnapshot | None = None) -> Publication:
        """Push `branch` and open (or reuse) its pull request; `ai-sdlc pr` calls this too.
        `refs`: the caller's snapshot of this operation's refs (read now, not cached)."""
        later = f"ai-sdlc pr {story.id}"
        remote = self.settings.remote
        refs = refs if refs is not None else RefSnapshot(self.top, self._common_dir)
        if branch:
            refs.ask(f"refs/heads/{branch}", *self.base_branch.ref_names())
        tip = refs.get(f"refs/heads/{branch}") if branch else None
        if tip is None:
            raise GitError(
                f"{story.id} has no branch to publish ({branch or 'none recorded'})",
                hint=f"run the story first: ai-sdlc run {story.id}",
            )
        if not self._has_remote(remote):
            return Publication(
                outcome="skipped",
                message=f"no git remote {remote!r}: the work stays on branch {branch}; add the "
                f"remote, then run `{later}`",
                missing="remote",
            )
        base = self.base_branch.name(refs)
        start, start_ref = self.base_branch.start_point(base, refs)
        # A dependency done but not merged: the PR targets its branch (a stacked PR).
        stack = self.stacks.start(story, base, start_ref.sha, refs)
        target = stack.branch if stack.story is not None else base
        if stack.story is not None:
            start, start_ref = stack.branch, repo.Ref(stack.sha)
        if self._vetted.get(story.id) != tip.sha:  # nothing unchecked is pushed
            folder = self.trees.location(story)[1]
            since = self.base_branch.commits(base, refs)
            incoming.refuse(
                self.top, since, tip.sha, story_id=story.id, branch=branch, worktree=folder
            )
            self._vetted[story.id] = tip.sha
        if not self._surely_ahead(story.id, tip, start_ref):
            count = ("git", "rev-list", "--count", f"{start}..{branch}")
            if run(count, self.top).stdout.strip() == "0":
                return Publication(
                    outcome="skipped",
                    message=f"branch {branch} has no commits ahead of {target}: no pull "
                    "request needed",
                )
        gh = GitHubCli(self.top, executable=self.gh, guard=self.guard)
        try:
            self._push(branch)
            if not gh.available():
                return Publication(
                    outcome="skipped",
                    message=f"gh (GitHub CLI) not found on PATH: branch {branch} is pushed to "
                    f"{remote}; install gh and run `{later}` to open the pull request",
                    missing="gh",
                )
            found = gh.open_pr(branch)
            url, outcome = (found[0], "reused") if found is not None else (None, "reused")
            if found is not None and found[1] and found[1] != target:
                gh.retarget(branch, target)  # its dependency merged: now the base branch
                outcome = "retargeted"
            if url is None:
                breakdown = _breakdown(story)
                body = pr_body(story, verification=self.verification, breakdown=breakdown)
                url = gh.create(
                    title=pr_title(story),
                    body=body,
                    head=branch,
                    base=target,
                    draft=self.settings.draft,
                )
                outcome = "opened"
            fields = {"pr_url": url}
            verb = {"opened": "opened", "retargeted": f"retargeted to {target}:"}.get(
                outcome, "already open:"
            )
            shown = f" (into {target})" if stack.story is not None else ""
            message = f"pull request {verb} {url}{shown}"
            if self.settings.pr_loop:  # followed until approved and green (`git/feedback`)
                shown = f"{message}; in review"
                return Publication(fields, outcome, shown, review=True, head=tip.sha)
            return Publication(fields, outcome, message, head=tip.sha)
        except (GitError, TransientRemoteError, CircuitBreakerOpenError) as exc:
            raise PublishError(
                f"{story.id}: could not publish branch {branch}: {getattr(exc, 'message', exc)}",
                hint=f"the work is committed on {branch}; run `{later}` to try again",
            ) from None

    def pull_feedback(self) -> PullFeedback | None:
        """The pull-request loop's `gh` client, under the `github` policy (None: loop off)."""
        if not self.settings.pr_loop:
            return None
        return PullFeedback(
            self.top,
            executable=self.gh,
            guard=self.guard,
            auto_merge=self.settings.auto_merge,
            trusted_bots=self.settings.trusted_bots,
        )

    def _vet(
        self,
        story: Any,
        branch: str,
        folder: Path,
        head: str,
        refs: RefSnapshot,
        *,
        fallback: str | None,
    ) -> None:
        """Check the commits `head` has beyond the base branch (beyond `fallback`, the
        recorded checkpoint, when the base cannot be resolved); raise `UnsafeCommitsError`."""
        try:
            since = self.base_branch.commits(self.base_branch.name(refs), refs)
        except GitError:
            if fallback is None:
                raise
            since = [fallback]
        incoming.refuse(folder, since, head, story_id=story.id, branch=branch, worktree=folder)
        self._vetted[story.id] = head

    def _push(self, branch: str) -> None:
        remote = self.settings.remote
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        if (self._common_dir / "lfs").is_dir():
            # Our push runs no hook, so Git LFS's `pre-push` hook does not upload the branch's
            # large files: ask git-lfs to, as that hook would have.
            lfs = ("git", "lfs", "push", remote, f"refs/heads/{branch}")
            self.guard(lambda: run(lfs, self.top, remote=True, timeout=REMOTE_TIMEOUT))
        self.guard(
            lambda: run(
                ("git", "push", "--quiet", "--set-upstream", remote, refspec),
                self.top,
                remote=True,
                timeout=REMOTE_TIMEOUT,
            )
        )

    def _surely_ahead(self, story_id: str, tip: repo.Ref, start: repo.Ref) -> bool:
        """True when the branch certainly has commits the start point lacks, without
        `rev-list`: this process created the branch from `start`'s current commit and then
        committed on it (the tip is our latest checkpoint, a descendant of that commit)."""
        origin = self._origins.get(story_id)
        return (
            origin is not None
            and start.sha == origin
            and tip.sha == self._checkpoints.get(story_id)
            and tip.sha != origin
        )

    def _config(self, path: Path) -> repo.ConfigFacts:
        """`user.email` and the remotes' URLs, read once per workspace. An agent that edits the
        repository's config during a run changes neither the identity a commit falls back to
        nor whether a push is tried (a push to a remote removed meanwhile fails as before,
        with the `ai-sdlc pr` hint)."""
        if self._facts is None:
            self._facts = repo.config_facts(path)
        return self._facts

    def fetch_base(self, base: str) -> tuple[str, str] | None:
        """For a PR round: the base branch as the remote has it now, fetched alone into its
        remote-tracking ref (hardened git, no shell), so a base that moved on the remote is
        merged in too: (its shown name, its commit); None without a remote. Errors are
        `GitError`/`TransientRemoteError` (under the `github` policy)."""
        remote = self.settings.remote
        if not self._has_remote(remote):
            return None
        tracking = f"refs/remotes/{remote}/{base}"
        fetch = ("git", "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", remote)
        refspec = f"+refs/heads/{base}:{tracking}"
        self.guard(lambda: run((*fetch, refspec), self.top, remote=True, timeout=REMOTE_TIMEOUT))
        found = run(("git", "rev-parse", "--verify", "--quiet", tracking), self.top, check=False)
        sha = found.stdout.strip()
        return (f"{remote}/{base}", sha) if found.ok and sha else None

    def _has_remote(self, remote: str) -> bool:
        if self._config(self.top).remote_urls.get(remote):
            return True
        # Not in the config as `remote.<name>.url`: ask git (remotes can be defined otherwise).
        return repo.remote_url(self.top, remote) is not None


def _breakdown(story: Any) -> str:
    total = int(story.frontmatter.get("total_recovery_attempts") or 0)
    raw = story.frontmatter.get("recovery_breakdown") or {}
    breakdown = {str(k): int(v) for k, v in dict(raw).items()}
    return breakdown_text(total, breakdown)
