"""The review and the end of a story: approve, send back, or block; then publish.

Owns the review phase (nothing to review sends the story back to implement without asking the
reviewer; the reviewer is told what the verification and the judge found), where a rejected
or failed review sends the story (rework, re-implement, blocked), and finishing a story that is
done: publishing it (push, pull request, optional auto-merge), failing checks counted as a
rework like a rejected review.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ai_sdlc.errors import AiSdlcError, UnsafeWorkError
from ai_sdlc.git.seam import InPlace
from ai_sdlc.providers.base import Phase
from ai_sdlc.providers.decision import APPROVED, FAILED, RECOVERY, REJECTED
from ai_sdlc.store import Story
from ai_sdlc.verify import summarise_failure
from ai_sdlc.verify.notes import record_of_tests
from ai_sdlc.workflow.engine.base import first_line, plural, with_hint, with_trailing_newline
from ai_sdlc.workflow.engine.judging import verification_note
from ai_sdlc.workflow.engine.phases import Phases
from ai_sdlc.workflow.engine.work import NO_WORK_FEEDBACK, Work, change_section, no_work_reason
from ai_sdlc.workflow.state import ledger as L
from ai_sdlc.workflow.state.transitions import PhaseLimit


class Review(Phases):
    """Reviews the work, routes a rejection, and finishes a done story."""

    def _review(self, story_id: str, phase: Phase) -> None:
        ticket, path = self._begin(story_id, phase)
        checked = self._checked == story_id
        change = self.workspaces.changes(ticket.story, path, checked=checked)
        if change is not None and change.empty:  # nothing to review: the reviewer is not asked
            reason = no_work_reason(Work(change.key, change, False))
            self._emit_phase(story_id, phase, "no_change", ticket.attempt, reason=reason)
            what = "The story had no change to review"
            self._reimplement(story_id, phase, what, "no_change", NO_WORK_FEEDBACK, reason)
            return
        verdict = self._verdict_for_review(ticket, path, phase, change.key if change else None)
        verified = ticket.verified or {}
        configured = self.deps.verification_configured
        context = {
            "verification_configured": configured,
            "verification_passed": verdict.passed if configured else None,
            "verification_output": ""
            if verdict.passed
            else summarise_failure(verdict.failure_output),
            "workspace_changed": bool(verified.get("workspace_changed", True)),
            **self._review_tests(ticket, path),
        }
        call: dict[str, Any] = {"context": context, "verification": verification_note(context)}
        call["change"] = change_section(change)
        result = self._call_agent(ticket, path, phase, **call)
        self._check_read_only(ticket, path, phase)
        parts, result = self._decided(ticket, path, phase, result, **call)
        decision = parts.decision or REJECTED
        feedback = parts.feedback or (
            "" if parts.decision else "The review gave no DECISION line, even when asked again."
        )
        review = ("review.md", with_trailing_newline(result.text))
        self._emit_phase(story_id, phase, (parts.decision or "no_decision").lower(), ticket.attempt)
        if decision == APPROVED:
            self.owner.complete_phase(
                story_id,
                phase,
                usage=self._take_usage(),
                outcome="approved",
                changes={"reviews_complete": True},
                artifact=review,
                feedback=feedback,
                **record_of_tests(context),
            )
            return
        if decision == FAILED:
            self._block(story_id, f"Review FAILED: {first_line(feedback)}", artifact=review)
        if decision == RECOVERY:
            what = "Review asked to re-implement"
            self._reimplement(
                story_id, phase, what, "recovery", feedback, "review: RECOVERY", review
            )
            return
        self._rework(
            story_id,
            outcome="rejected" if parts.decision else "no_decision",
            feedback=feedback,
            artifact=review,
            what=lambda n: f"Review rejected the story {plural(n, 'time')}",
        )

    def _rework(
        self,
        story_id: str,
        *,
        outcome: str,
        feedback: str,
        what: Callable[[int], str],
        artifact: tuple[str, str] | None = None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        """Send the story back to rework (a rejected review, failing pull-request checks):
        counted as `rework`; the rework limit blocks."""
        reworks = self.deps.limits.review_rejections
        self._fail(
            story_id,
            Phase.REVIEW,
            L.REWORK,
            outcome=outcome,
            feedback=feedback,
            reason=first_line(feedback),
            artifact=artifact,
            changes={
                "implementation_complete": False,
                "reviews_complete": False,
                "rework_pending": True,
                **(fields or {}),
            },
            limit=PhaseLimit(
                "retry_count",
                reworks,
                lambda n: (
                    f"{what(n)} (limit {plural(reworks, 'rework cycle')}): {first_line(feedback)}"
                ),
            ),
        )

    def _reimplement(
        self,
        story_id: str,
        phase: Phase,
        what: str,
        outcome: str,
        feedback: str,
        reason: str,
        artifact: tuple[str, str] | None = None,
    ) -> None:
        """Send the story back to implement (the review asked for it, or there was nothing to
        review): counted as an implementation retry."""
        retries = self.deps.limits.implementation_retries
        self._fail(
            story_id,
            phase,
            L.IMPLEMENTATION_RETRY,
            outcome=outcome,
            feedback=feedback,
            reason=reason,
            artifact=artifact,
            changes={"implementation_complete": False},
            limit=PhaseLimit(
                "implementation_retry_count",
                retries,
                lambda n: (
                    f"{what} {plural(n, 'time')} "
                    f"(limit {plural(retries, 'implementation retry', 'implementation retries')})"
                ),
            ),
        )

    def _catch_up(self, story: Story) -> bool:
        """A story whose branch no longer merges cleanly into what it builds on (a sibling
        merged first) goes back to rework, counted like a rejected review, with the files in
        conflict and its own side of them as feedback; True when it did. Preparing the
        worktree then merges the base in (its side of each conflict) for the agent to redo
        the story's side on top, verified and reviewed again."""
        if story.status in ("blocked", "abandoned"):
            return False
        try:
            conflict = self.workspaces.conflicts(story)
        except AiSdlcError as exc:
            self._emit("workspace", story.id, notice=f"could not check for conflicts: {exc}")
            return False
        if conflict is None:
            return False
        files = ", ".join(conflict.files)
        feedback = (
            f"The story's branch no longer merges cleanly into {conflict.target} (changed there "
            f"since): conflicts in {files}. The worktree now has {conflict.target} merged in, "
            f"taking {conflict.target}'s side of each conflicting part; bring the story's own "
            "change back on top of it, keeping what the other change did. The story's side "
            f"was:\n{conflict.story_side}"
        )
        self._emit("workspace", story.id, notice=f"conflicts with {conflict.target}: {files}")
        self._rework(
            story.id,
            outcome="conflicts",
            feedback=feedback,
            fields={"status": "in-progress"},
            what=lambda n: f"The branch conflicted with its base; {plural(n, 'rework cycle')}",
        )
        return True

    def _finish(self, story: Story) -> bool:
        """Done: publish the work (push, pull request; optional auto-merge) and say whether the
        story is done. Checks that fail under auto-merge send the story back to rework, counted
        like a rejected review."""
        path = self._prepare(story).path
        if not isinstance(self.workspaces, InPlace):  # nothing is pushed outside git
            self._emit("step", story.id, phase="review", step="pushing")
        try:
            finished = self.workspaces.finish(story, path, checked=self._checked == story.id)
        except UnsafeWorkError as exc:
            self._block(story.id, with_hint(exc))
        if finished.outcome == "failed":
            self._rework(
                story.id,
                outcome="checks_failed",
                feedback=finished.message,
                fields=finished.fields,
                what=lambda n: f"Pull request checks failed; {plural(n, 'rework cycle')}",
            )
            return False
        if finished.fields or finished.outcome != "skipped" or finished.message:
            self.owner.finish(
                story.id,
                fields=finished.fields,
                event={
                    "action": "publish",
                    "outcome": finished.outcome,
                    "message": finished.message,
                },
            )
            self._emit(
                "story_published", story.id, outcome=finished.outcome, message=finished.message
            )
        else:
            self.owner.finish(story.id)
        return True
