"""The stop-condition figures of a run over time (`ai-sdlc report`'s charts), replayed from its
events with the rules of `stopconditions.compute_statistics` (rates over the stories with an
outcome in the current segment; attempts and the fail streak carried over a resume), so their
last point equals the statistics the run itself saved."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ai_sdlc.reporting.timebase import Window, iso_ms, parse_time
from ai_sdlc.workflow.runs.runstate import BLOCKED, DONE, STORY_FAILED, WAITING, RunState

#: The escalation reason multirun gives a story whose phases crashed (an error, not a block).
_CRASHED = "its phases crashed"


@dataclass
class _Replay:
    """The run's statistics, replayed event by event."""

    segment: int = 0
    attempts: int = 0
    consecutive_fails: int = 0
    #: story → (status of its last outcome, segment of it)
    last: dict[str, tuple[str, int]] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

    def outcome(self, story: str, status: str) -> None:
        self.last[story] = (status, self.segment)
        if status in (BLOCKED, STORY_FAILED):
            self.consecutive_fails += 1
            if status == STORY_FAILED:
                self.errors[story] = self.errors.get(story, 0) + 1
        else:
            self.consecutive_fails = 0

    def figures(self) -> dict[str, Any]:
        """As `compute_statistics`: counts over every segment, rates over the current one."""
        worked = {sid: status for sid, (status, _seg) in self.last.items()}
        now = {sid: status for sid, (status, seg) in self.last.items() if seg == self.segment}
        blocked_now = sum(1 for v in now.values() if v in (BLOCKED, STORY_FAILED))

        def retried(ids: Iterable[str]) -> int:
            return sum(1 for sid in ids if self.retries.get(sid, 0) or self.errors.get(sid, 0))

        return {
            "total_attempts": self.attempts,
            "consecutive_fails": self.consecutive_fails,
            "attempted": len(worked),
            "approved": sum(1 for v in worked.values() if v == DONE),
            "blocked": sum(1 for v in worked.values() if v == BLOCKED),
            "failed": sum(1 for v in worked.values() if v == STORY_FAILED),
            "waiting": sum(1 for v in worked.values() if v == WAITING),
            "retried": retried(worked),
            "retry_rate": _rate(retried(now), len(now)),
            "reject_rate": _rate(blocked_now, len(now)),
        }


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


_RESULT_STATUS = {"done": DONE, "waiting": WAITING, "blocked": BLOCKED, "error": STORY_FAILED}


def stop_figures(
    run_events: list[dict[str, Any]],
    story_events: Mapping[str, list[dict[str, Any]]],
    state: RunState,
    window: Window,
) -> list[dict[str, Any]]:
    """One point per attempt and per story outcome: attempts, the fail streak, the reject and
    retry rates (what the run's stop conditions judge), in time order."""
    parallel = any(e.get("action") == "story_returned" for e in run_events)
    merged: list[tuple[dt.datetime, int, str, dict[str, Any]]] = []
    for n, e in enumerate(run_events):
        t = parse_time(e.get("time"))
        if t is not None:
            merged.append((t, n, "run", e))
    for sid, events in story_events.items():
        for n, e in enumerate(events):
            t = parse_time(e.get("time"))
            if t is not None and e.get("action") in ("recovery", "done"):
                merged.append((t, len(run_events) + n, sid, e))
    if not parallel:
        # A story left waiting at a gate by a one-at-a-time run has no event of its own: its
        # outcome is the end of its last phase.
        for s in state.stories:
            ended = parse_time(s.phases[-1].get("ended_at")) if s.phases else None
            if s.status == WAITING and ended is not None:
                merged.append((ended, 1 << 30, s.story_id, {"action": "waiting"}))
    merged.sort(key=lambda item: (item[0], item[1]))
    replay = _Replay()
    points: list[dict[str, Any]] = []

    def point(moment: dt.datetime, what: str, story: str | None) -> None:
        points.append(
            {
                "time": iso_ms(moment),
                "at_s": window.offset(moment),
                "event": what,
                "story": story,
                **replay.figures(),
            }
        )

    for moment, _, source, e in merged:
        action = str(e.get("action", ""))
        story = str(e.get("story") or source)
        if source != "run":
            if action == "recovery":
                replay.retries[source] = replay.retries.get(source, 0) + 1
            elif action == "done" and not parallel:
                replay.outcome(source, DONE)
                point(moment, "story_done", source)
            elif action == "waiting":
                replay.outcome(source, WAITING)
                point(moment, "story_waiting", source)
            continue
        if action in ("run_started", "run_resumed"):
            replay.segment += 1
        elif action == "phase_started":
            replay.attempts += 1
            point(moment, action, story)
        elif action == "story_returned" and e.get("kind") in ("outcome", "crashed"):
            result = str(e.get("result") or "error") if e.get("kind") == "outcome" else "error"
            replay.outcome(story, _RESULT_STATUS.get(result, STORY_FAILED))
            point(moment, f"story_{result}", story)
        elif not parallel and action in ("story_escalated", "story_cooldown"):
            crashed = action == "story_cooldown" or str(e.get("reason", "")).startswith(_CRASHED)
            replay.outcome(story, STORY_FAILED if crashed else BLOCKED)
            point(moment, "story_failed" if crashed else "story_blocked", story)
    return points
