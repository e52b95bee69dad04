"""What a multi-story run writes, and how it ends: the run's state file (`runstate`), its own
event log and each story's phase timeline (what `ai-sdlc report` draws), and the ends of a run
(begun or resumed, completed, halted with a diagnostic and notifications, interrupted, failed),
each leaving the run resumable where it can go on. `MultiRun` (and the parallel scheduler)
decide; this records."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.engine.runner import StoryOutcome, StoryRunner
from ai_sdlc.workflow.runs.idle import Idle
from ai_sdlc.workflow.runs.loops import FailureLoop
from ai_sdlc.workflow.runs.notify import Notifier, NotifyResult
from ai_sdlc.workflow.runs.runstate import (
    COMPLETED,
    FAILED,
    FINISHED_STORY_STATES,
    IN_PROGRESS,
    RUNNING,
    SKIPPED,
    STOPPED,
    RunRepository,
    RunState,
    StopReason,
    StoryRunState,
)
from ai_sdlc.workflow.runs.stopconditions import RunStatistics, compute_statistics
from ai_sdlc.workflow.state.events import Clock, append_event, iso

Emit = Callable[[dict[str, Any]], None]

FAILURE_LOOP = "failure_loop"
#: The run stopped with nothing left but escalated stories (and those waiting on them).
ALL_ESCALATED_CONDITION = "all_escalated"
INTERRUPTED = "interrupted"


@dataclass
class RunOutcome:
    state: RunState
    outcomes: list[StoryOutcome] = field(default_factory=list)
    interrupted: bool = False
    loop: FailureLoop | None = None
    diagnostic_path: Path | None = None
    notifications: list[NotifyResult] = field(default_factory=list)
    #: A completed run that skipped stories waiting (directly or through others) on a story
    #: blocked outside it: they cannot start until a human unblocks it (exit 5, as a run that
    #: finds nothing to start for that reason). None otherwise.
    held: Idle | None = None
    #: A completed run that is not a `--batch`: the story files it could not read, so could not
    #: run ((message with file:line, hint) each; exit 3, "completed without every story").
    unreadable: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def halted(self) -> bool:
        return self.state.run_status == STOPPED and not self.interrupted

    @property
    def skipped(self) -> list[StoryRunState]:
        """The stories a completed batch never started (a dependency outside the run not done,
        a story another process held): it did not do what it was asked (exit 1). An `--auto`
        run chose its stories itself: one it skips is shown, and it ends as it did, unless the
        story waits on one blocked outside the run (`held`, exit 5)."""
        if self.state.run_status != COMPLETED or self.state.mode != "batch":
            return []  # a halted run lists them in its stop reason
        return [s for s in self.state.stories if s.status == SKIPPED]

    def skipped_error(self) -> RunIncompleteError | None:
        """The error a completed batch ends with when it skipped a story, saying why."""
        skipped = self.skipped
        if not skipped:
            return None
        why = "; ".join(f"{s.story_id}: {s.reason or 'no reason recorded'}" for s in skipped)
        ids = " ".join(s.story_id for s in skipped)
        hint = "run it again once the other process has finished with it"
        if any((s.reason or "").startswith("depends on") for s in skipped):
            # The way out as commands to type: the dependencies outside the run, named.
            outside = list(
                dict.fromkeys(
                    (s.reason or "").split()[2].rstrip(",")
                    for s in skipped
                    if (s.reason or "").endswith("not in this run")
                )
            )
            if outside:
                batch = " ".join([*outside, *(s.story_id for s in self.state.stories)])
                first = " ".join(f"'ai-sdlc run {dep}'" for dep in outside)
                hint = (
                    f"run what it depends on first ({first}), or add it to the batch "
                    f"('ai-sdlc run --batch {batch}')"
                )
            else:
                hint = "run what it depends on first (its reason above), then run it again"
        return RunIncompleteError(
            f"run {self.state.run_id} skipped {ids}, never started ({why})", hint=hint
        )


class RunIncompleteError(AiSdlcError):
    """A completed run skipped a story it was asked to run (exit 1, as `run <id>` refusing a
    story whose dependency is not done)."""


def resume_command(project: Path, run_id: str) -> str:
    return shlex.join(["ai-sdlc", "--project", str(project), "run", "--resume", run_id])


class RunRecord:
    """The run's record and its ends (module docstring); the attributes are set by the run."""

    store: StoryStore
    runner: StoryRunner
    repo: RunRepository
    state: RunState
    notifier: Notifier
    emit: Emit
    clock: Clock
    outcomes: list[StoryOutcome]

    def _open(self) -> list[StoryRunState]:
        return [
            s
            for s in self.state.stories
            if not s.escalated and s.status not in FINISHED_STORY_STATES
        ]

    def _resume_point(self) -> str | None:
        current = [s for s in self.state.stories if s.status == IN_PROGRESS]
        rest = current or self._open()
        return rest[0].story_id if rest else None

    def _begin(self) -> None:
        st = self.state
        st.segments += 1
        st.counters.segment_implementation_attempts = 0  # the cap counts each segment afresh
        st.run_status = RUNNING
        st.resumable = True
        self._save()
        name = "run_started" if st.segments == 1 else "run_resumed"
        carried = {}
        if st.segments > 1:
            c = st.counters
            carried = {
                "carried_over": {
                    "total_attempts": c.total_attempts,
                    "implementation_attempts": c.implementation_attempts,
                    "consecutive_fails": c.consecutive_fails,
                    "consecutive_escalations": c.consecutive_escalations,
                    "cost_usd": c.cost_usd,
                    "finished_stories": sum(
                        1 for s in st.stories if s.status in FINISHED_STORY_STATES
                    ),
                }
            }
        self._event(
            name,
            stories=[s.story_id for s in st.stories],
            mode=st.mode,
            segment=st.segments,
            **carried,
        )

    def _complete(self) -> RunOutcome:
        st = self.state
        st.run_status = COMPLETED
        st.resumable = False
        st.resume_from = None
        st.finished_at = iso(self.clock())
        self._save()
        self._event("run_completed", statistics=st.statistics)
        return RunOutcome(st, self.outcomes)

    def _halt(self, reason: StopReason, loop: FailureLoop | None = None) -> RunOutcome:
        """Graceful: the action in flight has finished; persist everything, say why."""
        st = self.state
        st.run_status = STOPPED
        st.stop_reason = reason
        st.resumable = True
        st.resume_from = self._resume_point()
        st.finished_at = iso(self.clock())
        self._save()
        diagnostic = self._diagnostic(loop)
        path = self.repo.write_diagnostic(st.run_id, diagnostic)
        if loop is not None and reason.condition == FAILURE_LOOP:
            self._event("failure_loop_detected", **loop.to_json())
        self._event(
            "run_stopped",
            condition=reason.condition,
            value=reason.value,
            threshold=reason.threshold,
            message=reason.message,
            resume_from=st.resume_from,
            statistics=st.statistics,
        )
        results = self.notifier.send(diagnostic) if self.notifier.enabled else []
        for result in results:
            self._event(
                "notify_sent" if result.ok else "notify_failed",
                channel=result.channel,
                detail=result.detail,
            )
        return RunOutcome(st, self.outcomes, False, loop, path, results)

    def _stop_interrupted(self) -> RunOutcome:
        st = self.state
        st.run_status = STOPPED
        st.stop_reason = StopReason(
            INTERRUPTED, None, None, "interrupted (Ctrl-C); finished work is kept"
        )
        st.resumable = True
        st.resume_from = self._resume_point()
        st.finished_at = iso(self.clock())
        self._save()
        self._event(
            "run_stopped",
            condition=INTERRUPTED,
            resume_from=st.resume_from,
            statistics=st.statistics,
        )
        return RunOutcome(st, self.outcomes, interrupted=True)

    def _mark_failed(self, exc: BaseException) -> None:
        st = self.state
        st.run_status = FAILED
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        st.stop_reason = StopReason("error", None, None, str(message))
        st.resumable = True
        st.resume_from = self._resume_point()
        st.finished_at = iso(self.clock())
        self._save()
        self._event("run_failed", message=str(message), resume_from=st.resume_from)

    def _timeline(self, s: StoryRunState, name: str, event: dict[str, Any]) -> None:
        time = str(event.get("time") or iso(self.clock()))
        worker = str(event.get("worker") or "main")
        current = s.phases[-1] if s.phases and s.phases[-1].get("ended_at") is None else None
        if name == "phase_started":
            if current is not None:
                current.update(ended_at=time, result="interrupted")
            s.phases.append(
                {
                    "phase": event.get("phase"),
                    "attempt": event.get("attempt"),
                    # the attempt as the console shows it: `step` of `of` ("attempt 1/4")
                    "step": event.get("step"),
                    "of": event.get("of"),
                    "started_at": time,
                    "ended_at": None,
                    "result": None,
                    "worker": worker,
                    "recoveries": {},
                }
            )
            self._log(name, s.story_id, time, phase=event.get("phase"), worker=worker)
        elif current is None:
            return
        elif name == "recovery":
            kinds = current.setdefault("recoveries", {})
            kind = str(event.get("recovery_kind") or "unknown")
            kinds[kind] = int(kinds.get(kind, 0)) + 1
        elif (name.startswith("phase_") and name != "phase_answered") or name in (
            "story_blocked",
            "rollback_initiated",
            "story_finished",
        ):
            result = name.removeprefix("phase_") if name.startswith("phase_") else name
            current.update(ended_at=time, result=result)
            self._log(name, s.story_id, time, phase=current.get("phase"), worker=worker)

    def _log(self, name: str, story_id: str, time: str, **data: Any) -> None:
        """A phase boundary into the run's own event log (what a run report draws)."""
        event = {"time": time, "action": name, "run_id": self.state.run_id, "story": story_id}
        append_event(self.repo.folder(self.state.run_id), {**event, **data})

    def _statistics(self) -> RunStatistics:
        return compute_statistics(
            self.state.stories, self.state.counters, segment=self.state.segments
        )

    def _save(self) -> None:
        st = self.state
        usage = self.runner.run_usage
        st.counters.input_tokens = usage.input_tokens
        st.counters.output_tokens = usage.output_tokens
        st.counters.cost_usd = usage.cost_usd
        st.statistics = self._statistics().to_json()
        self.repo.save(st, now=self.clock())

    def _event(self, name: str, **data: Any) -> None:
        """Into the run's own event log, and out to the progress display."""
        event = self._record(name, **data)
        self.emit({"event": name, **{k: v for k, v in event.items() if k != "action"}})

    def _record(self, name: str, **data: Any) -> dict[str, Any]:
        """Into the run's own event log only: for a runner event the display has already
        shown (a line is said once per stream)."""
        event = {"time": iso(self.clock()), "action": name, "run_id": self.state.run_id, **data}
        append_event(self.repo.folder(self.state.run_id), event)
        return event

    def _diagnostic_type(self, loop: FailureLoop | None) -> str:
        reason = self.state.stop_reason
        if reason is not None and reason.condition == ALL_ESCALATED_CONDITION:
            return ALL_ESCALATED_CONDITION
        return FAILURE_LOOP if loop else "stop_condition"

    def _diagnostic(self, loop: FailureLoop | None) -> dict[str, Any]:
        st = self.state
        return {
            "type": self._diagnostic_type(loop),
            "run_id": st.run_id,
            "project": str(self.store.root),
            "time": iso(self.clock()),
            "stop_reason": st.to_json()["stop_reason"],
            "failure_loop": loop.to_json() if loop else None,
            "statistics": st.statistics,
            "stories": [
                {
                    "story_id": s.story_id,
                    "status": s.status,
                    "escalated": s.escalated,
                    "reason": s.escalation_reason or s.reason,
                    "last_phase": s.last_phase,
                    "last_error": s.last_error,
                }
                for s in st.stories
            ],
            "resume_from": st.resume_from,
            "resume_command": resume_command(self.store.root, st.run_id),
        }


__all__ = [
    "ALL_ESCALATED_CONDITION",
    "FAILURE_LOOP",
    "INTERRUPTED",
    "RunIncompleteError",
    "RunOutcome",
    "RunRecord",
    "resume_command",
]
