"""A single-story run (`ai-sdlc run S-0001`) recorded as a run of one story, so that
`ai-sdlc report` draws it as it draws a multi-story run: the same state file, event log and phase
timeline (`RunRecord`), kept under `.ai-sdlc/runs/single/` where `runs` and `run --resume` do not
look. Nothing is written until the run starts a phase: a run that had nothing to do (the story
done, blocked, waiting at a gate) leaves no record."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.engine.runner import StoryOutcome, StoryRunner
from ai_sdlc.workflow.runs.notify import Notifier
from ai_sdlc.workflow.runs.record import RunRecord
from ai_sdlc.workflow.runs.runstate import (
    BLOCKED,
    DONE,
    IN_PROGRESS,
    SINGLE,
    WAITING,
    RunRepository,
    RunState,
    StoryRunState,
    new_run_id,
)
from ai_sdlc.workflow.runs.stopconditions import CAPPED_PHASES
from ai_sdlc.workflow.state.events import Clock, iso

#: A runner's outcome as a story's state in the run; any other (`stepped`, `idle`) is kept as is.
_STATUS = {"done": DONE, "blocked": BLOCKED, "waiting": WAITING}


class _Relay(Protocol):
    watcher: Any


class SingleRun(RunRecord):
    """Watches one story's runner (the session's relay hands it every event) and keeps the run's
    record; `finish` ends it with the runner's outcome."""

    def __init__(self, store: StoryStore, runner: StoryRunner, story_id: str, clock: Clock) -> None:
        self.store = store
        self.runner = runner
        # Saved after every phase boundary for the report alone: not worth an fsync each
        # (about 10 ms apiece, doubling a short scripted run).
        self.repo = RunRepository(store.ai_dir, single=True, durable=False)
        self.clock = clock
        self.story_id = story_id
        self.outcomes = []
        self.notifier = Notifier(command=None, webhook=None, cwd=store.root)  # never halts
        self.emit = lambda _event: None  # the runner's own events already reach the display
        self.started = False
        self.broken = False

    def _start(self) -> None:
        now = self.clock()
        self.state = RunState(
            run_id=new_run_id(now),
            mode=SINGLE,
            started_at=iso(now),
            stories=[StoryRunState(self.story_id)],
        )
        self.repo.create(self.state)
        self.started = True
        self._begin()

    def before_phase(self, story_id: str, phase: Phase) -> str | None:
        return None

    def observe(self, event: dict[str, Any]) -> None:
        """The multi-story run's bookkeeping for one story: attempts, retries, rejections and
        the phase timeline, saved after each phase boundary. The record serves the report
        only: when it cannot be written (a full disk, a read-only folder) the story's run goes
        on unrecorded."""
        if self.broken or event.get("story") != self.story_id:
            return
        try:
            self._observe(event)
        except (AiSdlcError, OSError):
            self.broken = True

    def _observe(self, event: dict[str, Any]) -> None:
        name = str(event.get("event", ""))
        if not self.started:
            if name != "phase_started":
                return
            self._start()
        s = self.state.stories[0]
        s.status = IN_PROGRESS
        self._timeline(s, name, event)
        if name == "phase_started":
            s.attempts += 1
            s.last_phase = str(event.get("phase") or "") or None
            self.state.counters.total_attempts += 1
            if event.get("phase") in CAPPED_PHASES:  # the unit the multi-story run caps
                self.state.counters.implementation_attempts += 1
        elif name == "recovery":
            s.retries += 1
        elif name == "phase_rejected":
            s.rejections += 1
        if name.startswith("phase_") or name == "story_blocked":  # recoveries: with the next
            self._save()

    def finish(self, outcome: StoryOutcome) -> StoryOutcome:
        if self.started and not self.broken:
            with contextlib.suppress(AiSdlcError, OSError):
                self._finish(outcome)
        return outcome

    def _finish(self, outcome: StoryOutcome) -> None:
        s = self.state.stories[0]
        s.status = _STATUS.get(outcome.result, outcome.result)
        s.reason = outcome.reason
        s.outcomes += 1
        s.segment = self.state.segments
        s.escalated = s.status == BLOCKED
        s.escalation_reason = outcome.reason if s.escalated else None
        self.outcomes.append(outcome)
        self._complete()

    @contextlib.contextmanager
    def watching(self, relay: _Relay) -> Iterator[SingleRun]:
        """The relay's watcher while the story runs; a run stopped by Ctrl-C or an error is
        recorded as such (and the error goes on unchanged)."""
        relay.watcher = self
        try:
            yield self
        except KeyboardInterrupt:
            if self.started and not self.broken:
                with contextlib.suppress(AiSdlcError, OSError):  # the stop matters more
                    self._stop_interrupted()
            raise
        except BaseException as exc:
            if self.started and not self.broken:
                with contextlib.suppress(AiSdlcError, OSError):
                    self._mark_failed(exc)
            raise
        finally:
            relay.watcher = None


__all__ = ["SingleRun"]
