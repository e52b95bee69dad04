"""The story runner: executes a story's next actions until it is done, blocked or waiting.

Every action is preceded by `Ledger.ensure_can_act` (a blocked story, or one at the global
recovery limit, runs nothing), and every recovery goes through `Ledger.record_recovery`, so the
global limit applies on every path. Phase limits (implementation retries, rework cycles,
refinement iterations) block the story too, but the global limit always takes precedence.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ai_sdlc.errors import RunHaltedError, StoryBlockedError
from ai_sdlc.providers.base import (
    CallGuard,
    Phase,
    Provider,
    ProviderRequest,
    ProviderResult,
    Usage,
    access_for,
    direct_call,
)
from ai_sdlc.providers.decision import APPROVED, FAILED, RECOVERY, REJECTED, split_decision
from ai_sdlc.providers.pricing import estimate_call
from ai_sdlc.secrets import redact
from ai_sdlc.store import StoryStore
from ai_sdlc.verify import VerificationResult, summarise_failure, workspace_fingerprint
from ai_sdlc.workflow import ledger as L
from ai_sdlc.workflow.agents import ARTIFACT_OF, build_prompt, story_view
from ai_sdlc.workflow.assess import PHASE_FLAG, NextAction, assess
from ai_sdlc.workflow.checkpoint import Checkpoint, Checkpoints
from ai_sdlc.workflow.events import Clock, append_event, iso, read_events, utc_now

#: A story that has taken this many actions in one `run` is stopped (a bug guard: every
#: action either completes a phase or counts a recovery, so real runs end far sooner).
MAX_ACTIONS_PER_RUN = 200

T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]
Verifier = Callable[[Path], VerificationResult]


@dataclass(frozen=True)
class Limits:
    global_recovery: int = 10
    implementation_retries: int = 3
    review_rejections: int = 3
    refinement_iterations: int = 5
    phase_timeout: float = 900.0
    #: Budgets (None = no limit), checked before every provider call.
    story_tokens: float | None = None
    story_cost_usd: float | None = None
    run_cost_usd: float | None = None


@dataclass
class StoryOutcome:
    story_id: str
    #: "done", "blocked", "waiting", "stepped" (one --step ran), "idle" (nothing to do)
    result: str
    reason: str
    actions: int = 0
    recoveries: int = 0


@dataclass
class RunnerDeps:
    """Everything the runner touches, injectable for tests."""

    store: StoryStore
    provider: Provider
    verifier: Verifier
    #: Content hash of the workspace (git-aware); session routes it through the github policy.
    fingerprint: Callable[[Path], str] = workspace_fingerprint
    limits: Limits = field(default_factory=Limits)
    gates: dict[str, Any] = field(default_factory=dict)
    #: (story id, phase, record an api_retry) -> the guard every provider call runs under
    guard_factory: Callable[[str, Phase, Callable[..., None]], CallGuard] = (
        lambda _story, _phase, _record: direct_call
    )
    workspace: Path | None = None
    #: The `ai` config section (model, prices) for usage estimates before a call.
    ai_settings: dict[str, Any] = field(default_factory=dict)
    emit: Emit = lambda _event: None
    clock: Clock = utc_now
    monotonic: Callable[[], float] = time.monotonic
    #: Between two actions, before a phase: a returned reason blocks the story (multi-story
    #: runs count bounces here); raising stops the story before the phase starts.
    before_phase: Callable[[str, Phase], str | None] = lambda _story, _phase: None


class StoryRunner:
    def __init__(self, deps: RunnerDeps) -> None:
        self.deps = deps
        self.store = deps.store
        self.ledger = L.Ledger(deps.store, limit=deps.limits.global_recovery, clock=deps.clock)
        self.workspace = deps.workspace or deps.store.root
        self.checkpoints = Checkpoints(deps.store)
        #: Usage of the whole run (all stories this runner served), for `limits.run_cost_usd`.
        self.run_usage = Usage()
        #: Usage reported live (agent turns) by the provider call in flight, not yet persisted.
        self._live = Usage()
        self._phase_t0 = deps.monotonic()

    # --- public ---------------------------------------------------------------------------
    def run(self, story_id: str, *, step: Phase | None = None) -> StoryOutcome:
        """Take the story as far as it can go (or run one `step`)."""
        actions = 0
        start = self.deps.monotonic()
        self._emit("story_started", story_id)
        self._roll_back_interrupted_phase(story_id)
        while True:
            self.ledger.ensure_can_act(story_id)
            story = self.store.get(story_id)
            if step is not None:
                if actions:
                    return StoryOutcome(story_id, "stepped", f"ran {step.value}", actions)
                action = NextAction(story_id, step, f"--step {step.value}")
            else:
                action = assess(
                    story.frontmatter, gates=self.deps.gates, global_limit=self.ledger.limit
                )
            if action.phase is None:
                result = {"done": "done", "waiting": "waiting"}.get(action.kind, "idle")
                if action.kind == "done" and story.status != "done":
                    self._finish(story_id)
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
        """Run one phase from a checkpoint: if it crashes or is interrupted, the story's workflow
        state goes back to the checkpoint (counters and usage recorded meanwhile stay). A
        guardrail block is an outcome, not a crash: it keeps everything it recorded."""
        reason = self.deps.before_phase(story_id, phase)
        if reason:
            self._block(story_id, reason)
        checkpoint = self.checkpoints.take(story_id, phase.value, taken_at=iso(self.deps.clock()))
        try:
            self._execute(story_id, phase)
        except StoryBlockedError:
            self.checkpoints.discard(story_id)
            raise
        except BaseException as exc:
            self._roll_back(checkpoint, f"{type(exc).__name__}: {exc}")
            raise
        self.checkpoints.discard(story_id)

    def _roll_back_interrupted_phase(self, story_id: str) -> None:
        """A checkpoint left by a run that died mid-phase (SIGKILL, power loss): restore it."""
        checkpoint = self.checkpoints.pending(story_id)
        if checkpoint is not None:
            self._roll_back(checkpoint, f"an earlier run stopped during {checkpoint.phase}")

    def _roll_back(self, checkpoint: Checkpoint, reason: str) -> None:
        story_id = checkpoint.story_id
        try:
            restored = self.checkpoints.restore(checkpoint)
        except Exception as exc:  # keep the checkpoint: the next run restores it
            self._emit("rollback_failed", story_id, phase=checkpoint.phase, reason=str(exc))
            return
        self.checkpoints.discard(story_id)
        event = {"phase": checkpoint.phase, "reason": reason[:500], "restored": restored}
        append_event(
            self.store.folder(story_id),
            {"time": iso(self.deps.clock()), "action": "rollback_initiated", **event},
        )
        self._emit("rollback_initiated", story_id, **event)

    def _refine(self, story_id: str, phase: Phase) -> None:
        body = self.store.get(story_id).body
        result, attempt = self._call_agent(story_id, phase, context={"story_body": body})
        parts = split_decision(result.text)
        if parts.decision == REJECTED:
            done = self.store.get(story_id).counter("refinement_count")
            self._log(story_id, phase, "rejected", attempt=attempt, feedback=parts.feedback)
            if done >= self.deps.limits.refinement_iterations:
                self._block(
                    story_id,
                    f"Refinement did not converge after {done} iterations "
                    f"(limit {self.deps.limits.refinement_iterations}): "
                    f"{_first_line(parts.feedback)}",
                )
            self._recover(story_id, L.REFINEMENT, phase, reason=_first_line(parts.feedback))
            return
        with self.store.edit(story_id) as story:
            if parts.before.strip():
                story.body = _with_trailing_newline(parts.before)
            self._set_status(story, "ready")
        self._log(story_id, phase, "completed", attempt=attempt)

    def _document(self, story_id: str, phase: Phase) -> None:
        result, attempt = self._call_agent(story_id, phase)
        self.store.write_artifact(story_id, ARTIFACT_OF[phase], _with_trailing_newline(result.text))
        with self.store.edit(story_id) as story:
            story.frontmatter[PHASE_FLAG[phase]] = True
            self._set_status(story, "in-progress")
        self._log(story_id, phase, "completed", attempt=attempt, artifact=ARTIFACT_OF[phase])

    def _implement(self, story_id: str, phase: Phase) -> None:
        before = self.deps.fingerprint(self.workspace)
        result, attempt = self._call_agent(story_id, phase)
        changed = self.deps.fingerprint(self.workspace) != before
        verdict = self._verify(story_id, phase)
        if verdict.passed:
            with self.store.edit(story_id) as story:
                fm = story.frontmatter
                fm["implementation_complete"] = True
                if fm.get("implementation_retry_count"):
                    fm["implementation_retry_count"] = 0
                if "rework_pending" in fm:
                    del fm["rework_pending"]
                self._set_status(story, "in-progress")
            self._log(
                story_id,
                phase,
                "passed",
                attempt=attempt,
                workspace_changed=changed,
                files_changed=result.files_changed,
            )
            return
        summary = summarise_failure(verdict.failure_output)
        previous = self._last_failure(story_id, phase)
        self._log(
            story_id,
            phase,
            "failed",
            attempt=attempt,
            workspace_changed=changed,
            signature=verdict.signature,
            feedback=summary,
        )
        if previous and previous.get("signature") == verdict.signature and not changed:
            self._block(
                story_id,
                "Implementation is not making progress: two attempts failed with the same "
                f"error and changed nothing. Last failure: {_first_line(summary)}",
            )
        retries = self.store.get(story_id).counter("implementation_retry_count")
        if retries >= self.deps.limits.implementation_retries:
            self._block(
                story_id,
                f"Implementation failed verification after {retries} retries "
                f"(limit {self.deps.limits.implementation_retries}): {_first_line(summary)}",
            )
        self._recover(story_id, L.IMPLEMENTATION_RETRY, phase, reason=_first_line(summary))

    def _review(self, story_id: str, phase: Phase) -> None:
        verdict = self._verify(story_id, phase)
        last_impl = self._last_event(story_id, {"implement", "rework"}, outcome=None)
        context = {
            "verification_passed": verdict.passed,
            "verification_output": summarise_failure(verdict.failure_output)
            if not verdict.passed
            else "",
            "workspace_changed": bool(last_impl.get("workspace_changed", True))
            if last_impl
            else True,
        }
        result, attempt = self._call_agent(story_id, phase, context=context)
        parts = split_decision(result.text)
        decision = parts.decision or REJECTED
        feedback = parts.feedback or (
            "" if parts.decision else "The review gave no DECISION line; treat as rejected."
        )
        self.store.write_artifact(story_id, "review.md", _with_trailing_newline(result.text))
        self._log(story_id, phase, decision.lower(), attempt=attempt, feedback=feedback)
        if decision == APPROVED:
            with self.store.edit(story_id) as story:
                story.frontmatter["reviews_complete"] = True
            return
        if decision == FAILED:
            self._block(story_id, f"Review FAILED: {_first_line(feedback)}")
        if decision == RECOVERY:
            retries = self.store.get(story_id).counter("implementation_retry_count")
            if retries >= self.deps.limits.implementation_retries:
                self._block(
                    story_id,
                    f"Review asked to re-implement after {retries} implementation retries "
                    f"(limit {self.deps.limits.implementation_retries})",
                )
            self._recover(story_id, L.IMPLEMENTATION_RETRY, phase, reason="review: RECOVERY")
            with self.store.edit(story_id) as story:
                story.frontmatter["implementation_complete"] = False
            return
        reworks = self.store.get(story_id).counter("retry_count")
        if reworks >= self.deps.limits.review_rejections:
            self._block(
                story_id,
                f"Review rejected the story {reworks + 1} times "
                f"(limit {self.deps.limits.review_rejections} rework cycles): "
                f"{_first_line(feedback)}",
            )
        self._recover(story_id, L.REWORK, phase, reason=_first_line(feedback))
        with self.store.edit(story_id) as story:
            story.frontmatter["implementation_complete"] = False
            story.frontmatter["reviews_complete"] = False
            story.frontmatter["rework_pending"] = True

    # --- helpers ----------------------------------------------------------------------------
    def _call_agent(
        self, story_id: str, phase: Phase, *, context: dict[str, Any] | None = None
    ) -> tuple[ProviderResult, int]:
        story = self.store.get(story_id)
        attempt = 1 + sum(
            1
            for e in read_events(story.folder)
            if e.get("action") == "phase_started" and e.get("phase") == phase.value
        )
        feedback = []
        failure = self._last_failure(story_id, phase)
        if failure and failure.get("feedback"):
            feedback.append(str(failure["feedback"]))
        view = story_view(story)
        system_prompt, prompt = build_prompt(phase, view, feedback=feedback, attempt=attempt)
        step, of = self._attempt_of(story, phase)
        self._log(
            story_id, phase, "started", action="phase_started", attempt=attempt, step=step, of=of
        )
        started = self._phase_t0 = self.deps.monotonic()
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
            workspace=self.workspace,
            access=access_for(phase),
            timeout=self.deps.limits.phase_timeout,
            story_id=story_id,
            attempt=attempt,
            model=self.deps.ai_settings.get("model"),
            context=context or {},
            guard=guard,
            on_event=lambda name, data: self._on_provider_event(story_id, phase, name, data),
            on_backend_retry=lambda delay, reason: self._backend_retry(
                story_id, phase, delay, reason
            ),
        )
        self._live = Usage()
        try:
            result = self.deps.provider.execute(request)
        except BaseException:
            self._persist_usage(story_id, self._live, calls=1)
            raise
        self._persist_usage(story_id, result.usage, calls=1)
        self._emit(
            "phase_answered",
            story_id,
            phase=phase.value,
            attempt=attempt,
            elapsed=round(self.deps.monotonic() - started, 3),
            tokens=result.usage.total_tokens,
        )
        return result, attempt

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
        """Add one provider call's usage to the story's `usage` and the run's total."""
        self._live = Usage()
        if not usage.total_tokens and usage.cost_usd is None:
            return
        self.run_usage.add(usage)
        with self.store.edit(story_id) as story:
            current = story.frontmatter.get("usage")
            totals = dict(current) if isinstance(current, dict) else {}
            totals["input_tokens"] = int(totals.get("input_tokens") or 0) + usage.input_tokens
            totals["output_tokens"] = int(totals.get("output_tokens") or 0) + usage.output_tokens
            if usage.cost_usd is not None:
                cost = float(totals.get("cost_usd") or 0.0) + usage.cost_usd
                totals["cost_usd"] = round(cost, 6)
            totals["calls"] = int(totals.get("calls") or 0) + calls
            story.frontmatter["usage"] = totals

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

    def _verify(self, story_id: str, phase: Phase) -> VerificationResult:
        self._emit("verification_started", story_id, phase=phase.value)
        verdict = self.deps.verifier(self.workspace)
        self._emit(
            "verification_finished",
            story_id,
            phase=phase.value,
            passed=verdict.passed,
            steps=[s.name for s in verdict.steps],
        )
        return verdict

    def _recover(self, story_id: str, kind: str, phase: Phase, **details: Any) -> None:
        """Count a recovery (may raise StoryBlockedError at the global limit)."""
        try:
            record = self.ledger.record_recovery(story_id, kind, phase=phase.value, **details)
        except StoryBlockedError:
            self._emit("story_blocked", story_id, phase=phase.value, recovery_kind=kind)
            raise
        self._emit(
            "recovery",
            story_id,
            phase=phase.value,
            recovery_kind=kind,
            total=record.total,
            limit=self.ledger.limit,
            **details,
        )

    def _block(self, story_id: str, reason: str) -> None:
        reason = redact(reason)  # reasons quote failing output; it goes into story.md
        with self.store.edit(story_id) as story:
            self.ledger.mark_blocked(story, reason)
            folder = story.folder
            total = story.counter("total_recovery_attempts")
        append_event(
            folder,
            {
                "time": iso(self.deps.clock()),
                "action": "blocked",
                "outcome": "phase_limit",
                "reason": reason,
                "counters": {"total_recovery_attempts": total},
            },
        )
        self._emit("story_blocked", story_id, reason=reason)
        raise StoryBlockedError(
            reason, story_id=story_id, hint=f"fix the cause, then run 'ai-sdlc unblock {story_id}'"
        )

    def _finish(self, story_id: str) -> None:
        with self.store.edit(story_id) as story:
            self._set_status(story, "done")
            folder = story.folder
        append_event(
            folder, {"time": iso(self.deps.clock()), "action": "done", "outcome": "completed"}
        )

    def _set_status(self, story: Any, status: str) -> None:
        fm = story.frontmatter
        if fm.get("status") != status:
            fm["status"] = status
            fm["updated"] = self.deps.clock().date().isoformat()

    def _last_event(
        self, story_id: str, phases: set[str], *, outcome: str | None
    ) -> dict[str, Any] | None:
        last = None
        for event in read_events(self.store.folder(story_id)):
            if event.get("action") != "phase" or event.get("phase") not in phases:
                continue
            if outcome is None or event.get("outcome") == outcome:
                last = event
        return last

    def _last_failure(self, story_id: str, phase: Phase) -> dict[str, Any] | None:
        """The record of the last attempt that sent work back to `phase`, if the latest one
        failed: its feedback goes into the retry's prompt."""
        related = {
            Phase.REFINE: {"refine"},
            Phase.IMPLEMENT: {"implement", "rework", "review"},
            Phase.REWORK: {"implement", "rework", "review"},
        }.get(phase)
        if not related:
            return None
        last = self._last_event(story_id, related, outcome=None)
        if last and last.get("outcome") in ("failed", "rejected", "recovery"):
            return last
        return None

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

    def _log(
        self, story_id: str, phase: Phase, outcome: str, *, action: str = "phase", **data: Any
    ) -> None:
        if action == "phase" and "elapsed" not in data:
            data["elapsed"] = round(self.deps.monotonic() - self._phase_t0, 3)
        story = self.store.get(story_id)
        event = {
            "time": iso(self.deps.clock()),
            "action": action,
            "phase": phase.value,
            "outcome": outcome,
            **data,
            "counters": {
                "total_recovery_attempts": story.counter("total_recovery_attempts"),
                "recovery_breakdown": dict(story.recovery_breakdown),
            },
        }
        append_event(story.folder, event)
        self._emit(
            "phase_" + outcome if action == "phase" else action,
            story_id,
            phase=phase.value,
            **{k: v for k, v in data.items() if k != "feedback"},
        )

    def _emit(self, name: str, story_id: str, **data: Any) -> None:
        self.deps.emit({"event": name, "story": story_id, "time": iso(self.deps.clock()), **data})


#: What makes a failure line telling, best first: pytest's short summary, pytest's `E` lines,
#: an exception or assertion line, a generic failure word.
_TELLING = (
    re.compile(r"^(FAILED|ERROR) "),
    re.compile(r"^E\s+\S"),
    re.compile(r"\w*Error\b|\bassert\b|error:"),
    re.compile(r"failed|not found"),
)


def _first_line(text: str, limit: int = 200) -> str:
    """The most telling line of a failure (see `_TELLING`), else its first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    chosen = lines[0] if lines else "no details"
    for pattern in _TELLING:
        hits = [ln for ln in lines if pattern.search(ln) and not ln.startswith("Traceback")]
        if hits:
            chosen = hits[-1]
            break
    return chosen if len(chosen) <= limit else chosen[: limit - 1] + "…"


def _with_trailing_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
