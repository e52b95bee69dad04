"""A multi-story run (`run --auto`, `run --batch`, `run --resume`) and its run-level guardrails.

The per-story guardrails (recovery ledger, phase limits) live in the runner; this loop adds what
only a run can see: stop conditions over the run's statistics, escalation and bounce loops,
cooldown after a crash, graceful halts that persist every story's state, and resume. It watches
the runner through two seams: the event stream (attempts, recoveries, rejections) and the
`before_phase` hook (the attempt circuit breaker and bounce counting, between actions).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

from ai_sdlc.config import Config
from ai_sdlc.config.guard import ConfigChangedError
from ai_sdlc.errors import AiSdlcError, BusyError, RunHaltedError, StoryBlockedError
from ai_sdlc.git.stacking import DependenciesConflictError
from ai_sdlc.providers.base import Phase, Usage
from ai_sdlc.store import StoryStore
from ai_sdlc.wording import count
from ai_sdlc.workflow.engine.assess import IN_REVIEW, NextAction, assess
from ai_sdlc.workflow.engine.runner import StoryOutcome, StoryRunner
from ai_sdlc.workflow.runs import cooldown
from ai_sdlc.workflow.runs import graph as G
from ai_sdlc.workflow.runs.loops import (
    ALL_ESCALATED,
    CONSECUTIVE_ESCALATIONS,
    FailureLoop,
    bounce_reason,
    failure_tail,
    is_step_back,
)
from ai_sdlc.workflow.runs.notify import Notifier
from ai_sdlc.workflow.runs.record import (
    ALL_ESCALATED_CONDITION,
    FAILURE_LOOP,
    RunOutcome,
    RunRecord,
    resume_command,
)
from ai_sdlc.workflow.runs.runstate import (
    BLOCKED,
    DONE,
    FINISHED_STORY_STATES,
    IN_PROGRESS,
    PENDING,
    SKIPPED,
    STORY_FAILED,
    WAITING,
    RunRepository,
    RunState,
    StopReason,
    StoryRunState,
)
from ai_sdlc.workflow.runs.stopconditions import (
    CAPPED_PHASES,
    StopConditions,
    attempts_exhausted,
    evaluate,
)
from ai_sdlc.workflow.state.events import Clock, iso
from ai_sdlc.workflow.state.runlock import run_lock

Emit = Callable[[dict[str, Any]], None]
Sleep = Callable[[float], None]

RUN_COST = "run_cost_usd"
#: A dependency gate's answer: the story waits for a dependency still to run in this run.
WAIT = "wait"
#: Events of the runner after which the run state is saved (every action).
_SAVE_AFTER = ("phase_", "recovery", "rollback_initiated")


@dataclass(frozen=True)
class RunSettings:
    conditions: StopConditions = field(default_factory=StopConditions)
    max_consecutive_escalations: int = 2
    max_bounces: int = 3
    cooldown_seconds: float = 5.0
    max_story_errors: int = 2
    #: When a dependency counts as done (`run.done_means`: done, pr, merged).
    done_means: str = "done"

    @classmethod
    def from_config(cls, config: Config, *, max_attempts: int | None = None) -> RunSettings:
        """`max_attempts`: `run --max-attempts N`, this run's own attempt cap."""
        conditions = StopConditions.from_config(config)
        if max_attempts is not None:
            conditions = replace(conditions, max_total_attempts=max_attempts)
        run = config.typed().run
        return cls(
            conditions=conditions,
            max_consecutive_escalations=run.max_consecutive_escalations,
            max_bounces=run.max_bounces,
            cooldown_seconds=run.cooldown_seconds,
            max_story_errors=run.max_story_errors,
            done_means=run.done_means,
        )


class HaltRequested(RunHaltedError):
    """Raised between two actions when the run must stop (never inside a phase)."""

    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason.message)
        self.reason = reason


def prepare_resume(state: RunState, store: StoryStore) -> None:
    """Make a stopped, failed or crashed run ready to go on. Finished stories stay finished;
    the story that was in progress is picked up again; a story escalated for crashing gets a
    fresh chance (the operator fixed the cause), one escalated as blocked only once a human
    unblocked it (its error and bounce counts start again). Run counters carry over."""
    for s in state.stories:
        if s.status in (IN_PROGRESS, WAITING, SKIPPED):
            s.status = PENDING
        if not s.escalated:
            continue
        if s.status == STORY_FAILED or (s.status == BLOCKED and not _is_blocked(store, s)):
            s.escalated = False
            s.escalation_reason = None
            s.errors = 0
            s.bounces = 0
            s.cooldown_until = None
            s.status = PENDING
    state.stop_reason = None
    state.finished_at = None


def _is_blocked(store: StoryStore, s: StoryRunState) -> bool:
    try:
        return store.get(s.story_id).status == "blocked"
    except AiSdlcError:
        return True


class MultiRun(RunRecord):
    """One story at a time, by priority and dependencies, until the run ends or a stop
    condition halts it; what it writes and how it ends is `RunRecord`'s."""

    def __init__(
        self,
        *,
        store: StoryStore,
        runner: StoryRunner,
        repo: RunRepository,
        state: RunState,
        settings: RunSettings,
        notifier: Notifier,
        emit: Emit,
        clock: Clock,
        sleep: Sleep,
        graph: G.Graph | None = None,
    ) -> None:
        self.store = store
        #: The run's dependency graph (checked before the run: no cycle, nothing missing).
        self.graph = graph or G.Graph()
        self.runner = runner
        self.repo = repo
        self.state = state
        self.settings = settings
        self.notifier = notifier
        self.emit = emit
        self.clock = clock
        self.sleep = sleep
        self.outcomes: list[StoryOutcome] = []
        c = state.counters
        runner.run_usage.add(Usage(c.input_tokens, c.output_tokens, c.cost_usd))

    # --- the loop ---------------------------------------------------------------------------
    def execute(self) -> RunOutcome:
        """Run until every story is finished or a stop condition halts the run."""
        self._begin()
        try:
            return self._loop()
        except KeyboardInterrupt:
            return self._stop_interrupted()
        except BaseException as exc:
            self._mark_failed(exc)
            raise

    def _loop(self) -> RunOutcome:
        while True:
            exhausted = self._exhausted()
            if exhausted:
                return self._halt(exhausted)
            story = self._next_story()
            if story is None:
                cooling = [s for s in self._open() if s.cooldown_until]
                if cooling:
                    self._cool_down(cooling)
                    continue
                return self._end()
            try:
                outcome = self._run_story(story)
            except HaltRequested as exc:
                return self._halt(exc.reason)
            except RunHaltedError as exc:
                return self._halt(self._budget_reason(exc))
            if outcome is None:
                continue
            self.outcomes.append(outcome)
            self._book(story, outcome)
            due = self._halt_due()
            if due is not None:
                return self._halt(*due)

    def _end(self) -> RunOutcome:
        """Nothing left to start and nothing running: complete, or stop (resumable) when
        stories are left that cannot go on: escalated (in any segment: a resume that finds its
        stories still blocked has nothing to do, and says so) or skipped because of them."""
        for s in self._open():  # a safety net: only a dependency that can never be met
            self._skip(s, "its dependencies cannot be met in this run")
        escalated = [s for s in self.state.stories if s.escalated]
        if escalated:
            stuck = [s for s in self.state.stories if s.status == SKIPPED]
            return self._halt_loop(ALL_ESCALATED, escalated + stuck)
        return self._complete()

    def _next_story(self, busy: Collection[str] = ()) -> StoryRunState | None:
        """The next story to start (not one of `busy`), marking on the way the stories that
        turn out finished or whose dependencies can no longer be met."""
        now = self.clock()
        for s in self._open():
            if s.story_id in busy or cooldown.seconds_left(s.cooldown_until, now) > 0:
                continue
            s.cooldown_until = None
            gate = self._dependency_gate(s)
            if gate == WAIT:
                continue
            if gate is not None:
                self._skip(s, gate)
                continue
            if not self._may_start(s, busy):
                continue
            action = self._assess(s.story_id)
            if action is None or action.phase is not None or action.kind == IN_REVIEW:
                return s  # actionable, its PR to look at (or unreadable: the runner says why)
            s.status = {"done": DONE, "waiting": WAITING}.get(action.kind, BLOCKED)
            s.reason = action.reason
            if s.status == BLOCKED:
                s.escalated = True
                s.segment = self.state.segments
                s.escalation_reason = action.reason
            self._save()
        return None

    def _may_start(self, s: StoryRunState, busy: Collection[str]) -> bool:
        """A hook for the parallel scheduler (conflict deferral); one story at a time: yes."""
        return True

    def _dependency_gate(self, s: StoryRunState) -> str | None:
        """None: its dependencies are met; WAIT: one is still to be worked on in this run;
        otherwise why it can never run in this run (it is skipped, never run)."""
        for dep in self.graph.dependencies(s.story_id):
            try:
                node = G.node_of(dep, self.store.get(dep).frontmatter)
            except AiSdlcError:
                return f"depends on {dep}, which cannot be read"
            if G.is_met(node, self.settings.done_means):
                continue
            other = self.state.story(dep)
            if other is None:
                return f"depends on {dep}, which is {node.status or 'unknown'} and not in this run"
            if other.escalated or other.status in (BLOCKED, SKIPPED):
                what = "blocked" if other.status == BLOCKED else other.status
                if other.escalated and other.status != BLOCKED:
                    what = "escalated"
                return f"depends on {dep}, which is {what}"
            if other.status == WAITING:
                return f"depends on {dep}, which is waiting for an approval"
            if other.status == DONE:
                return (
                    f"depends on {dep}, which is done but not "
                    f"{'merged' if self.settings.done_means == 'merged' else 'with a pull request'}"
                    f" (run.done_means: {self.settings.done_means})"
                )
            return WAIT
        return None

    def _skip(self, s: StoryRunState, reason: str) -> None:
        s.status = SKIPPED
        s.reason = reason
        self._event("story_skipped", story=s.story_id, reason=reason)
        self._save()

    def _assess(self, story_id: str) -> NextAction | None:
        try:
            fm = self.store.get(story_id).frontmatter
        except AiSdlcError:
            return None
        action = assess(fm, gates=self.runner.deps.gates, global_limit=self.runner.limit)
        if action.kind == "done" and fm.get("status") != "done":
            return None  # complete but never marked done (stopped in between): the runner does
        return action

    def _run_story(self, s: StoryRunState) -> StoryOutcome | None:
        s.status = IN_PROGRESS
        self.state.resume_from = s.story_id
        self._save()
        try:
            with run_lock(self.store.ai_dir, s.story_id, what=s.story_id):
                return self.runner.run(s.story_id)
        except StoryBlockedError as exc:
            return StoryOutcome(s.story_id, "blocked", exc.message)
        except (RunHaltedError, ConfigChangedError):
            raise  # a guardrail setting changed mid-run: no other story runs on it either
        except (BusyError, DependenciesConflictError) as exc:
            # Held by what a person settles (another run holds it; its dependencies' branches
            # conflict): skipped with the way out, never retried or escalated.
            reason = f"{exc.message}: {exc.hint}" if exc.hint else exc.message
            s.status = SKIPPED
            s.reason = reason
            self._event("story_skipped", story=s.story_id, reason=reason)
            self._save()
            return None
        except AiSdlcError as exc:
            return StoryOutcome(s.story_id, "error", exc.message)

    def _book(self, s: StoryRunState, outcome: StoryOutcome) -> None:
        """Book one story outcome (then `_halt_due` evaluates the run's guardrails)."""
        c = self.state.counters
        s.outcomes += 1
        s.segment = self.state.segments
        s.reason = outcome.reason
        if outcome.result == "blocked":
            s.status = BLOCKED
            c.consecutive_fails += 1
            self._escalate(s, outcome.reason)
        elif outcome.result == "error":
            s.status = STORY_FAILED
            s.errors += 1
            s.last_error = outcome.reason
            c.consecutive_fails += 1
            if s.errors >= self.settings.max_story_errors:
                crashed = count(s.errors, "time")
                self._escalate(s, f"its phases crashed {crashed}: {outcome.reason}")
            else:
                s.cooldown_until = cooldown.cooldown_until(
                    self.clock(), self.settings.cooldown_seconds
                )
                self._event(
                    "story_cooldown",
                    story=s.story_id,
                    until=s.cooldown_until,
                    errors=s.errors,
                    error=outcome.reason,
                )
        else:
            s.status = DONE if outcome.result == "done" else WAITING
            c.consecutive_fails = 0
            c.consecutive_escalations = 0
            c.streak = []
        self._save()

    def _halt_due(self) -> tuple[StopReason, FailureLoop | None] | None:
        """The stop condition or failure loop that halts the run now, if any."""
        c = self.state.counters
        reason = evaluate(self._statistics(), self.settings.conditions)
        if reason is not None:
            return reason, None
        if c.consecutive_escalations >= self.settings.max_consecutive_escalations:
            streak = [self.state.story(i) for i in c.streak]
            return self._loop_reason(CONSECUTIVE_ESCALATIONS, [x for x in streak if x])
        return None

    def _escalate(self, s: StoryRunState, reason: str) -> None:
        c = self.state.counters
        s.escalated = True
        s.segment = self.state.segments
        s.escalation_reason = reason
        c.consecutive_escalations += 1
        c.streak.append(s.story_id)
        data = {"run_id": self.state.run_id, "reason": reason, "last_phase": s.last_phase}
        with contextlib.suppress(AiSdlcError):  # the run goes on even if the file went bad
            self.runner.owner.note(s.story_id, "story_escalated", **data)
        self._event("story_escalated", story=s.story_id, **data)

    def _cool_down(self, cooling: list[StoryRunState]) -> None:
        first = min(cooling, key=lambda s: cooldown.parse(s.cooldown_until or ""))
        until = first.cooldown_until or iso(self.clock())
        self._event("cooldown_wait", story=first.story_id, until=until)

        def tick(left: float) -> None:
            self.emit({"event": "cooldown", "story": first.story_id, "remaining": round(left, 1)})

        cooldown.wait_until(until, clock=self.clock, sleep=self.sleep, tick=tick)

    # --- hooks the runner calls -------------------------------------------------------------
    def before_phase(self, story_id: str, phase: Phase) -> str | None:
        """Between two actions: stop at the attempt cap (before an implementation attempt);
        count a step back as a bounce."""
        s = self.state.story(story_id)
        if s is None:
            return None
        exhausted = self._exhausted() if phase.value in CAPPED_PHASES else None
        if exhausted:
            raise HaltRequested(exhausted)
        previous, s.last_phase = s.last_phase, phase.value
        reason = None
        if previous is not None and is_step_back(previous, phase.value):
            s.bounces += 1
            self._event(
                "story_bounced",
                story=story_id,
                previous=previous,
                phase=phase.value,
                bounces=s.bounces,
            )
            if s.bounces > self.settings.max_bounces:
                reason = bounce_reason(s.bounces, self.settings.max_bounces, previous, phase.value)
        self._save()
        return reason

    def _attempts_committed(self) -> int:
        """This segment's implementation attempts made (and, in a parallel run, granted but
        not started yet)."""
        return self.state.counters.segment_implementation_attempts

    def _exhausted(self) -> StopReason | None:
        """The attempt cap, when a story is left for it to stop: a run whose last story just
        finished completes (it said "halted … 0 stories are left", exit 6)."""
        left = sum(1 for s in self.state.stories if s.status not in FINISHED_STORY_STATES)
        if not left:
            return None
        return attempts_exhausted(self._attempts_committed(), self.settings.conditions, left=left)

    def observe(self, event: dict[str, Any]) -> None:
        """Every runner event: count attempts, retries and rejections for the run, and keep
        each story's phase timeline (start, end, result, recoveries, worker)."""
        name = str(event.get("event", ""))
        s = self.state.story(str(event.get("story", "")))
        if s is None:
            return
        self._timeline(s, name, event)
        if name == "phase_started":
            s.attempts += 1
            c = self.state.counters
            c.total_attempts += 1
            if event.get("phase") in CAPPED_PHASES:
                c.implementation_attempts += 1
                c.segment_implementation_attempts += 1
        elif name == "recovery":
            s.retries += 1
        elif name == "phase_rejected":
            s.rejections += 1
        elif name == "rollback_initiated":  # the run's own copy (its screen line is the runner's)
            self._event(
                "rollback_initiated",
                story=s.story_id,
                phase=event.get("phase"),
                reason=event.get("reason"),
                restored=event.get("restored"),
            )
        if name.startswith(_SAVE_AFTER) and name != "phase_answered":
            self._save()

    def _halt_loop(self, loop_type: str, stories: list[StoryRunState]) -> RunOutcome:
        return self._halt(*self._loop_reason(loop_type, stories))

    def _loop_reason(
        self, loop_type: str, stories: list[StoryRunState]
    ) -> tuple[StopReason, FailureLoop]:
        last = stories[-1]
        threshold = self.settings.max_consecutive_escalations
        reasons = {
            s.story_id: f"{'blocked' if s.status == BLOCKED else s.status}: "
            f"{s.escalation_reason or s.reason or 'no reason recorded'}"
            for s in stories
        }
        loop = FailureLoop(
            loop_type=loop_type,
            stories=[s.story_id for s in stories],
            last_phase=last.last_phase,
            reason=last.escalation_reason or last.reason or "no reason recorded",
            output_tail=self._tail(last.story_id),
            consecutive=self.state.counters.consecutive_escalations,
            threshold=threshold,
            reasons=reasons if loop_type == ALL_ESCALATED else {},
        )
        if loop_type == ALL_ESCALATED:
            message = loop.message
            if not any(s.segment == self.state.segments and s.outcomes for s in self.state.stories):
                message = f"nothing left to do: {message}"
            return StopReason(ALL_ESCALATED_CONDITION, len(stories), None, message), loop
        return StopReason(FAILURE_LOOP, loop.consecutive, threshold, loop.message), loop

    def _tail(self, story_id: str) -> str:
        try:
            return failure_tail(self.store.folder(story_id))
        except AiSdlcError:
            return ""

    def _budget_reason(self, exc: RunHaltedError) -> StopReason:
        limit = self.runner.deps.limits.run_cost_usd
        spent = self.runner.run_usage.cost_usd
        return StopReason(RUN_COST, round(spent or 0.0, 6), limit, exc.message)


__all__ = [
    "HaltRequested",
    "MultiRun",
    "RunOutcome",
    "RunSettings",
    "prepare_resume",
    "resume_command",
]
