"""The story runner: executes a story's next actions until it is done, blocked or waiting.

The runner decides; the state owner (`transitions.StoryState`) writes. Every action begins with
`begin_action`, which refuses a blocked story or one at the global recovery limit and reserves
the attempt before it runs; every attempt ends settled (passed, failed = a recovery, released),
and every API retry is counted before its sleep, so the global limit applies on every path,
including a process that dies mid-attempt. Phase limits (implementation retries, rework
cycles, refinement iterations) block the story too, but the failed attempt is counted first and
the global limit always takes precedence.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import msgspec

from ai_sdlc.errors import (
    AiSdlcError,
    InvalidInputError,
    ProviderUnavailableError,
    RunHaltedError,
    StoryBlockedError,
    UnsafeWorkError,
    disk_full,
)
from ai_sdlc.providers.base import (
    AgentReportedError,
    CallGuard,
    Phase,
    Provider,
    ProviderRequest,
    ProviderResult,
    TransientProviderError,
    Usage,
    access_for,
    direct_call,
)
from ai_sdlc.providers.decision import (
    APPROVED,
    FAILED,
    RECOVERY,
    REFINE_DECISIONS,
    REJECTED,
    REVIEW_DECISIONS,
    DecisionParts,
    split_decision,
)
from ai_sdlc.providers.pricing import estimate_call
from ai_sdlc.providers.tools import AccessViolationError
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.store import Story, StoryStore
from ai_sdlc.verify import VerificationResult, protect, summarise_failure
from ai_sdlc.verify.judge import Judge, not_started
from ai_sdlc.verify.notes import note_on_tests, record_of_tests
from ai_sdlc.workflow.engine.agents import ARTIFACT_OF, build_prompt, story_view
from ai_sdlc.workflow.engine.assess import PHASE_FLAG, NextAction, assess
from ai_sdlc.workflow.engine.work import (
    NO_WORK_FEEDBACK,
    Work,
    change_section,
    decision_reminder,
    look,
    no_work_reason,
)
from ai_sdlc.workflow.engine.workspace import AttemptChanges, InPlace, Prepared, StoryWorkspace
from ai_sdlc.workflow.state import ledger as L
from ai_sdlc.workflow.state.checkpoint import Checkpoint, Checkpoints
from ai_sdlc.workflow.state.events import Clock, iso, utc_now
from ai_sdlc.workflow.state.transitions import DELETE, PhaseLimit, StoryState, Ticket
from ai_sdlc.worktree_env.setup import WorktreeSetupError

#: A story that has taken this many actions in one `run` is stopped (a bug guard: every
#: action either completes a phase or counts a recovery, so real runs end far sooner).
MAX_ACTIONS_PER_RUN = 200

T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]
Verifier = Callable[[Path], VerificationResult]


class Metrics(Protocol):
    """The resilience metrics of the runner's calls (a `PolicyManager`), written at the run's
    boundaries: `flush_if_due` after each phase, `flush` when a story's run ends."""

    def flush(self) -> None: ...

    def flush_if_due(self) -> None: ...


class Limits(msgspec.Struct, frozen=True):
    global_recovery: int = 10
    implementation_retries: int = 3
    review_rejections: int = 3
    refinement_iterations: int = 5
    phase_timeout: float = 900.0
    #: Budgets (None = no limit), checked before every provider call.
    story_tokens: float | None = None
    story_cost_usd: float | None = None
    run_cost_usd: float | None = None


class StoryOutcome(msgspec.Struct):
    story_id: str
    #: "done", "blocked", "waiting", "stepped" (one --step ran), "idle" (nothing to do)
    result: str
    reason: str
    actions: int = 0
    recoveries: int = 0

    def to_json(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class RunnerDeps(msgspec.Struct):
    """Everything the runner touches, injectable for tests."""

    store: StoryStore
    provider: Provider
    verifier: Verifier
    limits: Limits = msgspec.field(default_factory=Limits)
    gates: dict[str, Any] = msgspec.field(default_factory=dict)
    #: (story id, phase, record an api_retry) -> the guard every provider call runs under
    guard_factory: Callable[[str, Phase, Callable[..., None]], CallGuard] = (
        lambda _story, _phase, _record: direct_call
    )
    workspace: Path | None = None
    #: Where each story's agents work (default: `InPlace` in `workspace` or the project).
    workspaces: StoryWorkspace | None = None
    #: The `ai` config section (model, prices) for usage estimates before a call.
    ai_settings: dict[str, Any] = msgspec.field(default_factory=dict)
    emit: Emit = lambda _event: None
    clock: Clock = utc_now
    monotonic: Callable[[], float] = time.monotonic
    #: False when no `verify.build`/`verify.test` is configured: nothing is verified, the run
    #: says so once and the review is told (never "verification passed").
    verification_configured: bool = True
    #: The baseline, pass-count floor and protected tests (`verify.judge`); None: not judged.
    judge: Judge | None = None
    #: Between two actions, before a phase: a returned reason blocks the story (multi-story
    #: runs count bounces here); raising stops the story before the phase starts.
    before_phase: Callable[[str, Phase], str | None] = lambda _story, _phase: None
    #: Flushed when each story's run ends (also when it stops, is blocked or halted) and after
    #: a phase when due; None: the calls' metrics are written by whoever owns them.
    metrics: Metrics | None = None
    #: The sandbox policy of the children (agents, tools) working in a workspace; None: none.
    sandbox: Callable[[Path], SandboxPolicy | None] = lambda _workspace: None
    #: Why children run without the sandbox the config asks for (said once per story).
    sandbox_missing: str | None = None
    #: Before every phase (when verification is configured), with the story's workspace:
    #: raises when verification there would judge the wrong code (the wrong-tree guard), so
    #: the run stops before any attempt is reserved or any agent called.
    check_workspace: Callable[[Path], None] = lambda _path: None


class StoryRunner:
    def __init__(self, deps: RunnerDeps) -> None:
        self.deps = deps
        self.store = deps.store
        self.owner = StoryState(
            deps.store,
            limit=deps.limits.global_recovery,
            clock=deps.clock,
            on_recovery=self._recovered,
        )
        self.workspaces: StoryWorkspace = deps.workspaces or InPlace(
            deps.workspace or deps.store.root
        )
        self.checkpoints = Checkpoints(deps.store)
        #: Usage of the whole run (all stories this runner served), for `limits.run_cost_usd`.
        self.run_usage = Usage()
        #: Usage reported live (agent turns) by the provider call in flight, not yet persisted.
        self._live = Usage()
        #: Stories told "no verification configured" in this run (said once).
        self._unverified: set[str] = set()
        #: Stories told "no sandbox available" in this run (said once).
        self._unsandboxed: set[str] = set()
        #: Workspaces prepared during the current `run` of each story.
        self._prepared: dict[str, Prepared] = {}
        #: The story whose last read-only check found nothing changed (or whose work was all
        #: just committed), while nothing has run in its workspace since (no agent,
        #: verification, baseline, workspace preparation): that look may stand for the next
        #: one (`StoryWorkspace.fingerprint(checked=)`, `changes(checked=)`).
        self._checked: str | None = None
        #: The story as the last `ensure_can_act` returned it (saves a re-read per phase).
        self._story: Story | None = None
        #: The tag of the checkpoint taken for the phase in flight (its reservation names it).
        self._checkpoint: str | None = None
        #: Usage of the call answered in this phase, not yet written (see `_take_usage`).
        self._pending: Usage | None = None
        #: What the judge checked on the passing verification in flight, by story (recorded
        #: with the attempt as `verified`).
        self._judged: dict[str, dict[str, Any]] = {}
        #: Whether the phase in flight has reserved its attempt yet (`_begin`).
        self._reserved = False
        self._phase_t0 = deps.monotonic()

    @property
    def limit(self) -> int:
        return self.owner.limit

    # --- public ---------------------------------------------------------------------------
    def run(self, story_id: str, *, step: Phase | None = None) -> StoryOutcome:
        """Take the story as far as it can go (or run one `step`); the calls' metrics are
        flushed when it ends, however it ends."""
        metrics = self.deps.metrics
        try:
            outcome = self._run(story_id, step)
        except BaseException:
            if metrics is not None:  # the stop must reach the caller unchanged
                with contextlib.suppress(AiSdlcError):
                    metrics.flush()
            raise
        if metrics is not None:
            metrics.flush()
        return outcome

    def _run(self, story_id: str, step: Phase | None) -> StoryOutcome:
        actions = 0
        start = self.deps.monotonic()
        self._emit("story_started", story_id)
        self._roll_back_interrupted_phase(story_id)
        self._prepared.pop(story_id, None)
        while True:
            story = self.owner.ensure_can_act(story_id)
            if step is not None:
                if actions:
                    return StoryOutcome(story_id, "stepped", f"ran {step.value}", actions)
                action = NextAction(story_id, step, f"--step {step.value}")
            else:
                action = assess(story.frontmatter, gates=self.deps.gates, global_limit=self.limit)
            if action.phase is None:
                result = {"done": "done", "waiting": "waiting"}.get(action.kind, "idle")
                if action.kind == "done" and story.status != "done" and not self._finish(story):
                    continue  # the pull request's checks failed: rework
                self._emit(
                    "story_finished",
                    story_id,
                    outcome=result,
                    reason=action.reason,
                    elapsed=round(self.deps.monotonic() - start, 3),
                )
                return StoryOutcome(story_id, result, action.reason, actions)
            if actions >= MAX_ACTIONS_PER_RUN:
                self._block(story_id, f"Runner safety cap reached ({actions} actions in one run)")
            actions += 1
            self._story = story
            self._execute_checkpointed(story_id, action.phase)

    # --- phases -----------------------------------------------------------------------------
    def _execute(self, story_id: str, phase: Phase) -> None:
        handler = {
            Phase.REFINE: self._refine,
            Phase.RESEARCH: self._document,
            Phase.PLAN: self._document,
            Phase.IMPLEMENT: self._implement,
            Phase.REWORK: self._implement,
            Phase.REVIEW: self._review,
        }[phase]
        handler(story_id, phase)

    def _execute_checkpointed(self, story_id: str, phase: Phase) -> None:
        """Run one phase from a checkpoint: if it crashes or is interrupted, its attempt is
        released uncounted and the story's workflow state goes back to the checkpoint (the
        recovery accounting stays) — unless the attempt was settled before (its transaction
        stands). A guardrail block is an outcome, not a crash. A process
        that dies mid-phase leaves its attempt reserved: the next run counts it."""
        reason = self.deps.before_phase(story_id, phase)
        if reason:
            self._block(story_id, reason)
        checkpoint = self.checkpoints.take(story_id, phase.value, taken_at=iso(self.deps.clock()))
        self._checkpoint = checkpoint.tag
        self._reserved = False
        try:
            try:
                self._execute(story_id, phase)
            finally:
                pending = self._take_usage()
                if pending is not None:  # the phase ended another way: keep what was spent
                    with contextlib.suppress(AiSdlcError):
                        self.owner.add_usage(story_id, pending, calls=1)
        except _PhaseRetry:
            pass  # counted and reverted; the story goes on from the checkpoint's state
        except StoryBlockedError:
            self.checkpoints.discard(story_id)
            raise
        except BaseException as exc:
            if isinstance(exc, WorktreeSetupError) and not self._reserved:
                # The worktree's environment stopped the run before the phase began: no
                # attempt, no state changed, nothing to release or roll back.
                self.checkpoints.discard(story_id)
                raise
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else _describe(exc)
            if disk_full(exc) is None:
                settled = self._settled(checkpoint)
                with contextlib.suppress(AiSdlcError):
                    self.owner.release(story_id, phase, why)
                if settled:  # the attempt ended (passed, or failed and counted) before this:
                    self.checkpoints.discard(story_id)  # what it wrote stands
                else:
                    self._roll_back(checkpoint, why)
                raise
            # A full disk failed the attempt, it did not end it: nothing more is written now
            # (a release, a roll-back: each would meet the full disk again, half-done). The
            # next run takes over as after a crash: it counts the attempt if it is still
            # reserved, and restores the checkpoint only then (a failure already settled,
            # perhaps blocking the story, is not undone because a later write failed).
            raise
        self.checkpoints.discard(story_id)
        if self.deps.metrics is not None:
            self.deps.metrics.flush_if_due()

    def _settled(self, checkpoint: Checkpoint) -> bool:
        """True when the attempt this checkpoint was taken for is no longer reserved: it was
        settled (and perhaps blocked the story) before the phase went wrong, so rolling the
        workflow state back would undo a finished transaction (as `Checkpoints.interrupted`
        decides after a crash)."""
        try:
            open_ = self.owner.ledger(checkpoint.story_id).open
        except Exception:
            return False  # cannot tell: roll back, as always
        return open_ is None or open_.get("checkpoint", checkpoint.tag) != checkpoint.tag

    def _roll_back_interrupted_phase(self, story_id: str) -> None:
        """A checkpoint left by a run that died mid-phase (SIGKILL, power loss): restore it."""
        checkpoint = self.checkpoints.interrupted(story_id)
        if checkpoint is not None:
            self._roll_back(checkpoint, f"an earlier run stopped during {checkpoint.phase}")

    def _roll_back(self, checkpoint: Checkpoint, reason: str) -> None:
        story_id = checkpoint.story_id
        try:
            restored = self.checkpoints.restore(checkpoint, self.owner, reason)
        except Exception as exc:  # keep the checkpoint: the next run restores it
            self._emit("rollback_failed", story_id, phase=checkpoint.phase, reason=str(exc))
            return
        self.checkpoints.discard(story_id)
        self._emit(
            "rollback_initiated",
            story_id,
            phase=checkpoint.phase,
            reason=reason[:500],
            restored=restored,
        )

    def _refine(self, story_id: str, phase: Phase) -> None:
        ticket, path = self._begin(story_id, phase)
        context = {"story_body": ticket.story.body}
        result = self._call_agent(ticket, path, phase, context=context)
        self._check_read_only(ticket, path, phase)
        parts, result = self._decided(ticket, path, phase, result, context=context)
        if parts.decision != APPROVED:  # rejected, or no decision even when asked again
            limit = self.deps.limits.refinement_iterations
            feedback = parts.feedback if parts.decision else _NO_DECISION
            first = _first_line(feedback)
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
                        f"Refinement did not converge after {_n(n, 'iteration')} "
                        f"(limit {limit}): {first}"
                    ),
                ),
            )
            return
        body = _with_trailing_newline(parts.before) if parts.before.strip() else None
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
            artifact=(name, _with_trailing_newline(result.text)),
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
            self._attempt_passed(ticket, path, phase, work.key, changed, result.files_changed)
            return
        summary = summarise_failure(verdict.failure_output)
        previous = ticket.last_failure
        stalled = None
        if previous and previous.get("signature") == verdict.signature and not changed:
            stalled = (
                "Implementation is not making progress: two attempts failed with the same "
                f"error and changed nothing. Last failure: {verdict.reason or _first_line(summary)}"
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
        reason = verdict.reason or _first_line(summary)
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
            limit=PhaseLimit(
                "implementation_retry_count",
                limit,
                lambda n: (
                    f"Implementation failed verification {_n(n, 'time')} "
                    f"(limit {_n(limit, 'retry', 'retries')}): {reason}"
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
    ) -> None:
        story_id = ticket.story.id
        try:
            record = self.workspaces.attempt_passed(ticket.story, path, attempt=ticket.attempt)
        except AiSdlcError as exc:
            self._block(story_id, f"The passing attempt could not be committed: {exc.message}")
        if record.commit is not None:  # all the work committed: the work tree is clean at it
            self._checked = story_id
        judged = self._judged.pop(story_id, {})
        changes: dict[str, Any] = {"implementation_complete": True, "rework_pending": DELETE}
        if ticket.story.counter("implementation_retry_count"):
            changes["implementation_retry_count"] = 0
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
                    f"Implementation changed nothing {_n(n, 'time')} "
                    f"(limit {_n(limit, 'retry', 'retries')}): {reason}"
                ),
            ),
        )
        if unsaved is not None:
            raise unsaved

    def _decided(
        self, ticket: Ticket, path: Path, phase: Phase, result: ProviderResult, **call: Any
    ) -> tuple[DecisionParts, ProviderResult]:
        """The answer's decision. An answer without a decision line is asked for one once
        more (the first call's usage is kept); still none: the caller counts it, never reads
        it as approval."""
        parts = split_decision(result.text)
        if parts.decision is not None:
            return parts, result
        story_id = ticket.story.id
        self._emit_phase(story_id, phase, "undecided", ticket.attempt)
        first = self._take_usage()
        if first is not None:
            self._persist_usage(story_id, first, calls=1)
        choices = REFINE_DECISIONS if phase is Phase.REFINE else REVIEW_DECISIONS
        reminder = decision_reminder(choices, result.text)
        again = self._call_agent(ticket, path, phase, reminder=reminder, **call)
        self._check_read_only(ticket, path, phase)
        return split_decision(again.text), again

    def _agent_failed(
        self, ticket: Ticket, path: Path, phase: Phase, error: AgentReportedError
    ) -> NoReturn:
        """The agent said it failed (an error result, denied tool calls): a failed attempt of
        the phase's kind (a refinement iteration, a rework for review, else an implementation
        retry), its work rolled back; the story goes on from the same phase."""
        story_id = ticket.story.id
        limits = self.deps.limits
        kind, counter, limit = {
            Phase.REFINE: (L.REFINEMENT, "refinement_count", limits.refinement_iterations),
            Phase.REVIEW: (L.REWORK, "retry_count", limits.review_rejections),
        }.get(
            phase,
            (L.IMPLEMENTATION_RETRY, "implementation_retry_count", limits.implementation_retries),
        )
        reason = _first_line(error.message, 300)
        patch = None
        unsaved: Exception | None = None  # counted first, raised after (as in `_implement`)
        try:
            if phase in (Phase.IMPLEMENT, Phase.REWORK):
                record = self.workspaces.attempt_failed(ticket.story, path, attempt=ticket.attempt)
                patch = (ticket.attempt, record.patch) if record.patch else None
            elif self.workspaces.read_only_violations(ticket.story, path):
                self.workspaces.revert(ticket.story, path)
        except Exception as exc:
            unsaved = exc
        self._emit_phase(story_id, phase, "failed", ticket.attempt, reason=reason)
        self._fail(
            story_id,
            phase,
            kind,
            outcome="agent_error",
            feedback=f"The agent reported a failure: {error.message}",
            reason=reason,
            patch=patch,
            limit=PhaseLimit(
                counter,
                limit,
                lambda n: (
                    f"The agent reported failure in {phase.value} {_n(n, 'time')} "
                    f"(limit {limit}): {reason}"
                ),
            ),
        )
        raise unsaved if unsaved is not None else _PhaseRetry(reason)

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
        call: dict[str, Any] = {"context": context, "verification": _verification_note(context)}
        call["change"] = change_section(change)
        result = self._call_agent(ticket, path, phase, **call)
        self._check_read_only(ticket, path, phase)
        parts, result = self._decided(ticket, path, phase, result, **call)
        decision = parts.decision or REJECTED
        feedback = parts.feedback or (
            "" if parts.decision else "The review gave no DECISION line, even when asked again."
        )
        review = ("review.md", _with_trailing_newline(result.text))
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
            self._block(story_id, f"Review FAILED: {_first_line(feedback)}", artifact=review)
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
            what=lambda n: f"Review rejected the story {_n(n, 'time')}",
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
            reason=_first_line(feedback),
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
                    f"{what(n)} (limit {_n(reworks, 'rework cycle')}): {_first_line(feedback)}"
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
                    f"{what} {_n(n, 'time')} "
                    f"(limit {_n(retries, 'implementation retry', 'implementation retries')})"
                ),
            ),
        )

    def _verdict_for_review(
        self, ticket: Ticket, path: Path, phase: Phase, key: str | None
    ) -> VerificationResult:
        """The implementation's verdict when the workspace is unchanged since it was verified
        (the test suite runs once per implementation attempt), else a fresh verification.
        `key`: the workspace's content key when the caller has just taken it."""
        verified = ticket.verified
        if (
            verified
            and verified.get("passed") is True
            and (key or self.workspaces.fingerprint(ticket.story, path))
            == verified.get("fingerprint")
        ):
            self._emit("verification_reused", ticket.story.id, phase=phase.value)
            return VerificationResult(passed=True, steps=())
        return self._verify(ticket.story.id, phase, path)

    # --- helpers ----------------------------------------------------------------------------
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
        self._baseline(ticket.story, prepared.path)
        step, of = self._attempt_of(ticket.story, phase)
        self._emit(
            "phase_started", story_id, phase=phase.value, attempt=ticket.attempt, step=step, of=of
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
                self._block(story.id, _with_hint(exc))
            self._prepared[story.id] = Prepared(prepared.path)  # fields/notice: once
        return prepared

    def _check_read_only(self, ticket: Ticket, path: Path, phase: Phase) -> None:
        """A read-only phase that changed files: revert them and count an implementation
        retry naming the paths (the agent's own permissions should have prevented it)."""
        self._checked = None
        changed = self.workspaces.read_only_violations(ticket.story, path)
        if not changed:
            self._checked = ticket.story.id
            return
        self.workspaces.revert(ticket.story, path)
        shown = ", ".join(changed[:10])
        if len(changed) > 10:
            shown += f" and {len(changed) - 10} more"
        self._violation(
            ticket, phase, f"the agent changed files during the read-only {phase.value} phase: "
            f"{shown}", changed
        )  # fmt: skip

    def _violation(self, ticket: Ticket, phase: Phase, reason: str, paths: list[str]) -> NoReturn:
        self._emit_phase(ticket.story.id, phase, "violation", ticket.attempt, reason=reason)
        self._fail(
            ticket.story.id,
            phase,
            L.IMPLEMENTATION_RETRY,
            outcome="read_only_violation",
            feedback=reason,
            reason=reason,
            paths=paths[:50],
        )
        raise _PhaseRetry(reason)

    def _fail(self, story_id: str, phase: Phase, kind: str, **kwargs: Any) -> None:
        try:
            self.owner.fail_attempt(story_id, phase, kind, usage=self._take_usage(), **kwargs)
        except StoryBlockedError as exc:
            self._emit("story_blocked", story_id, phase=phase.value, reason=exc.message)
            raise

    def _call_agent(
        self,
        ticket: Ticket,
        path: Path,
        phase: Phase,
        *,
        context: dict[str, Any] | None = None,
        verification: str | None = None,
        change: str | None = None,
        reminder: str | None = None,
    ) -> ProviderResult:
        self._checked = None  # the agent may change the workspace
        story = ticket.story
        story_id = story.id
        feedback = []
        failure = ticket.last_failure
        if failure and failure.get("feedback") and failure.get("phase") in _FEEDS.get(phase, ()):
            feedback.append(str(failure["feedback"]))
        view = story_view(story)
        system_prompt, prompt = build_prompt(
            phase,
            view,
            feedback=feedback,
            attempt=ticket.attempt,
            verification=verification,
            change=change,
        )
        if reminder:
            prompt += reminder
        started = self.deps.monotonic()
        inner_guard = self.deps.guard_factory(
            story_id,
            phase,
            lambda **details: self._recover(story_id, L.API_RETRY, phase, **details),
        )
        estimate = estimate_call(
            self.deps.ai_settings,
            self.deps.ai_settings.get("model"),
            prompt=prompt,
            system_prompt=system_prompt,
        )

        def guard(fn: Callable[[], T], /) -> T:
            def checked() -> T:
                self._check_budgets(story_id, estimate)
                return fn()

            return inner_guard(checked)

        request = ProviderRequest(
            phase=phase,
            prompt=prompt,
            system_prompt=system_prompt,
            workspace=path,
            access=access_for(phase),
            timeout=self.deps.limits.phase_timeout,
            story_id=story_id,
            attempt=ticket.attempt,
            model=self.deps.ai_settings.get("model"),
            context=context or {},
            guard=guard,
            on_event=lambda name, data: self._on_provider_event(story_id, phase, name, data),
            on_backend_retry=lambda delay, reason: self._backend_retry(
                story_id, phase, delay, reason
            ),
            sandbox=self._sandbox(story_id, path),
        )
        self._live = Usage()
        try:
            result = self.deps.provider.execute(request)
        except AccessViolationError as exc:
            self._persist_usage(story_id, self._live, calls=1)
            self._violation(ticket, phase, exc.message, [])
        except AgentReportedError as exc:
            self._persist_usage(story_id, self._live, calls=1)
            self._agent_failed(ticket, path, phase, exc)
        except TransientProviderError as exc:
            # A transient failure the provider did not run under the guard (e.g. a phase
            # deadline of an API agent loop): the provider is unavailable, not the story broken.
            self._persist_usage(story_id, self._live, calls=1)
            raise ProviderUnavailableError(
                f"{story_id} {phase.value}: {exc.message}",
                hint="run again later; every retry so far is counted on the story",
            ) from None
        except BaseException:
            self._persist_usage(story_id, self._live, calls=1)
            raise
        self._live = Usage()
        self.run_usage.add(result.usage)
        self._pending = result.usage
        self._emit(
            "phase_answered",
            story_id,
            phase=phase.value,
            attempt=ticket.attempt,
            elapsed=round(self.deps.monotonic() - started, 3),
            tokens=result.usage.total_tokens,
        )
        return result

    def _on_provider_event(
        self, story_id: str, phase: Phase, name: str, data: dict[str, Any]
    ) -> None:
        if name == "agent_turn":
            self._live.add(
                Usage(
                    int(data.get("input_tokens") or 0),
                    int(data.get("output_tokens") or 0),
                    data.get("cost_usd"),
                )
            )
        self._emit(name, story_id, **{"phase": phase.value, **data})

    def _persist_usage(self, story_id: str, usage: Usage, *, calls: int) -> None:
        """Add usage to the story's `usage` now (a call that failed or was stopped) and to
        the run's total."""
        self._live = Usage()
        if not usage.total_tokens and usage.cost_usd is None:
            return
        self.run_usage.add(usage)
        self.owner.add_usage(story_id, usage, calls=calls)

    def _take_usage(self) -> Usage | None:
        """The answered call's usage, written with the phase's outcome (one transaction)."""
        usage, self._pending = self._pending, None
        return usage

    def _check_budgets(self, story_id: str, estimate: Usage) -> None:
        """Before every provider call: would it cross a story or run budget? Then stop first."""
        limits = self.deps.limits
        if (
            limits.story_tokens is None
            and limits.story_cost_usd is None
            and (limits.run_cost_usd is None)
        ):
            return
        used = self.store.get(story_id).frontmatter.get("usage")
        used = used if isinstance(used, dict) else {}
        tokens = int(used.get("input_tokens") or 0) + int(used.get("output_tokens") or 0)
        tokens += self._live.total_tokens
        cost = float(used.get("cost_usd") or 0.0) + (self._live.cost_usd or 0.0)
        next_tokens = estimate.total_tokens
        next_cost = estimate.cost_usd or 0.0
        if limits.story_tokens is not None and tokens + next_tokens > limits.story_tokens:
            self._persist_usage(story_id, self._live, calls=0)
            self._block(
                story_id,
                f"Token budget reached for {story_id}: {tokens:,} tokens used, the next call "
                f"needs up to {next_tokens:,}, limit {int(limits.story_tokens):,} "
                "(limits.story_tokens)",
            )
        if limits.story_cost_usd is not None and cost + next_cost > limits.story_cost_usd:
            self._persist_usage(story_id, self._live, calls=0)
            self._block(
                story_id,
                f"Cost budget reached for {story_id}: ${cost:.4f} spent, the next call may cost "
                f"${next_cost:.4f}, limit ${limits.story_cost_usd:.2f} (limits.story_cost_usd)",
            )
        run_cost = (self.run_usage.cost_usd or 0.0) + (self._live.cost_usd or 0.0)
        if limits.run_cost_usd is not None and run_cost + next_cost > limits.run_cost_usd:
            self._persist_usage(story_id, self._live, calls=0)
            raise RunHaltedError(
                f"Run cost budget reached: ${run_cost:.4f} spent, the next call may cost "
                f"${next_cost:.4f}, limit ${limits.run_cost_usd:.2f} (limits.run_cost_usd)",
                hint="raise limits.run_cost_usd or continue another day",
            )

    def _backend_retry(self, story_id: str, phase: Phase, delay: float, reason: str) -> None:
        self._recover(story_id, L.API_RETRY, phase, reason=reason, delay=delay)

    def _verify(self, story_id: str, phase: Phase, path: Path) -> VerificationResult:
        self._checked = None  # the verification commands run in the workspace
        if not self.deps.verification_configured:
            if story_id not in self._unverified:
                self._unverified.add(story_id)
                self._emit("verification_skipped", story_id, phase=phase.value)
            return VerificationResult(passed=True, steps=())
        self._sandbox(story_id, path)  # the verifier applies the same policy
        self._emit("verification_started", story_id, phase=phase.value)
        verdict = self._judge(story_id, path, self.deps.verifier(path))
        self._emit(
            "verification_finished",
            story_id,
            phase=phase.value,
            passed=verdict.passed,
            steps=[s.name for s in verdict.steps],
        )
        return verdict

    def _sandbox(self, story_id: str, path: Path) -> SandboxPolicy | None:
        """The sandbox of `path`'s children; where the config wants one and none is
        available, the story's log and the display are told once per run."""
        missing = self.deps.sandbox_missing
        if missing is not None and story_id not in self._unsandboxed:
            self._unsandboxed.add(story_id)
            self._emit("sandbox_unavailable", story_id, reason=missing)
            self.owner.note(story_id, "sandbox_unavailable", reason=missing)
        return self.deps.sandbox(path)

    # --- the judge (verify.judge): baseline, pass-count floor, protected tests ---------------
    def _baseline(self, story: Story, path: Path) -> None:
        """Before any agent call: put back test files a killed run left in their base
        versions, and verify the story's untouched base once (raises InvalidInputError, exit
        3, when it cannot be verified: the attempt is released, no recovery counted)."""
        judge = self.deps.judge
        if judge is None or not self.deps.verification_configured:
            return
        restored = judge.recover(path)
        if restored:
            self._checked = None
            self._emit("protected_restored", story.id, paths=restored)
        base = self.workspaces.base_commit(story, path)
        if base is None or not judge.settings.baseline or judge.known(path, base) is not None:
            return
        self._checked = None  # the verification commands run on the base in the workspace
        self._emit("baseline_started", story.id, base=base)
        baseline = judge.baseline(path, base, self.deps.verifier)
        if baseline is not None:
            self._emit(
                "baseline_finished",
                story.id,
                passed=baseline.passed,
                counts=baseline.counts.to_dict() if baseline.counts else None,
                failing=list(baseline.failing[:20]),
            )

    def _judge(self, story_id: str, path: Path, verdict: VerificationResult) -> VerificationResult:
        """The verification's verdict, judged: a command that cannot be started is a config
        error (exit 3, never retried); a pass lowering the floor or weakening a base test
        fails."""
        cannot = not_started(verdict)
        if cannot is not None:
            raise InvalidInputError(
                f"verification cannot run: {cannot}",
                hint="fix verify.build / verify.test in .ai-sdlc/config.yaml (no recovery "
                "was counted)",
            )
        judge = self.deps.judge
        if judge is None:
            return verdict
        story = self._story if self._story and self._story.id == story_id else None
        story = story or self.store.get(story_id)
        base = self.workspaces.base_commit(story, path)
        allowed = story.frontmatter.get("allow_test_changes") is True
        judged = judge.judge(path, base, verdict, self.deps.verifier, allow_test_changes=allowed)
        self._judged.pop(story_id, None)
        if judged.judged:
            self._judged[story_id] = {"judged": judged.judged}
        return judged

    def _review_tests(self, ticket: Ticket, path: Path) -> dict[str, Any]:
        """What the review is told about the tests: the counts (and the base's), the opt-out,
        the attempt's test changes against the base."""
        judge = self.deps.judge
        story = ticket.story
        allowed = story.frontmatter.get("allow_test_changes") is True
        judged = dict((ticket.verified or {}).get("judged") or {})
        if judge is None:
            return {"allow_test_changes": allowed}
        base = self.workspaces.base_commit(story, path)
        return {
            "allow_test_changes": allowed,
            "test_counts": judged.get("counts"),
            "base_test_counts": judged.get("base_counts"),
            "tests_diff": judge.tests_diff(path, base),
            "startup_files": protect.startup_files(list(judged.get("protected_added") or ())),
        }

    def _recover(self, story_id: str, kind: str, phase: Phase, **details: Any) -> None:
        """Count a recovery before it runs (raises StoryBlockedError at the global limit)."""
        try:
            self.owner.record_recovery(story_id, kind, phase=phase.value, **details)
        except StoryBlockedError as exc:
            self._emit("story_blocked", story_id, phase=phase.value, reason=exc.message)
            raise

    def _recovered(self, story_id: str, event: dict[str, Any]) -> None:
        """Every recovery the owner counted (after it is written): tell the display and the
        multi-story run, including the one that blocks the story."""
        counters = event.get("counters") or {}
        self._emit(
            "recovery",
            story_id,
            phase=event.get("phase"),
            recovery_kind=event.get("recovery_kind"),
            total=counters.get("total_recovery_attempts"),
            limit=self.limit,
            blocked=event.get("outcome") == "blocked",
            **{k: event[k] for k in ("reason", "delay", "attempt") if k in event},
        )

    def _block(
        self, story_id: str, reason: str, *, artifact: tuple[str, str] | None = None
    ) -> NoReturn:
        # Redacted where it goes out (terminal, event log, run state), like every event.
        self._emit("story_blocked", story_id, reason=reason)
        self.owner.block(story_id, reason, artifact=artifact)

    def _finish(self, story: Story) -> bool:
        """Done: publish the work (push, pull request; optional auto-merge) and say whether the
        story is done. Checks that fail under auto-merge send the story back to rework, counted
        like a rejected review."""
        path = self._prepare(story).path
        try:
            finished = self.workspaces.finish(story, path, checked=self._checked == story.id)
        except UnsafeWorkError as exc:
            self._block(story.id, _with_hint(exc))
        if finished.outcome == "failed":
            self._rework(
                story.id,
                outcome="checks_failed",
                feedback=finished.message,
                fields=finished.fields,
                what=lambda n: f"Pull request checks failed; {_n(n, 'rework cycle')}",
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

    def _attempt_of(self, story: Any, phase: Phase) -> tuple[int, int | None]:
        """(this attempt within the phase's limit, how many that limit allows) for display."""
        limits = self.deps.limits
        counter, limit = {
            Phase.REFINE: ("refinement_count", limits.refinement_iterations),
            Phase.IMPLEMENT: ("implementation_retry_count", limits.implementation_retries),
            Phase.REWORK: ("implementation_retry_count", limits.implementation_retries),
            Phase.REVIEW: ("retry_count", limits.review_rejections),
        }.get(phase, ("", 0))
        if not counter:
            return 1, None
        return story.counter(counter) + 1, limit + 1

    def _emit_phase(
        self, story_id: str, phase: Phase, outcome: str, attempt: int, **data: Any
    ) -> None:
        self._emit(
            "phase_" + outcome,
            story_id,
            phase=phase.value,
            attempt=attempt,
            elapsed=round(self.deps.monotonic() - self._phase_t0, 3),
            **data,
        )

    def _emit(self, name: str, story_id: str, **data: Any) -> None:
        self.deps.emit({"event": name, "story": story_id, "time": iso(self.deps.clock()), **data})


class _PhaseRetry(Exception):
    """A read-only violation or an agent's reported failure was counted: the phase ends here
    and the story goes on."""


#: The feedback of a refinement that gave no decision, even when asked again.
_NO_DECISION = (
    "The answer had no DECISION line, even when asked again: end the refined story with "
    "'DECISION: APPROVED' when it is ready, or 'DECISION: REJECTED' and what is missing."
)


#: Which phase's failure feedback goes into which phase's next prompt.
_FEEDS: dict[Phase, tuple[str, ...]] = {
    Phase.REFINE: ("refine",),
    Phase.IMPLEMENT: ("implement", "rework", "review"),
    Phase.REWORK: ("implement", "rework", "review"),
    Phase.RESEARCH: ("research",),
    Phase.PLAN: ("plan",),
    Phase.REVIEW: ("review",),
}


def _n(count: int, one: str, many: str | None = None) -> str:
    """`1 time`, `3 times`: a count with its noun in the right number."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _verification_note(context: dict[str, Any]) -> str:
    """What the review is told about the project's own build and tests."""
    if not context.get("verification_configured", True):
        return (
            "No verification is configured (verify.build / verify.test): nothing was built or "
            "tested. Judge the change by reading it, and say so in your review."
        )
    if context.get("verification_passed"):
        if context.get("workspace_changed") is False:
            note = (
                "The project's build and tests passed, but the implementation changed no file: "
                "there is no change to approve."
            )
        else:
            note = "The project's build and tests passed on this change."
    else:
        output = str(context.get("verification_output") or "").strip() or "(no output captured)"
        note = f"The project's build or tests FAILED on this change:\n{output}"
    return note + note_on_tests(context)


def _with_hint(exc: AiSdlcError) -> str:
    """A block reason that says what to do, too."""
    return f"{exc.message}; to go on: {exc.hint}" if exc.hint else exc.message


def _describe(exc: BaseException) -> str:
    message = exc.message if isinstance(exc, AiSdlcError) else str(exc)
    return f"{type(exc).__name__}: {message}"


@functools.cache
def _telling() -> tuple[re.Pattern[str], ...]:
    """What makes a failure line telling, best first: pytest's short summary, pytest's `E`
    lines, an exception or assertion line, a generic failure word (compiled on first use: a
    run that passes never needs them)."""
    return (
        re.compile(r"^(FAILED|ERROR) "),
        re.compile(r"^E\s+\S"),
        re.compile(r"\w*Error\b|\bassert\b|error:"),
        re.compile(r"failed|not found"),
    )


def _first_line(text: str, limit: int = 200) -> str:
    """The most telling line of a failure (see `_telling`), else its first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    chosen = lines[0] if lines else "no details"
    for pattern in _telling():
        hits = [ln for ln in lines if pattern.search(ln) and not ln.startswith("Traceback")]
        if hits:
            chosen = hits[-1]
            break
    return chosen if len(chosen) <= limit else chosen[: limit - 1] + "…"


def _with_trailing_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
