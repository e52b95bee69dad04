"""The data of a run report (`ai-sdlc report`): what ran when, what failed, where the recovery
budget went, how the stop conditions moved, what each story cost.

Pure data from what a run leaves on disk: its state (`runs/<id>/state.json`, with each story's
phase timeline), its own event log, and each story's event log within the run's time window.
`load_inputs` reads those; `build_report` turns them into one JSON-ready dict that `--json`
prints and the HTML renderer draws. No HTML here. The stop-condition figures over time are
`reporting.replay`'s; times and the run's window `reporting.timebase`'s. A single-story run
(`ai-sdlc run S-0001`) leaves the same record under `runs/single/` (`workflow/runs/single.py`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from ai_sdlc import wording
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.git.feedback import rounds_of
from ai_sdlc.reporting.replay import stop_figures
from ai_sdlc.reporting.timebase import Window, iso_ms, parse_time
from ai_sdlc.secrets import redact_tree
from ai_sdlc.store import StoryStore
from ai_sdlc.store.archive import get_archived
from ai_sdlc.store.story import Story
from ai_sdlc.store.values import usage_of
from ai_sdlc.workflow.runs.runstate import SINGLE, RunRepository, RunState
from ai_sdlc.workflow.runs.stopconditions import StopConditions
from ai_sdlc.workflow.state.events import read_events
from ai_sdlc.workflow.state.ledger import KIND_LABELS

FORMAT = "ai-sdlc/run-report"
VERSION = 1
#: Most events of one story kept in a report (the newest; the count left out is reported).
MAX_STORY_EVENTS = 500
#: Recovery kinds in the order the report stacks them (known kinds first).
KIND_ORDER: tuple[str, ...] = tuple(KIND_LABELS)


@dataclass
class StoryInputs:
    """What the report needs of one story besides the run state."""

    title: str | None = None
    #: The story's recorded provider usage (`usage` in story.md: all runs of the story).
    usage: dict[str, Any] = field(default_factory=dict)
    #: The story's whole event log (the report keeps the part within the run).
    events: list[dict[str, Any]] = field(default_factory=list)
    #: Done without any verification (`verify.none: true`): the report says so.
    unverified: bool = False


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
    """Read the run's event log and each story's title, usage and event log. An archived story
    is read from `.ai-sdlc/archive/` (archiving keeps its history); one that cannot be read any
    more (deleted, damaged) is reported with what the run state knows."""
    run_events = list(read_events(repo.folder(state.run_id)))
    stories: dict[str, StoryInputs] = {}
    for s in state.stories:
        inputs = StoryInputs()
        story = _read_story(store, s.story_id)
        if story is not None:
            inputs.title = story.title
            usage = story.frontmatter.get("usage")
            inputs.usage = dict(usage) if isinstance(usage, Mapping) else {}
            inputs.unverified = story.frontmatter.get("unverified") is True
        folder = story.path.parent if story is not None else _folder(store, s.story_id)
        inputs.events = list(read_events(folder)) if folder is not None else []
        stories[s.story_id] = inputs
    return ReportInputs(state, run_events, stories, global_limit, conditions, now)


def _read_story(store: StoryStore, story_id: str) -> Story | None:
    """The story from the backlog, else from the archive, else None (gone or unreadable)."""
    try:
        return store.get(story_id)
    except (AiSdlcError, OSError):
        pass
    try:
        return get_archived(store, story_id)
    except (AiSdlcError, OSError):
        return None


def _folder(store: StoryStore, story_id: str) -> Path | None:
    """The folder of a story whose file cannot be read (damaged), None when it is gone."""
    try:
        return store.folder(story_id)
    except (AiSdlcError, OSError):
        return None


def _window(inputs: ReportInputs) -> Window:
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
    return Window(start, max(start, end))


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
        "generated_at": iso_ms(inputs.now),
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
            "start": iso_ms(window.start),
            "end": iso_ms(window.end),
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
    """An attempt named as the console names it (`wording.attempt_label`)."""
    return wording.attempt_label(phase.get("attempt"), phase.get("step"), phase.get("of"))


def _idle(inputs: ReportInputs, window: Window) -> dict[str, Any]:
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
        start = round((before[-1] - window.start).total_seconds(), 3)
        end = round((resumed - window.start).total_seconds(), 3)
        gaps.append({"start_s": start, "end_s": end, "seconds": round(end - start, 3)})
    total = window.offset(window.end) or 0.0
    idle = sum(g["seconds"] for g in gaps)
    return {"gaps": gaps, "active_seconds": round(max(total - idle, 0.0), 3)}


def _halts(run_events: list[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
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


def _with_offset(event: dict[str, Any], window: Window) -> dict[str, Any]:
    return {**event, "at_s": window.offset(parse_time(event.get("time")))}


def _story(
    s: Any,
    inputs: StoryInputs,
    events: list[dict[str, Any]],
    window: Window,
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
        "unverified": inputs.unverified,
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
        #: Its pull request's rework rounds (the pull-request loop), over its whole log.
        "pr_rounds": rounds_of(inputs.events),
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


def _usage(inputs: StoryInputs, window: Window) -> dict[str, Any]:
    """The story's recorded usage. `scope` says whether it is this run's alone ("run": every
    phase of the story ran within this run) or the story's over all its runs ("story")."""
    started = [
        parse_time(e.get("time")) for e in inputs.events if e.get("action") == "phase_started"
    ]
    scope = "run" if all(window.holds(t) for t in started) else "story"
    return {**usage_of(inputs.usage), "scope": scope}


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
