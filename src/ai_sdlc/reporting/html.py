"""The run report as one self-contained HTML file (`ai-sdlc report --html out.html`).

Everything is inline (CSS, SVG charts, a few lines of JS) and a Content-Security-Policy forbids
every fetch, so the file opens anywhere, offline, with nothing of the project at hand. Every
string that came from a story, a model or an event goes through `html.escape`; numbers are
formatted from floats. The data is `reporting.data`'s dict. This module lays the page out
(header, tables, each story's events); the frame (CSP, CSS, script, colours) is
`reporting.page`, the SVG charts `reporting.charts`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ai_sdlc.errors import UsageError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.git.feedback import round_lines
from ai_sdlc.reporting.charts import budget, kind_legend, phase_legend, stop_charts, timeline
from ai_sdlc.reporting.page import (
    CSP,
    CSS,
    ERROR_HOOK,
    KIND_COLOURS,
    SCRIPT,
    STATUS_COLOURS,
    esc,
    fmt_s,
    num,
)


def render(report: Mapping[str, Any]) -> str:
    """The whole page."""
    run = report["run"]
    kinds: list[str] = list(report.get("recovery_kinds") or [])
    colours = {k: KIND_COLOURS[i % len(KIND_COLOURS)] for i, k in enumerate(kinds)}
    single = run.get("mode") == "single"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>ai-sdlc run {esc(run['run_id'])}</title>",
        f"<script>{ERROR_HOOK}</script>",
        f"<style>{CSS}</style></head><body><main>",
        _header(report),
        '<h2 id="timeline">Timeline</h2>',
        phase_legend(),
        kind_legend(kinds, colours, "▼ recovery: "),
        f'<div class="card">{timeline(report, colours)}</div>',
        '<h2 id="budget">Recovery budget per story</h2>',
        kind_legend(kinds, colours, ""),
        f'<div class="card">{budget(report, kinds, colours)}</div>',
        '<h2 id="stop-conditions">Stop conditions over time</h2>',
        '<p class="sub">A single-story run: stop conditions judge multi-story runs only.</p>'
        if single
        else stop_charts(report),
        '<h2 id="cost">Cost and tokens per story</h2>',
        _usage_table(report),
        '<h2 id="events">Events per story</h2>',
        '<p><button type="button" id="expand-all">Expand all</button>'
        '<button type="button" id="collapse-all">Collapse all</button></p>',
        *(_story_section(s) for s in report["stories"]),
        _run_events(report),
        f'<p class="sub">Generated {esc(report.get("generated_at"))} by ai-sdlc '
        f"(report format {esc(report.get('format'))} v{esc(report.get('version'))}).</p>",
        f"</main><script>{SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


# --- header -----------------------------------------------------------------------------------
def _header(report: Mapping[str, Any]) -> str:
    run = report["run"]
    stats = run.get("statistics") or {}
    counters = run.get("counters") or {}
    totals = report.get("totals") or {}
    stories = report["stories"]
    done = sum(1 for s in stories if s.get("status") == "done")
    blocked = sum(1 for s in stories if s.get("status") in ("blocked", "failed"))
    cost = counters.get("cost_usd")
    tokens = int(num(counters.get("input_tokens")) + num(counters.get("output_tokens")))
    tiles = [
        (len(stories), "stories"),
        (done, "done"),
        (blocked, "blocked or failed"),
        (int(num(counters.get("total_attempts"))), "attempts"),
        (int(num(totals.get("recoveries_in_run"))), "recoveries"),
        (f"{tokens:,}", "tokens"),
        (f"${num(cost):.4f}" if cost is not None else "n/a", "cost"),
        (fmt_s(num(report["span"].get("seconds"))), "wall time"),
    ]
    idle = sum(num(g.get("seconds")) for g in report["span"].get("gaps") or [])
    if idle:  # a resumed run: the time it worked, and the time it waited to be resumed
        tiles[-1] = (fmt_s(num(report["span"].get("active_seconds"))), "active")
        tiles.append((fmt_s(idle), "idle between segments"))
    epic = f" · epic {esc(run.get('epic'))}" if run.get("epic") else ""
    ended = f" → {esc(run.get('finished_at'))}" if run.get("finished_at") else ""
    out = [
        f"<h1>Run {esc(run['run_id'])}</h1>",
        f'<div class="sub">{esc(run.get("mode"))} · <b>{esc(run.get("run_status"))}</b> · '
        f"{esc(run.get('started_at'))}{ended} · jobs {esc(run.get('jobs'))} "
        f"({esc(run.get('executor'))}){epic} · segments {esc(run.get('segments'))}</div>",
        '<div class="tiles">'
        + "".join(f"<div class='tile'><b>{esc(v)}</b><span>{esc(k)}</span></div>" for v, k in tiles)
        + "</div>",
    ]
    out.append(_halt_banner(report))
    if stats and run.get("mode") != "single":  # the stop conditions' figures
        out.append(
            f'<div class="sub">attempted {esc(stats.get("attempted"))} · approved '
            f"{esc(stats.get('approved'))} · blocked {esc(stats.get('blocked'))} · failed "
            f"{esc(stats.get('failed'))} · waiting {esc(stats.get('waiting'))} · retry rate "
            f"{num(stats.get('retry_rate')):.2f} · reject rate "
            f"{num(stats.get('reject_rate')):.2f}</div>"
        )
    return "\n".join(out)


def _halt_banner(report: Mapping[str, Any]) -> str:
    """Why the run stopped, and the stories still blocked: after a resume the banner stays (with
    the earlier halt) while a story the run blocked is still blocked."""
    stop = report["run"].get("stop_reason")
    blocked = [s for s in report["stories"] if s.get("status") in ("blocked", "failed")]
    lines = []
    if isinstance(stop, Mapping):
        lines.append(f"<b>Stopped by {esc(stop.get('condition'))}</b>: {esc(stop.get('message'))}")
    if blocked:
        for halt in report.get("halts") or []:
            if isinstance(stop, Mapping) and not halt.get("resumed_at"):
                continue  # the halt the run ends with: said above
            resumed = f"; resumed {esc(halt.get('resumed_at'))}" if halt.get("resumed_at") else ""
            lines.append(
                f"<span class='earlier'><b>Stopped earlier by {esc(halt.get('condition'))}</b> "
                f"at {esc(halt.get('time'))}{resumed}: {esc(halt.get('message'))}</span>"
            )
    for s in blocked:
        lines.append(
            f"<b>Still {esc(s.get('status'))}: <a href='#story-{esc(s['id'])}'>{esc(s['id'])}</a>"
            f"</b> {esc(s.get('title'))}: <span class='detail'>{esc(s.get('reason'))}</span>"
        )
    if not lines:
        return ""
    return '<div class="stop" id="halt-banner">' + "<br>".join(lines) + "</div>"


# --- usage --------------------------------------------------------------------------------------
def _usage_table(report: Mapping[str, Any]) -> str:
    rows = []
    for s in report["stories"]:
        u = s["usage"]
        cost = u.get("cost_usd")
        scope = "this run" if u.get("scope") == "run" else "all runs of the story"
        rows.append(
            f'<tr><td class="id"><a href="#story-{esc(s["id"])}">{esc(s["id"])}</a></td>'
            f"<td>{esc(s.get('title'))}</td>"
            f'<td class="n">{int(num(u.get("input_tokens"))):,}</td>'
            f'<td class="n">{int(num(u.get("output_tokens"))):,}</td>'
            f'<td class="n">{int(num(u.get("calls")))}</td>'
            f'<td class="n">{esc(f"${num(cost):.4f}" if cost is not None else "n/a")}</td>'
            f"<td>{esc(scope)}</td></tr>"
        )
    totals = report.get("totals") or {}
    run_cost = totals.get("run_cost_usd")
    rows.append(
        f"<tr><th>run</th><th>every story, this run</th>"
        f'<th class="n">{int(num(totals.get("run_input_tokens"))):,}</th>'
        f'<th class="n">{int(num(totals.get("run_output_tokens"))):,}</th><th></th>'
        f'<th class="n">{esc(f"${num(run_cost):.4f}" if run_cost is not None else "n/a")}</th>'
        "<th></th></tr>"
    )
    head = (
        "<tr><th>story</th><th>title</th><th class='n'>input tokens</th>"
        "<th class='n'>output tokens</th><th class='n'>calls</th><th class='n'>cost</th>"
        "<th>counted over</th></tr>"
    )
    return f'<table id="usage">{head}{"".join(rows)}</table>'


# --- events -------------------------------------------------------------------------------------
_SHOWN = ("time", "at_s", "action", "phase", "outcome", "attempt", "story", "run_id")


def _detail(event: Mapping[str, Any]) -> str:
    rest = {k: v for k, v in event.items() if k not in _SHOWN}
    if not rest:
        return ""
    return json.dumps(rest, ensure_ascii=False, default=str, indent=None)


def _events_table(events: Iterable[Mapping[str, Any]]) -> str:
    rows = []
    for e in events:
        at = e.get("at_s")
        style = ' style="background:#fff4e5"' if e.get("action") == "recovery" else ""
        rows.append(
            f"<tr{style}><td class='mono'>{esc(e.get('time'))}</td>"
            f'<td class="n">{esc(f"+{num(at):.3f}s" if at is not None else "")}</td>'
            f"<td>{esc(e.get('action'))}</td><td>{esc(e.get('phase'))}</td>"
            f"<td>{esc(e.get('outcome'))}</td>"
            f"<td class='mono detail'>{esc(_detail(e))}</td></tr>"
        )
    head = (
        "<tr><th>time</th><th class='n'>since start</th><th>action</th><th>phase</th>"
        "<th>outcome</th><th>details</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _story_section(story: Mapping[str, Any]) -> str:
    sid = str(story["id"])
    status = str(story.get("status"))
    colour = STATUS_COLOURS.get(status, "#333")
    events = story.get("events") or []
    left_out = int(num(story.get("events_left_out")))
    phases = "".join(
        f"<tr><td>{esc(p.get('phase'))}</td><td>{esc(p.get('attempt_label'))}</td>"
        f"<td>{esc(p.get('result') or 'running')}</td><td class='mono'>"
        f"{esc(p.get('started_at'))}</td><td class='mono'>{esc(p.get('ended_at'))}</td>"
        f"<td>{esc(p.get('worker'))}</td></tr>"
        for p in story.get("phases") or []
    )
    budget = story["budget"]
    facts = (
        f"attempts {esc(story.get('attempts'))} · recoveries in this run "
        f"{len(story.get('recoveries') or [])} · rejections {esc(story.get('rejections'))} · "
        f"bounces {esc(story.get('bounces'))} · errors {esc(story.get('errors'))} · budget "
        f"{esc(budget.get('total'))}/{esc(budget.get('limit'))}"
    )
    reason = (
        f"<p><b>Reason:</b> <span class='detail'>{esc(story.get('reason'))}</span></p>"
        if story.get("reason")
        else ""
    )
    more = f"<p class='sub'>{left_out} older events left out.</p>" if left_out else ""
    why = ""
    unverified = story.get("unverified") is True
    if status in ("skipped", "blocked", "failed", "waiting") and story.get("reason"):
        why = f'<span class="why">{esc(story.get("reason"))}</span> '  # the row says why
    reason += _tests_line(story.get("tests"))
    rounds = round_lines(story.get("pr_rounds") or [])
    if rounds:
        items = "".join(f"<li class='detail'>{esc(line)}</li>" for line in rounds)
        reason += f"<p><b>Pull request rounds:</b></p><ul>{items}</ul>"
    return (
        f'<details class="story" id="story-{esc(sid)}" data-story="{esc(sid)}">'
        f"<summary>{esc(sid)} · {esc(story.get('title'))} "
        f'<span class="badge" style="background:{colour}">{esc(status)}</span> '
        + (
            '<span class="why">unverified: nothing was built or tested</span> '
            if unverified
            else ""
        )
        + f"{why}"
        f'<span class="sub">{len(events)} events</span></summary><div>'
        f"<p>{facts}</p>{reason}"
        "<table><tr><th>phase</th><th>attempt</th><th>result</th><th>started</th>"
        f"<th>ended</th><th>worker</th></tr>{phases}</table>"
        f"<h3>Events</h3>{more}{_events_table(events)}</div></details>"
    )


def _tests_line(tests: Any) -> str:
    """The passing attempt's test counts against the base's, and the story's opt-out."""
    if not isinstance(tests, Mapping):
        return ""

    def shown(counts: Any) -> str:
        if not isinstance(counts, Mapping):
            return "unknown"
        return (
            f"{esc(counts.get('passed'))} passed, {esc(counts.get('failed'))} failed, "
            f"{esc(counts.get('skipped'))} skipped"
        )

    line = f"<b>Tests:</b> {shown(tests.get('counts'))} (base: {shown(tests.get('base_counts'))})"
    if tests.get("allow_test_changes"):
        line += " · <b>test changes allowed</b> (allow_test_changes: true)"
    stat = str(tests.get("diff_stat") or "")
    block = f"<pre class='detail'>{esc(stat)}</pre>" if stat else ""
    return f"<p>{line}</p>{block}"


def _run_events(report: Mapping[str, Any]) -> str:
    events = report.get("run_events") or []
    return (
        '<details class="log" id="run-events"><summary>The run\'s own event log '
        f'<span class="sub">{len(events)} events</span></summary><div>'
        f"{_events_table(events)}</div></details>"
    )


def write_html(path: Path, text: str) -> Path:
    """Written atomically (a temp file in the same folder, then a rename): a failure leaves
    whatever was there before, never half a report."""
    target = path.expanduser()
    if target.is_dir():
        raise UsageError(f"--html {path}: is a folder", hint="give a file name, e.g. report.html")
    if not target.parent.is_dir():
        raise UsageError(
            f"--html {path}: the folder {target.parent} does not exist",
            hint="create it first, or write the report somewhere else",
        )
    try:
        atomic_write_text(target, text)
    except OSError as exc:
        raise UsageError(
            f"--html {path}: cannot write the report: {exc.strerror or exc}",
            hint="choose a writable place for the report",
        ) from None
    return target.resolve()
