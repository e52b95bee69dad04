"""The data of a run report (`ai-sdlc report`): what ran when, what failed, where the recovery
budget went, how the stop conditions moved, what each story cost.

Pure data from what a run leaves on disk: its state (`runs/<id>/state.json`, with each story's
phase timeline), its own event log, and each story's event log within the run's time window.
`load_inputs` reads those; `build_report` turns them into one JSON-ready dict that `--json`
prints and the HTML renderer draws. No HTML here.

The stop-condition figures over time are replayed from the events with the rules of
`stopconditions.compute_statistics` (rates over the stories with an outcome in the current
segment; attempts and the fail streak carried over a resume), so their last point equals the
statistics the run itself saved.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.secrets import redact_tree
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.runs.runstate import (
    BLOCKED,
    DONE,
    SINGLE,
    STORY_FAILED,
    WAITING,
    RunRepository,
    RunState,
)
from ai_sdlc.workflow.runs.stopconditions import StopConditions
from ai_sdlc.workflow.state.events import read_events
from ai_sdlc.workflow.state.ledger import KIND_LABELS

FORMAT = "ai-sdlc/run-report"
VERSION = 1
#: Most events of one story kept in a report (the newest; the count left out is reported).
MAX_STORY_EVENTS = 500
#: Recovery kinds in the order the report stacks them (known kinds first).
KIND_ORDER: tuple[str, ...] = tuple(KIND_LABELS)
#: The escalation reason multirun gives a story whose phases crashed (an error, not a block).
_CRASHED = "its phases crashed"


@dataclass
class StoryInputs:
    """What the report needs of one story besides the run state."""

    title: str | None = None
    #: The story's recorded provider usage (`usage` in story.md: all runs of the story).
    usage: dict[str, Any] = field(default_factory=dict)
    #: The story's whole event log (the report keeps the part within the run).
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReportInputs:
    state: RunState
    run_events: list[dict[str, Any]]
    stories: dict[str, StoryInputs]
    global_limit: int
    conditions: StopConditions
    #: When the report was made (the end of a run still going on).
    now: dt.datetime


def load_inputs(
    store: StoryStore,
    repo: RunRepository,
    state: RunState,
    *,
    global_limit: int,
    conditions: StopConditions,
    now: dt.datetime,
) -> ReportInputs:
    """Read the run's event log and each story's title, usage and event log. A story that
    cannot be read any more (deleted, damaged) is reported with what the run state knows."""
    run_events = list(read_events(repo.folder(state.run_id)))
    stories: dict[str, StoryInputs] = {}
    for s in state.stories:
        inputs = StoryInputs()
        try:
            story = store.get(s.story_id)
        except (AiSdlcError, OSError):
            story = None
        if story is not None:
            inputs.title = story.title
            usage = story.frontmatter.get("usage")
            inputs.usage = dict(usage) if isinstance(usage, Mapping) else {}
        inputs.events = list(read_events(store.folder(s.story_id)))
        stories[s.story_id] = inputs
    return ReportInputs(state, run_events, stories, global_limit, conditions, now)


def parse_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


@dataclass
class _Window:
    start: dt.datetime
    end: dt.datetime

    def holds(self, moment: dt.datetime | None) -> bool:
        return moment is not None and self.start <= moment <= self.end

    def offset(self, moment: dt.datetime | None) -> float | None:
        if moment is None:
            return None
        return round((moment - self.start).total_seconds(), 3)


def _window(inputs: ReportInputs) -> _Window:
    """From the run's start to its end (or its last saved state, or now while it runs); the
    run's own events widen it (a clock that stepped back never hides one)."""
    st = inputs.state
    start = parse_time(st.started_at) or inputs.now
    end = parse_time(st.finished_at) or parse_time(st.updated_at) or inputs.now
    times = [parse_time(e.get("time")) for e in inputs.run_events]
    for s in st.stories:
        for p in s.phases:
            times += [parse_time(p.get("started_at")), parse_time(p.get("ended_at"))]
    known = [t for t in times if t is not None]
    if known:
        start, end = min(start, *known), max(end, *known)
    return _Window(start, max(start, end))


def build_report(inputs: ReportInputs) -> dict[str, Any]:
    """The report as one JSON-ready dict (the documented `ai-sdlc report --json` shape)."""
    st = inputs.state
    window = _window(inputs)
    in_run = {
        sid: [e for e in story.events if window.holds(parse_time(e.get("time")))]
        for sid, story in inputs.stories.items()
    }
    stories = [
        _story(
            s,
            inputs.stories.get(s.story_id, StoryInputs()),
            in_run.get(s.story_id, []),
            window,
            inputs.global_limit,
        )
        for s in st.stories
    ]
    figures = stop_figures(inputs.run_events, in_run, st, window)
    return {
        "format": FORMAT,
        "version": VERSION,
        "generated_at": _iso(inputs.now),
        "run": {
            "run_id": st.run_id,
            "mode": st.mode,
            "run_status": st.run_status,
            "started_at": st.started_at,
            "finished_at": st.finished_at,
            "updated_at": st.updated_at,
            "segments": st.segments,
            "jobs": st.jobs,
            "executor": st.executor,
            "epic": st.epic,
            "resumable": st.resumable,
            "stop_reason": asdict(st.stop_reason) if st.stop_reason else None,
            "statistics": dict(st.statistics),
            "counters": asdict(st.counters),
        },
        "span": {
            "start": _iso(window.start),
            "end": _iso(window.end),
            "seconds": window.offset(window.end),
            **_idle(inputs, window),
        },
        "halts": _halts(inputs.run_events, window),
        "limits": {
            "global_recovery": inputs.global_limit,
            "stop_conditions": asdict(inputs.conditions),
        },
        "recovery_kinds": _kinds(stories),
        "stories": stories,
        "stop_figures": figures,
        "totals": _totals(stories, st),
        "run_events": [_with_offset(e, window) for e in inputs.run_events],
    }


def attempt_label(phase: Mapping[str, Any]) -> str:
    """An attempt named as the console names it ("attempt 1/4": this attempt within the phase's
    limit); a run recorded before the timeline kept it shows the ledger's attempt number."""
    step, of = phase.get("step"), phase.get("of")
    if step is None:
        step, of = phase.get("attempt"), None
    return f"attempt {step}/{of}" if of else f"attempt {step}"


def _idle(inputs: ReportInputs, window: _Window) -> dict[str, Any]:
    """The idle gaps of a resumed run (from the last thing that happened before a resume to the
    resume), which the timeline draws as a break, and the time the run was active."""
    times = sorted(
        t
        for t in (
            *(parse_time(e.get("time")) for e in inputs.run_events),
            *(
                parse_time(p.get(key))
                for s in inputs.state.stories
                for p in s.phases
                for key in ("started_at", "ended_at")
            ),
        )
        if t is not None
    )
    gaps = []
    for e in inputs.run_events:
        resumed = parse_time(e.get("time")) if e.get("action") == "run_resumed" else None
        before = [t for t in times if resumed is not None and t < resumed]
        if resumed is None or not before or resumed <= before[-1]:
            continue
        start, end = window.offset(before[-1]), window.offset(resumed)
        assert start is not None and end is not None
        gaps.append({"start_s": start, "end_s": end, "seconds": round(end - start, 3)})
    total = window.offset(window.end) or 0.0
    idle = sum(g["seconds"] for g in gaps)
    return {"gaps": gaps, "active_seconds": round(max(total - idle, 0.0), 3)}


def _halts(run_events: list[dict[str, Any]], window: _Window) -> list[dict[str, Any]]:
    """Each time the run stopped (a stop condition, Ctrl-C, an error) and when it was resumed:
    a resumed run's halt banner stays while a story it blocked is still blocked."""
    halts: list[dict[str, Any]] = []
    for e in run_events:
        action = e.get("action")
        if action in ("run_stopped", "run_failed"):
            halts.append(
                {
                    "time": e.get("time"),
                    "at_s": window.offset(parse_time(e.get("time"))),
                    "condition": e.get("condition") or "error",
                    "message": e.get("message"),
                    "resumed_at": None,
                }
            )
        elif action == "run_resumed" and halts and halts[-1]["resumed_at"] is None:
            halts[-1]["resumed_at"] = e.get("time")
    return halts


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _with_offset(event: dict[str, Any], window: _Window) -> dict[str, Any]:
    return {**event, "at_s": window.offset(parse_time(event.get("time")))}


def _story(
    s: Any,
    inputs: StoryInputs,
    events: list[dict[str, Any]],
    window: _Window,
    global_limit: int,
) -> dict[str, Any]:
    phases = []
    for p in s.phases:
        started, ended = parse_time(p.get("started_at")), parse_time(p.get("ended_at"))
        phases.append(
            {
                "phase": p.get("phase"),
                "attempt": p.get("attempt"),
                "step": p.get("step"),
                "of": p.get("of"),
                "attempt_label": attempt_label(p),
                "started_at": p.get("started_at"),
                "ended_at": p.get("ended_at"),
                "result": p.get("result"),
                "worker": p.get("worker"),
                "recoveries": dict(p.get("recoveries") or {}),
                "start_s": window.offset(started),
                "end_s": window.offset(ended),
            }
        )
    recoveries = [
        {
            "time": e.get("time"),
            "at_s": window.offset(parse_time(e.get("time"))),
            "kind": str(e.get("recovery_kind") or "unknown"),
            "phase": e.get("phase"),
            "reason": e.get("reason"),
            "outcome": e.get("outcome"),
            "total": _counters(e)[0],
        }
        for e in events
        if e.get("action") == "recovery"
    ]
    by_kind: dict[str, int] = {}
    for r in recoveries:
        kind = str(r["kind"])
        by_kind[kind] = by_kind.get(kind, 0) + 1
    total, breakdown = _budget(events, inputs.events)
    kept = events[-MAX_STORY_EVENTS:]
    tests = next((e["tests"] for e in reversed(events) if isinstance(e.get("tests"), dict)), None)
    return {
        "id": s.story_id,
        "title": inputs.title,
        "status": s.status,
        "reason": s.escalation_reason or s.reason,
        "escalated": s.escalated,
        "attempts": s.attempts,
        "retries": s.retries,
        "rejections": s.rejections,
        "bounces": s.bounces,
        "errors": s.errors,
        "deferred_by": list(s.deferred_by),
        "phases": phases,
        "recoveries": recoveries,
        "recoveries_by_kind": by_kind,
        "budget": {"total": total, "by_kind": breakdown, "limit": global_limit},
        "usage": _usage(inputs, window),
        "events": [_with_offset(e, window) for e in kept],
        "events_left_out": len(events) - len(kept),
        #: The passing attempt's test counts (and the base's), protected files, opt-out.
        "tests": tests,
    }


def _counters(event: Mapping[str, Any]) -> tuple[int | None, dict[str, int]]:
    counters = event.get("counters")
    if not isinstance(counters, Mapping):
        return None, {}
    total = counters.get("total_recovery_attempts")
    raw = counters.get("recovery_breakdown")
    breakdown = {
        str(k): int(v)
        for k, v in (raw.items() if isinstance(raw, Mapping) else ())
        if isinstance(v, int) and not isinstance(v, bool) and v > 0
    }
    return (total if isinstance(total, int) and not isinstance(total, bool) else None), breakdown


def _budget(
    in_run: list[dict[str, Any]], every: list[dict[str, Any]]
) -> tuple[int, dict[str, int]]:
    """The story's recovery accounting (what the global limit judges) at the end of the run:
    the counters of its last event in the run, else of its last event before."""
    for events in (in_run, every):
        for event in reversed(events):
            total, breakdown = _counters(event)
            if total is not None:
                return total, breakdown
    return 0, {}


def _usage(inputs: StoryInputs, window: _Window) -> dict[str, Any]:
    """The story's recorded usage. `scope` says whether it is this run's alone ("run": every
    phase of the story ran within this run) or the story's over all its runs ("story")."""
    u = inputs.usage

    def count(key: str) -> int:
        value = u.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    cost = u.get("cost_usd")
    started = [
        parse_time(e.get("time")) for e in inputs.events if e.get("action") == "phase_started"
    ]
    scope = "run" if all(window.holds(t) for t in started) else "story"
    return {
        "input_tokens": count("input_tokens"),
        "output_tokens": count("output_tokens"),
        "calls": count("calls"),
        "cost_usd": float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool)
        else None,
        "scope": scope,
    }


def _kinds(stories: list[dict[str, Any]]) -> list[str]:
    seen = {k for s in stories for k in (*s["budget"]["by_kind"], *s["recoveries_by_kind"])}
    return [k for k in KIND_ORDER if k in seen] + sorted(seen - set(KIND_ORDER))


def _totals(stories: list[dict[str, Any]], st: RunState) -> dict[str, Any]:
    c = st.counters
    return {
        "run_input_tokens": c.input_tokens,
        "run_output_tokens": c.output_tokens,
        "run_cost_usd": c.cost_usd,
        "recoveries_in_run": sum(len(s["recoveries"]) for s in stories),
        "attempts": c.total_attempts,
    }


# --- stop-condition figures over time -------------------------------------------------------
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
        worked = {sid: status for sid, (status, seg) in self.last.items() if seg == self.segment}
        attempted = len(worked)
        rejected = sum(1 for v in worked.values() if v == BLOCKED)
        failed = sum(1 for v in worked.values() if v == STORY_FAILED)
        retried = sum(
            1 for sid in worked if self.retries.get(sid, 0) > 0 or self.errors.get(sid, 0) > 0
        )
        return {
            "total_attempts": self.attempts,
            "consecutive_fails": self.consecutive_fails,
            "attempted": attempted,
            "approved": sum(1 for v in worked.values() if v == DONE),
            "rejected": rejected,
            "failed": failed,
            "waiting": sum(1 for v in worked.values() if v == WAITING),
            "retried": retried,
            "retry_rate": _rate(retried, attempted),
            "reject_rate": _rate(rejected + failed, attempted),
        }


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


_RESULT_STATUS = {"done": DONE, "waiting": WAITING, "blocked": BLOCKED, "error": STORY_FAILED}


def stop_figures(
    run_events: list[dict[str, Any]],
    story_events: Mapping[str, list[dict[str, Any]]],
    state: RunState,
    window: _Window,
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
                "time": _iso(moment),
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


def recovery_kind_label(kind: str) -> str:
    """How messages spell a kind ("implementation retries"), else the kind itself."""
    return KIND_LABELS.get(kind, (kind, kind))[1]


def report_for(
    ai_dir: Path,
    store: StoryStore,
    state: RunState,
    *,
    global_limit: int,
    conditions: StopConditions,
    now: dt.datetime,
) -> dict[str, Any]:
    """Read and build in one call (what the CLI uses). Every string in it is redacted here,
    the one way into both the JSON and the HTML report (titles, reasons, feedback)."""
    repo = RunRepository(ai_dir, single=state.mode == SINGLE)
    data = build_report(
        load_inputs(store, repo, state, global_limit=global_limit, conditions=conditions, now=now)
    )
    return cast(dict[str, Any], redact_tree(data))
