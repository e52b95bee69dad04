"""The agent call: one provider request per attempt, under its guard and budgets.

Owns what surrounds every call to an agent: the prompt with the last failure's feedback
(`_FEEDS`), the story and run budgets checked before the call (inside the guard, so a retried
call is checked again), the usage it spent (written with the phase's outcome, or at once when
the call fails), the answer's DECISION line (asked for once more when missing), and what an
agent may do wrong — report a failure, or change files in a read-only phase — each counted as
a failed attempt. Kept apart so the accounting of one call reads in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ai_sdlc.errors import ProviderUnavailableError, RunHaltedError
from ai_sdlc.providers.base import (
    Access,
    AgentReportedError,
    Phase,
    ProviderRequest,
    ProviderResult,
    TransientProviderError,
    Usage,
    access_for,
)
from ai_sdlc.providers.decision import (
    REFINE_DECISIONS,
    REVIEW_DECISIONS,
    DecisionParts,
    split_decision,
)
from ai_sdlc.providers.pricing import estimate_call
from ai_sdlc.providers.tools import AccessViolationError
from ai_sdlc.workflow.engine.agents import build_prompt, story_view
from ai_sdlc.workflow.engine.base import PhaseRetry, T, first_line, plural
from ai_sdlc.workflow.engine.children import ChildChecks
from ai_sdlc.workflow.engine.work import decision_reminder
from ai_sdlc.workflow.state import ledger as L
from ai_sdlc.workflow.state.transitions import PhaseLimit, Ticket


class AgentCalls(ChildChecks):
    """Calls the agent for an attempt and settles what the call itself got wrong."""

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
        pull_request = None
        pending = story.frontmatter.get("pr_pending")
        if phase is Phase.REWORK and isinstance(pending, dict):  # a PR rework round, every try
            pull_request = _round_feedback(story, pending.get("round"))
        failure = ticket.last_failure
        fed = failure and failure.get("feedback") and failure.get("phase") in _FEEDS.get(phase, ())
        if fed and failure and failure.get("outcome") != "pr_feedback":  # that: `pull_request`
            feedback.append(str(failure["feedback"]))
        view = story_view(story)
        system_prompt, prompt = build_prompt(
            phase,
            view,
            feedback=feedback,
            pull_request=pull_request,
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
        self._emit("step", story_id, phase=phase.value, step="agent", attempt=ticket.attempt)
        try:
            result = self._children(
                story_id, phase, path, lambda: self.deps.provider.execute(request), settle=False
            )
        except AccessViolationError as exc:
            self._persist_usage(story_id, self._live, calls=1)
            if request.access is Access.READ_ONLY:  # written in a read-only phase: undo it
                self.workspaces.revert(ticket.story, path)
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
            cost_usd=result.usage.cost_usd,
        )
        self.settle_children(story_id, phase, path)  # with the call's usage, when it fails
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
        reason = first_line(error.message, 300)
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
                    f"The agent reported failure in {phase.value} {plural(n, 'time')} "
                    f"(limit {limit}): {reason}"
                ),
            ),
        )
        raise unsaved if unsaved is not None else PhaseRetry(reason)

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
        raise PhaseRetry(reason)


#: Which phase's failure feedback goes into which phase's next prompt.
def _round_feedback(story: Any, round_no: Any) -> str | None:
    """A PR rework round's whole feedback, kept by `StoryState.pr_round` as `pr-round-<n>.md`."""
    try:
        path = story.folder / f"pr-round-{int(round_no or 0)}.md"
        return str(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


_FEEDS: dict[Phase, tuple[str, ...]] = {
    Phase.REFINE: ("refine",),
    Phase.IMPLEMENT: ("implement", "rework", "review"),
    Phase.REWORK: ("implement", "rework", "review"),
    Phase.RESEARCH: ("research",),
    Phase.PLAN: ("plan",),
    Phase.REVIEW: ("review",),
}
