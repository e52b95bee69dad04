"""The phases that make the work: refine, research, plan and implement, each one attempt.

Owns the start of every attempt (`_begin`: prepare the story's workspace once per run, then
reserve the attempt with the state owner before anything runs) and the phases before the
review: a refinement's decision, a research or plan artifact, an implementation's changes
verified and committed — or counted as a failed attempt (failing, stalled, or no work at all)
whose feedback goes into the next prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, UnsafeWorkError
from ai_sdlc.git.feedback import declined_items
from ai_sdlc.git.seam import AttemptChanges, InPlace, Prepared
from ai_sdlc.providers.base import Phase
from ai_sdlc.providers.decision import APPROVED
from ai_sdlc.store import Story
from ai_sdlc.verify import summarise_failure
from ai_sdlc.workflow.engine.agents import ARTIFACT_OF
from ai_sdlc.workflow.engine.assess import PHASE_FLAG
from ai_sdlc.workflow.engine.base import first_line, plural, with_hint, with_trailing_newline
from ai_sdlc.workflow.engine.judging import Judging
from ai_sdlc.workflow.engine.work import NO_WORK_FEEDBACK, Work, look, no_work_reason
from ai_sdlc.workflow.state import ledger as L
from ai_sdlc.workflow.state.transitions import DELETE, PhaseLimit, Ticket


class Phases(Judging):
    """Begins attempts and runs the phases before the review."""

    def _begin(self, story_id: str, phase: Phase) -> tuple[Ticket, Path]:
        """Prepare the story's workspace, then reserve the attempt (counted before it runs)."""
        story = self._story
        if story is None or story.id != story_id:
            story = self.store.get(story_id)
        prepared = self._prepare(story)
        if prepared.notice:
            self._emit("workspace", story_id, notice=prepared.notice, path=str(prepared.path))
        if self.deps.verification_configured:  # before the first attempt of any phase
            self.deps.check_workspace(prepared.path)
        if prepared.fields and any(
            story.frontmatter.get(k) != v for k, v in prepared.fields.items()
        ):  # recorded with the reservation: one transaction
            ticket = self.owner.begin_action(
                story_id,
                phase,
                fields=prepared.fields,
                event={"action": "workspace", "notice": prepared.notice},
                checkpoint=self._checkpoint,
            )
        else:
            ticket = self.owner.begin_action(story_id, phase, checkpoint=self._checkpoint)
        self._reserved = True
        self._ticket = ticket
        # What the worktree's setup commands did in `prepare`, counted on this attempt.
        self.settle_children(story_id, phase, prepared.path)
        self._baseline(ticket.story, prepared.path, phase)
        step, of = self._attempt_of(ticket.story, phase)
        self._emit(
            "phase_started",
            story_id,
            phase=phase.value,
            attempt=ticket.attempt,
            step=step,
            of=of,
            recoveries=ticket.story.counter("total_recovery_attempts"),
            recovery_limit=self.deps.limits.global_recovery,
        )
        self._phase_t0 = self.deps.monotonic()
        return ticket, prepared.path

    def _prepare(self, story: Story) -> Prepared:
        """The story's workspace, prepared once per `run` (and again if it disappeared)."""
        prepared = self._prepared.get(story.id)
        if prepared is None or not prepared.path.is_dir():
            self._checked = None  # preparing may run the worktree's setup commands
            try:
                prepared = self.workspaces.prepare(story)
            except UnsafeWorkError as exc:
                self._block(story.id, with_hint(exc))
            self._prepared[story.id] = Prepared(prepared.path)  # fields/notice: once
        return prepared

    def _refine(self, story_id: str, phase: Phase) -> None:
        ticket, path = self._begin(story_id, phase)
        context = {"story_body": ticket.story.body}
        result = self._call_agent(ticket, path, phase, context=context)
        self._check_read_only(ticket, path, phase)
        parts, result = self._decided(ticket, path, phase, result, context=context)
        if parts.decision != APPROVED:  # rejected, or no decision even when asked again
            limit = self.deps.limits.refinement_iterations
            feedback = parts.feedback if parts.decision else _NO_DECISION
            first = first_line(feedback)
            outcome = "rejected" if parts.decision else "no_decision"
            self._emit_phase(story_id, phase, outcome, ticket.attempt)
            self._fail(
                story_id,
                phase,
                L.REFINEMENT,
                outcome=outcome,
                feedback=feedback,
                reason=first,
                limit=PhaseLimit(
                    "refinement_count",
                    limit,
                    lambda n: (
                        f"Refinement did not converge after {plural(n, 'iteration')} "
                        f"(limit {limit}): {first}"
                    ),
                ),
            )
            return
        body = with_trailing_newline(parts.before) if parts.before.strip() else None
        self.owner.complete_phase(
            story_id, phase, status="ready", body=body, usage=self._take_usage()
        )
        self._emit_phase(story_id, phase, "completed", ticket.attempt)

    def _document(self, story_id: str, phase: Phase) -> None:
        ticket, path = self._begin(story_id, phase)
        result = self._call_agent(ticket, path, phase)
        self._check_read_only(ticket, path, phase)
        name = ARTIFACT_OF[phase]
        self.owner.complete_phase(
            story_id,
            phase,
            usage=self._take_usage(),
            changes={PHASE_FLAG[phase]: True},
            status="in-progress",
            artifact=(name, with_trailing_newline(result.text)),
            artifact_name=name,
        )
        self._emit_phase(story_id, phase, "completed", ticket.attempt, artifact=name)

    def _implement(self, story_id: str, phase: Phase) -> None:
        ticket, path = self._begin(story_id, phase)
        checked = self._checked == story_id
        before = self.workspaces.fingerprint(ticket.story, path, checked=checked)
        result = self._call_agent(ticket, path, phase)
        work = look(self.workspaces, ticket.story, path, before)
        changed = work.changed
        if work.nothing:
            self._no_work(ticket, path, phase, work)
            return
        verdict = self._verify(story_id, phase, path)
        if verdict.passed:
            self._attempt_passed(
                ticket, path, phase, work.key, changed, result.files_changed, answer=result.text
            )
            return
        summary = summarise_failure(verdict.failure_output)
        previous = ticket.last_failure
        stalled = None
        if previous and previous.get("signature") == verdict.signature and not changed:
            stalled = (
                "Implementation is not making progress: two attempts failed with the same "
                f"error and changed nothing. Last failure: {verdict.reason or first_line(summary)}"
            )
        # The attempt failed: it is counted whatever happens next. Saving its changes (a patch
        # written to disk, the worktree put back) can itself fail (a full disk, git); then it
        # is counted first and the failure raised after.
        unsaved: Exception | None = None
        try:
            record = self.workspaces.attempt_failed(ticket.story, path, attempt=ticket.attempt)
        except Exception as exc:
            unsaved, record = exc, AttemptChanges()
        feedback = summary + (
            f"\n\nThe failed attempt changed: {record.summary}" if record.summary else ""
        )
        limit = self.deps.limits.implementation_retries
        self._emit_phase(story_id, phase, "failed", ticket.attempt, workspace_changed=changed)
        reason = verdict.reason or first_line(summary)
        self._fail(
            story_id,
            phase,
            L.IMPLEMENTATION_RETRY,
            outcome="failed",
            feedback=feedback,
            reason=reason,
            signature=verdict.signature,
            workspace_changed=changed,
            stalled=stalled,
            patch=(ticket.attempt, record.patch) if record.patch else None,
            output=verdict.failure_output,
            limit=PhaseLimit(
                "implementation_retry_count",
                limit,
                lambda n: (
                    f"Implementation failed verification {plural(n, 'time')} "
                    f"(limit {plural(limit, 'retry', 'retries')}): {reason}"
                ),
            ),
        )
        if unsaved is not None:
            raise unsaved

    def _attempt_passed(
        self,
        ticket: Ticket,
        path: Path,
        phase: Phase,
        fingerprint: str,
        changed: bool,
        files_changed: list[str],
        *,
        answer: str = "",
    ) -> None:
        story_id = ticket.story.id
        if not isinstance(self.workspaces, InPlace):  # only where something is committed
            self._emit("step", story_id, phase=phase.value, step="committing")
        try:
            record = self.workspaces.attempt_passed(ticket.story, path, attempt=ticket.attempt)
        except AiSdlcError as exc:
            self._block(story_id, f"The passing attempt could not be committed: {exc.message}")
        if record.commit is not None:  # all the work committed: the work tree is clean at it
            self._checked = story_id
        judged = self._judged.pop(story_id, {})
        changes: dict[str, Any] = {"implementation_complete": True, "rework_pending": DELETE}
        if not self.deps.verification_configured:  # verify.none: said wherever it is shown
            changes["unverified"] = True
        elif ticket.story.frontmatter.get("unverified"):
            changes["unverified"] = DELETE
        if ticket.story.counter("implementation_retry_count"):
            changes["implementation_retry_count"] = 0
        if phase is Phase.REWORK and isinstance(ticket.story.frontmatter.get("pr_pending"), dict):
            declined = declined_items(answer)  # a PR round's items the agent would not change
            if declined:
                changes["pr_declined"] = declined
            if files_changed:  # what the round changed, for its replies on the PR
                changes["pr_changed"] = sorted(files_changed)[:20]
        self.owner.complete_phase(
            story_id,
            phase,
            usage=self._take_usage(),
            outcome="passed",
            changes=changes,
            status="in-progress",
            verified={
                "fingerprint": record.key or fingerprint,
                "passed": True,
                "workspace_changed": changed,
                **judged,
            },
            workspace_changed=changed,
            files_changed=files_changed,
            commit=record.commit,
            **({"tests": judged["judged"]} if judged else {}),
        )
        self._emit_phase(story_id, phase, "passed", ticket.attempt, commit=record.commit)

    def _no_work(self, ticket: Ticket, path: Path, phase: Phase, work: Work) -> None:
        """An attempt that left the story with no change: a failed implementation attempt,
        never verified nor reviewed; two in a row stop the story (no progress)."""
        story_id = ticket.story.id
        reason = no_work_reason(work)
        previous = ticket.last_failure
        stalled = None
        if previous and previous.get("outcome") == "no_change" and not work.changed:
            stalled = f"Implementation is not making progress: two attempts in a row. {reason}"
        unsaved: Exception | None = None  # counted first, raised after (as in `_implement`)
        try:
            self.workspaces.attempt_failed(ticket.story, path, attempt=ticket.attempt)
        except Exception as exc:
            unsaved = exc
        limit = self.deps.limits.implementation_retries
        self._emit_phase(
            story_id, phase, "failed", ticket.attempt, workspace_changed=False, reason=reason
        )
        self._fail(
            story_id,
            phase,
            L.IMPLEMENTATION_RETRY,
            outcome="no_change",
            feedback=NO_WORK_FEEDBACK,
            reason=reason,
            signature="no_change",
            workspace_changed=work.changed,
            stalled=stalled,
            limit=PhaseLimit(
                "implementation_retry_count",
                limit,
                lambda n: (
                    f"Implementation changed nothing {plural(n, 'time')} "
                    f"(limit {plural(limit, 'retry', 'retries')}): {reason}"
                ),
            ),
        )
        if unsaved is not None:
            raise unsaved


#: The feedback of a refinement that gave no decision, even when asked again.
_NO_DECISION = (
    "The answer had no DECISION line, even when asked again: end the refined story with "
    "'DECISION: APPROVED' when it is ready, or 'DECISION: REJECTED' and what is missing."
)
