"""A parallel multi-story run (`run --auto/--batch/--epic --jobs N`, N > 1): the coordinator.

A scheduler, not waves: whenever fewer than N stories run, the next ready one starts (its
dependencies met, no cooldown, no conflict with a running sibling's changes; see `conflicts`).
Each story runs on an executor's worker (`executors`), and this process keeps every run-level
decision, exactly as in a sequential run:

- every runner event of every worker comes here (`observe`): attempts, recoveries, rejections,
  the phase timeline;
- before every phase a worker asks here: the run-wide attempt cap (attempts granted but not yet
  started count, so N workers cannot overshoot it), bounce counting and the stop flag;
- before every provider call a worker reports its spend and gets the run's total back, so
  `limits.run_cost_usd` sees the spend of every worker;
- stop conditions and failure-loop detection are evaluated here after every story outcome. The
  first halt stops new starts; running stories stop before their next phase (the phase in
  flight finishes and is saved), then the run halts with that one reason, resumable.

Per-story counters (the global recovery limit) are written by each worker through the story's
state owner under its file lock: exact across processes without passing through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, RunHaltedError
from ai_sdlc.providers.base import Phase, Usage
from ai_sdlc.workflow.engine.runner import StoryOutcome
from ai_sdlc.workflow.parallel.executors import Ask, Event, Executor, Handle, Message, WorkerDone
from ai_sdlc.workflow.runs import conflicts
from ai_sdlc.workflow.runs.loops import FailureLoop
from ai_sdlc.workflow.runs.multirun import HaltRequested, MultiRun, RunOutcome
from ai_sdlc.workflow.runs.runstate import (
    FINISHED_STORY_STATES,
    IN_PROGRESS,
    SKIPPED,
    StopReason,
    StoryRunState,
)
from ai_sdlc.workflow.runs.stopconditions import CAPPED_PHASES

Halt = tuple[StopReason, FailureLoop | None]
#: The stop condition of a run whose executor lost every worker (its cluster is gone).
CLUSTER_LOST = "cluster_lost"
#: Seconds between two looks at cooldowns and dead workers while waiting for messages.
POLL_SECONDS = 0.5


class ParallelRun(MultiRun):
    def __init__(self, *, executor: Executor, jobs: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.executor = executor
        self.jobs = jobs
        self.running: dict[str, Handle] = {}
        #: Attempts granted by `before_phase` whose `phase_started` has not arrived yet.
        self.granted: set[str] = set()
        self.pending_halt: Halt | None = None
        self.interrupted = False

    # --- the loop ---------------------------------------------------------------------------
    def _loop(self) -> RunOutcome:
        try:
            return self._schedule()
        except KeyboardInterrupt:
            self._drain()
            raise
        finally:
            self.executor.close()

    def _schedule(self) -> RunOutcome:
        look = True
        while True:
            if self.pending_halt is None and self._waiting_to_start():
                # The cap stops a new start here; a running story's next capped phase asks
                # `before_phase`, so one that needs no further attempt finishes (done).
                exhausted = self._exhausted()
                if exhausted:
                    self._halt_soon((exhausted, None))
            if look and self.pending_halt is None and not self.interrupted:
                self._start_ready()
            look = False
            if not self.running:
                if self.interrupted:
                    raise KeyboardInterrupt
                if self.pending_halt is not None:
                    return self._halt(*self.pending_halt)
                cooling = [s for s in self._open() if s.cooldown_until]
                if cooling:
                    self._cool_down(cooling)
                    look = True
                    continue
                return self._end()
            message = self.executor.next_message(POLL_SECONDS)
            if message is None:
                look = True  # a cooldown may have ended
                continue
            look = self._handle(message)

    def _start_ready(self) -> None:
        while len(self.running) < self.jobs:
            s = self._next_story(busy=self.running)
            if s is None:
                return
            s.status = IN_PROGRESS  # `deferred_by` stays: `runs show` says it waited
            self.state.resume_from = s.story_id
            self._save()
            handle = self.executor.start(s.story_id)
            self.running[s.story_id] = handle
            self._event(
                "story_dispatched",
                story=s.story_id,
                worker=handle.worker,
                executor=self.executor.name,
                running=sorted(self.running),
            )

    def _waiting_to_start(self) -> bool:
        """A story of the run is neither finished nor running."""
        return any(
            s.status not in FINISHED_STORY_STATES and s.story_id not in self.running
            for s in self.state.stories
        )

    def _halt_soon(self, halt: Halt) -> None:
        """The first halt wins; running stories stop before their next phase."""
        if self.pending_halt is None:
            self.pending_halt = halt
            self.executor.request_stop()
            self._event(
                "run_stopping",
                condition=halt[0].condition,
                message=halt[0].message,
                running=sorted(self.running),
            )

    def _drain(self) -> None:
        """Ctrl-C: interrupt the workers (their phases roll back), keep what they report until
        they are gone."""
        self.interrupted = True
        # An executor written before `interrupt` joined the seam still stops between phases.
        interrupt = getattr(self.executor, "interrupt", None) or self.executor.request_stop
        interrupt()
        while self.running:
            message = self.executor.next_message(POLL_SECONDS)
            if message is not None:
                self._handle(message)

    # --- messages ---------------------------------------------------------------------------
    def _handle(self, message: Message) -> bool:
        """Act on one message; True when a story finished (time to look for the next)."""
        if isinstance(message, Event):
            event = message.event
            if event.get("event") == "phase_started":
                self.granted.discard(str(event.get("story")))
            self.observe(event)
            self.emit(event)
            return False
        if isinstance(message, Ask):
            self._answer(message)
            return False
        self._finished(message)
        return True

    def _answer(self, ask: Ask) -> None:
        self._add_usage(ask.data.get("usage") or {})
        answer: dict[str, Any] = {}
        if ask.kind == "before_phase":
            story_id = ask.handle.story_id
            if self.pending_halt is not None or self.interrupted:
                answer["stop"] = "the run is stopping"
            else:
                try:
                    phase = Phase(ask.data["phase"])
                    answer["reason"] = self.before_phase(story_id, phase)
                    if phase.value in CAPPED_PHASES:  # what the attempt cap counts
                        self.granted.add(story_id)
                except HaltRequested as exc:
                    self._halt_soon((exc.reason, None))
                    answer["stop"] = exc.reason.message
        usage = self.runner.run_usage
        answer["usage"] = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": usage.cost_usd,
        }
        self.executor.reply(ask.handle, answer)

    def _attempts_committed(self) -> int:
        return self.state.counters.segment_implementation_attempts + len(self.granted)

    def _add_usage(self, delta: dict[str, Any]) -> None:
        cost = delta.get("cost_usd")
        self.runner.run_usage.add(
            Usage(
                int(delta.get("input_tokens") or 0),
                int(delta.get("output_tokens") or 0),
                float(cost) if cost is not None else None,
            )
        )

    def _finished(self, done: WorkerDone) -> None:
        story_id = done.handle.story_id
        self.running.pop(story_id, None)
        self.granted.discard(story_id)
        self._add_usage(done.usage)
        s = self.state.story(story_id)
        if s is None:
            return
        self._event(
            "story_returned",
            story=story_id,
            worker=done.handle.worker,
            kind=done.kind,
            result=done.result,
            reason=done.reason,
        )
        if done.kind == "outcome" or done.kind == "crashed":
            result = done.result if done.kind == "outcome" else "error"
            outcome = StoryOutcome(story_id, result or "error", done.reason)
            self.outcomes.append(outcome)
            self._book(s, outcome)
            if self.pending_halt is None:
                due = self._halt_due()
                if due is not None:
                    self._halt_soon(due)
        elif done.kind == "busy":
            s.status = SKIPPED
            s.reason = done.reason
            self._event("story_skipped", story=story_id, reason=done.reason)
            self._save()
        elif done.kind == "halted":
            self._halt_soon((self._budget_reason(RunHaltedError(done.reason)), None))
        elif done.kind == "lost":  # the executor lost its workers (a Ray cluster gone)
            self._halt_soon((StopReason(CLUSTER_LOST, None, None, done.reason), None))
        elif done.kind == "interrupted":
            self.interrupted = True
            self.executor.request_stop()
        # "stopped": the story stays in progress; a resume picks it up again.

    # --- conflict deferral ------------------------------------------------------------------
    def _planned(self, story_id: str) -> set[str]:
        """The paths the story's `plan.md` names (none without a readable plan)."""
        try:
            plan = self.store.folder(story_id) / "plan.md"
            return conflicts.planned_paths(plan.read_text(encoding="utf-8"))
        except (AiSdlcError, OSError, UnicodeDecodeError):
            return set()

    def _may_start(self, s: StoryRunState, busy: Any) -> bool:
        if not self.running:
            return True
        planned = self._planned(s.story_id)
        if not planned:
            return True
        root = Path(self.store.root)
        siblings, shared = [], set()
        for sibling in sorted(self.running):
            # What it changed so far, and what its plan says it will change: stories started
            # together have changed nothing yet when the second one is considered.
            claimed = conflicts.changed_paths(root, sibling) | self._planned(sibling)
            common = conflicts.overlap(planned, claimed)
            if common:
                siblings.append(sibling)
                shared.update(common)
        if not siblings:
            return True
        if s.deferred_by != siblings:
            s.deferred_by, s.deferred_paths = siblings, sorted(shared)
            self._event(
                "story_deferred",
                story=s.story_id,
                siblings=siblings,
                paths=sorted(shared),
                reason=f"its plan names files that {', '.join(siblings)} changed or plans "
                "to change",
            )
            self._save()
        return False


__all__ = ["CLUSTER_LOST", "POLL_SECONDS", "ParallelRun"]
