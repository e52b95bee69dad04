"""The pull-request loop: a story in review follows its PR until it is approved and green.

Under `pr.loop` (or `git.auto_merge`) publishing leaves a story `in-review`, not done. Each
look (`run <id>`, `run --auto`, `watch`) reads the PR once (`git/feedback`): new trusted
feedback (a review asking for changes, an unresolved thread, a comment to `@ai-sdlc`, a
failing check with its log tail) starts one PR rework round, counted as `pr_rework` before it
starts (so the global limit and `limits.pr_rounds` stop it), in the story's worktree with
exactly that feedback in the prompt; its verified commit is pushed to the same branch and the
threads it answered get a reply naming the commit and are resolved. Feedback from anyone
without write access (or a bot not in `pr.trusted_bots`) is logged as ignored. Approved with
every check passed: done (squash-merged first under `git.auto_merge`; a merge GitHub refuses
keeps the story in review). A block by a limit leaves one comment on the PR.
"""

from __future__ import annotations

from typing import Any

from ai_sdlc.errors import StoryBlockedError, UnsafeWorkError
from ai_sdlc.git.feedback import (
    DECLINE_RULE,
    Item,
    PrState,
    PullFeedback,
    pr_number,
    prompt_section,
)
from ai_sdlc.git.run import GitError, TransientRemoteError
from ai_sdlc.git.seam import InPlace
from ai_sdlc.resilience import CircuitBreakerOpenError
from ai_sdlc.store import Story
from ai_sdlc.wording import count
from ai_sdlc.workflow.engine.base import with_hint
from ai_sdlc.workflow.engine.review import Review
from ai_sdlc.workflow.state.steps import DELETE

#: Errors of a look at GitHub that leave the story waiting (retried at the next look).
REMOTE_ERRORS = (GitError, TransientRemoteError, CircuitBreakerOpenError)


def _summary(items: list[Item]) -> str:
    """One line for `log`: who asked what, where; which check failed."""
    parts = []
    for item in items:
        if item.kind == "check":
            parts.append(f"check {item.author} failed")
            continue
        where = f" at {item.where()}" if item.where() else ""
        said = " ".join(item.text.split())[:80]
        parts.append(f"{item.author}{where}: {said!r}")
    return "; ".join(parts)


def _shown(item: Item) -> dict[str, Any]:
    """An item as events carry it: who asked, what, where."""
    data: dict[str, Any] = {"kind": item.kind, "author": item.author, "text": item.text[:300]}
    if item.where():
        data["where"] = item.where()
    return data


class PullRequests(Review):
    """Publishes a finished story and follows its PR in review (see the module docstring)."""

    def _finish(self, story: Story) -> tuple[str, str] | None:
        """All phases passed: publish the work (push, pull request). Returns the run's
        (result, reason): done, or waiting (under the loop a PR that could not be opened is
        not done); None: in review under the loop (its last round's threads answered)."""
        path = self._prepare(story).path
        if not isinstance(self.workspaces, InPlace):  # nothing is pushed outside git
            self._emit("step", story.id, phase="review", step="pushing")
        try:
            finished = self.workspaces.finish(story, path, checked=self._checked == story.id)
        except UnsafeWorkError as exc:
            self._block(story.id, with_hint(exc))
        event = {"action": "publish", "outcome": finished.outcome, "message": finished.message}
        if finished.review:
            self.owner.await_review(story.id, changes=finished.fields, event=event)
            self._emit(
                "story_published", story.id, outcome=finished.outcome, message=finished.message
            )
            if story.frontmatter.get("pr_pending") and finished.head:
                self._answer(story, finished.head)
            return None
        if finished.outcome == "error" and self.workspaces.pull_feedback() is not None:
            self._emit("workspace", story.id, notice=finished.message)
            return "waiting", f"not published yet: {finished.message}"
        if finished.fields or finished.outcome != "skipped" or finished.message:
            self.owner.finish(story.id, fields=finished.fields, event=event)
            self._emit(
                "story_published", story.id, outcome=finished.outcome, message=finished.message
            )
        else:
            self.owner.finish(story.id)
        return "done", "all phases complete"

    def _follow(self, story: Story) -> tuple[str, str] | None:
        """One look at the story's PR. None: the story moved on (a round started, or it is
        done); else ("waiting", why it still waits)."""
        client = self.workspaces.pull_feedback()
        url = str(story.frontmatter.get("pr_url") or "")
        if client is None or not url:  # the loop was turned off meanwhile
            self.owner.finish(story.id)
            return None
        seen = [str(k) for k in story.frontmatter.get("pr_seen") or []]
        try:
            state = client.read(pr_number(url), seen=seen)
        except REMOTE_ERRORS as exc:
            message = getattr(exc, "message", str(exc))
            self._emit("workspace", story.id, notice=f"could not read {url}: {message}")
            return "waiting", f"in review: {url} (could not read it: {message})"
        if state.state == "MERGED":  # merged by someone else
            self._done(story, url, "merged")
            return None
        new = [i for i in state.feedback if i.key not in seen]
        ignored = [i for i in state.ignored if i.key not in seen]
        keys = [*seen, *(i.key for i in (*new, *ignored))]
        if ignored:
            self.owner.note(
                story.id,
                "pr_ignored",
                items=[_shown(i) for i in ignored],
                message=f"ignored (no write access, not a trusted bot): {_summary(ignored)}",
            )
        if new and state.state == "OPEN":
            self._round(story, client, state, new, keys)
            return None
        if ignored:
            self.owner.await_review(story.id, changes={"pr_seen": keys})
        if state.state != "OPEN":
            return "waiting", f"in review: {url} is {state.state.lower()}"
        if not state.approved_and_green:
            decision = (state.decision or "none").lower().replace("_", " ")
            return "waiting", f"in review: {url} (review: {decision}; checks: {state.checks})"
        quiet = story.frontmatter.get("pr_quiet_head")
        if state.checks == "none" and quiet != state.head_sha:
            # Right after a push no check may have reported yet: green only if a later look
            # still finds none on this commit (a project without CI).
            self.owner.await_review(story.id, changes={"pr_quiet_head": state.head_sha})
            return "waiting", (
                f"in review: {url} approved; no checks reported on {state.head_sha[:12]} yet "
                "(the next look calls it green if none do)"
            )
        outcome = "approved"
        if client.auto_merge:
            try:
                refused = client.merge(state.number)
            except REMOTE_ERRORS as exc:
                refused = getattr(exc, "message", str(exc))
            if refused is not None:
                self.owner.note(story.id, "merge_refused", url=url, reason=refused)
                self._emit("workspace", story.id, notice=f"merge of {url} refused: {refused}")
                why = f"in review: {url} approved and green, but the merge was refused: {refused}"
                return "waiting", why
            outcome = "merged"
        self._done(story, url, outcome)
        return None

    def _done(self, story: Story, url: str, outcome: str) -> None:
        """The PR is approved (merged): the story is done and its worktree goes."""
        message = f"{url} {outcome}"
        try:
            note = self.workspaces.retire(story)
        except GitError as exc:
            note = f"the worktree stays: {exc.message}"
        message += f"; {note}" if note else ""
        self.owner.finish(
            story.id, event={"action": "publish", "outcome": outcome, "message": message}
        )
        self._emit("story_published", story.id, outcome=outcome, message=message)

    def _round(
        self,
        story: Story,
        client: PullFeedback,
        state: PrState,
        new: list[Item],
        keys: list[str],
    ) -> None:
        """Start one PR rework round on `new` (counted first; a limit blocks it and says so
        once on the PR)."""
        round_no = int(story.frontmatter.get("pr_round") or 0) + 1
        reviewers = sorted({i.author for i in new if i.kind in ("review", "thread")})
        threads = {str(n): i.thread for n, i in enumerate(new, 1) if i.thread}
        text = (
            f"Pull request {state.url}, PR rework round {round_no}: the reviewers' feedback "
            "and failing checks below. Address each item in the workspace; the project's own "
            f"build and tests judge the result. {DECLINE_RULE}\n\n" + prompt_section(new)
        )
        try:
            self.owner.pr_round(
                story.id,
                round_no=round_no,
                limit=self.deps.limits.pr_rounds,
                feedback=text,
                changes={
                    "implementation_complete": False,
                    "rework_pending": True,
                    "pr_round": round_no,
                    "pr_seen": keys,
                    "pr_pending": {"round": round_no, "threads": threads, "reviewers": reviewers},
                },
                event={
                    "items": [_shown(i) for i in new],
                    "url": state.url,
                    "message": f"round {round_no}: {_summary(new)}",
                },
            )
        except StoryBlockedError as exc:
            self._tell_pr(story.id, client, state.number, exc.message)
            raise
        self._emit("workspace", story.id, notice=f"PR rework round {round_no}: {len(new)} items")

    def _tell_pr(self, story_id: str, client: PullFeedback, number: int, reason: str) -> None:
        body = f"ai-sdlc stopped working on this pull request: {reason}"
        try:
            client.comment(number, body)
        except REMOTE_ERRORS as exc:
            notice = f"could not comment on the PR: {getattr(exc, 'message', exc)}"
            self._emit("workspace", story_id, notice=notice)

    def _answer(self, story: Story, head: str) -> None:
        """After a round's commit is pushed: reply to each thread it addressed (naming the
        commit) and resolve it; a thread the agent declined (`DECLINED <n>: why` in its
        answer, kept as `pr_declined`) gets the reason and stays open; the reviewers who asked
        are re-requested; logged as one event."""
        pending = story.frontmatter.get("pr_pending")
        client = self.workspaces.pull_feedback()
        url = str(story.frontmatter.get("pr_url") or "")
        if not isinstance(pending, dict) or client is None or not url:
            return
        number = pr_number(url)
        answered: list[str] = []
        declined: list[str] = []
        reasons = story.frontmatter.get("pr_declined")
        reasons = reasons if isinstance(reasons, dict) else {}
        threads = pending.get("threads")
        round_no = pending.get("round")
        files = story.frontmatter.get("pr_changed")
        what = (
            f" Changed: {', '.join(map(str, files))}." if isinstance(files, list) and files else ""
        )
        try:
            for n, thread in threads.items() if isinstance(threads, dict) else []:
                why = reasons.get(str(n))
                if why:
                    text = f"Not changed in {head[:12]} (PR rework round {round_no}): {why}"
                    client.reply(str(thread), text)
                    declined.append(str(thread))
                    continue
                done = f"Addressed in {head[:12]} (PR rework round {round_no}).{what}"
                client.reply(str(thread), done)
                client.resolve(str(thread))
                answered.append(str(thread))
            client.request_review(number, [str(r) for r in pending.get("reviewers") or []])
        except REMOTE_ERRORS as exc:
            self._emit("workspace", story.id, notice=f"could not answer on the PR: {exc}")
        self.owner.await_review(
            story.id,
            changes={"pr_pending": DELETE, "pr_declined": DELETE, "pr_changed": DELETE},
            event={
                "action": "pr_answered",
                "round": round_no,
                "commit": head,
                "threads": answered,
                "declined": declined,
                "reviewers": list(pending.get("reviewers") or []),
                "message": f"round {round_no} answered by {head[:12]}: "
                f"{count(len(answered), 'thread')} resolved, {len(declined)} declined (left open)",
            },
        )
