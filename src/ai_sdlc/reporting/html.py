"""The run report as one self-contained HTML file (`ai-sdlc report --html out.html`).

Everything is inline (CSS, SVG charts, a few lines of JS) and a Content-Security-Policy forbids
every fetch, so the file opens anywhere, offline, with nothing of the project at hand. Every
string that came from a story, a model or an event goes through `html.escape`; numbers are
formatted from floats. The data is `workflow.report.build_report`'s dict.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ai_sdlc.errors import UsageError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.reporting.data import recovery_kind_label

#: Phase colours (the timeline's bars), in workflow order.
PHASE_COLOURS = {
    "refine": "#8e7cc3",
    "research": "#6fa8dc",
    "plan": "#76a5af",
    "implement": "#e6b450",
    "rework": "#e69138",
    "review": "#6aa84f",
}
OTHER_PHASE = "#999999"
#: Recovery kinds' colours (the budget bars and the timeline's markers).
KIND_COLOURS = ["#cc4125", "#e69138", "#3d85c6", "#8e7cc3", "#45818e", "#a64d79", "#7f6000"]
#: Phase results drawn as a failure (red outline).
FAILED_RESULTS = frozenset(
    {"failed", "rejected", "blocked", "story_blocked", "rollback_initiated", "interrupted"}
)
STATUS_COLOURS = {
    "done": "#38761d",
    "blocked": "#cc0000",
    "failed": "#cc0000",
    "waiting": "#b45f06",
    "skipped": "#666666",
    "pending": "#666666",
    "in-progress": "#1155cc",
}

LABEL_W = 230
PLOT_W = 880
ROW_H = 26
AXIS_H = 24

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
background:#f6f7f9}
main{max-width:1160px;margin:0 auto;padding:18px 24px 48px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#555}.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:12px 14px}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.tile{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px 14px;min-width:96px}
.tile b{display:block;font-size:20px}.tile span{color:#666;font-size:12px}
.stop{border-left:4px solid #cc0000;background:#fff4f4;padding:8px 12px;margin:10px 0}
svg{display:block;max-width:100%;height:auto}svg text{font:11px system-ui,sans-serif}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e4e7eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
details.story,details.log{background:#fff;border:1px solid #dde1e6;border-radius:6px;margin:8px 0}
details.story>summary,details.log>summary{cursor:pointer;padding:8px 12px;font-weight:600}
details.story>div,details.log>div{padding:0 12px 12px}
.badge{display:inline-block;border-radius:10px;padding:0 8px;color:#fff;font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:12px;margin:6px 0;font-size:12px;color:#444}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;
vertical-align:-2px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.detail{white-space:pre-wrap;word-break:break-word;max-width:640px}
button{font:inherit;margin-right:6px}
a{color:#1155cc}
"""

#: Counts script errors into the page (a browser check reads `data-errors`), then wires the
#: expand/collapse buttons and opens the story a link points at.
ERROR_HOOK = (
    "window.addEventListener('error',function(){var d=document.documentElement;"
    "d.setAttribute('data-errors',String(Number(d.getAttribute('data-errors')||0)+1));});"
)
SCRIPT = """
(function(){
  function all(open){document.querySelectorAll('details').forEach(function(d){
    d.open=open;});}
  document.getElementById('expand-all').addEventListener('click',function(){all(true);});
  document.getElementById('collapse-all').addEventListener('click',function(){all(false);});
  function reveal(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
    var el=document.getElementById(id);if(el&&el.tagName==='DETAILS'){el.open=true;}}
  window.addEventListener('hashchange',reveal);reveal();
  document.documentElement.setAttribute('data-ready',
    String(document.querySelectorAll('details.story').length));
})();
"""


def esc(value: Any) -> str:
    """Any value as escaped text (None as an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def num(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def fmt_s(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(report: Mapping[str, Any]) -> str:
    """The whole page."""
    run = report["run"]
    kinds: list[str] = list(report.get("recovery_kinds") or [])
    colours = {k: KIND_COLOURS[i % len(KIND_COLOURS)] for i, k in enumerate(kinds)}
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
        _phase_legend(),
        _kind_legend(kinds, colours, "▼ recovery: "),
        f'<div class="card">{_timeline(report, colours)}</div>',
        '<h2 id="budget">Recovery budget per story</h2>',
        _kind_legend(kinds, colours, ""),
        f'<div class="card">{_budget(report, kinds, colours)}</div>',
        '<h2 id="stop-conditions">Stop conditions over time</h2>',
        _stop_charts(report),
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
    stop = run.get("stop_reason")
    if isinstance(stop, Mapping):
        out.append(
            f'<div class="stop"><b>Stopped by {esc(stop.get("condition"))}</b>: '
            f"{esc(stop.get('message'))}</div>"
        )
    if stats:
        out.append(
            f'<div class="sub">attempted {esc(stats.get("attempted"))} · approved '
            f"{esc(stats.get('approved'))} · rejected {esc(stats.get('rejected'))} · failed "
            f"{esc(stats.get('failed'))} · waiting {esc(stats.get('waiting'))} · retry rate "
            f"{num(stats.get('retry_rate')):.2f} · reject rate "
            f"{num(stats.get('reject_rate')):.2f}</div>"
        )
    return "\n".join(out)


def _phase_legend() -> str:
    items = "".join(
        f'<span><i style="background:{c}"></i>{esc(p)}</span>' for p, c in PHASE_COLOURS.items()
    )
    failed = '<span><i style="background:#fff;border:2px solid #cc0000"></i>failed attempt</span>'
    return f'<div class="legend">{items}{failed}</div>'


def _kind_legend(kinds: Sequence[str], colours: Mapping[str, str], prefix: str) -> str:
    if not kinds:
        return '<div class="legend">no recoveries in this run</div>'
    items = "".join(
        f'<span><i style="background:{colours[k]}"></i>{esc(prefix)}{esc(recovery_kind_label(k))}'
        "</span>"
        for k in kinds
    )
    return f'<div class="legend">{items}</div>'


# --- timeline ---------------------------------------------------------------------------------
def _ticks(span: float, count: int = 8) -> list[float]:
    """Round tick positions (seconds) over [0, span]."""
    if span <= 0:
        return [0.0]
    raw = span / count
    steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60]
    steps += [120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400]
    step = next((s for s in steps if s >= raw), steps[-1])
    ticks, t = [], 0.0
    while t <= span + 1e-9:
        ticks.append(round(t, 6))
        t += step
    return ticks


def _x(seconds: Any, span: float) -> float:
    return LABEL_W + (num(seconds) / span) * PLOT_W if span > 0 else LABEL_W


def _axis(span: float, top: float, height: float) -> list[str]:
    out = []
    for t in _ticks(span):
        x = _x(t, span)
        out.append(
            f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{top + height:.1f}" '
            'stroke="#e4e7eb"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{top + height + 14:.1f}" text-anchor="middle">'
            f"{esc(fmt_s(t) if t else '0')}</text>"
        )
    return out


def _timeline(report: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    stories = report["stories"]
    span = max(num(report["span"].get("seconds")), 0.001)
    height = ROW_H * max(len(stories), 1)
    out = [
        f'<svg id="timeline-chart" viewBox="0 0 {LABEL_W + PLOT_W + 10} {height + AXIS_H + 6}" '
        f'width="{LABEL_W + PLOT_W + 10}" role="img" aria-label="phases of each story over time">'
    ]
    out += _axis(span, 0, height)
    for row, story in enumerate(stories):
        y = row * ROW_H
        sid = str(story["id"])
        if row % 2:
            out.append(
                f'<rect x="0" y="{y}" width="{LABEL_W + PLOT_W}" height="{ROW_H}" fill="#f7f8fa"/>'
            )
        title = str(story.get("title") or "")
        label = f"{sid} {title}"
        short = label if len(label) <= 32 else label[:31] + "…"
        colour = STATUS_COLOURS.get(str(story.get("status")), "#333")
        out.append(
            f'<a href="#story-{esc(sid)}"><text class="row-label" x="4" y="{y + 17}" '
            f'fill="{colour}"><title>{esc(label)} ({esc(story.get("status"))})</title>'
            f"{esc(short)}</text></a>"
        )
        for phase in story.get("phases") or []:
            out.append(_phase_bar(phase, y, span, report))
        for rec in story.get("recoveries") or []:
            if rec.get("at_s") is None:
                continue
            x = _x(rec["at_s"], span)
            fill = colours.get(str(rec.get("kind")), "#000")
            out.append(
                f'<path class="recovery" d="M{x - 4:.1f},{y + 1} L{x + 4:.1f},{y + 1} '
                f'L{x:.1f},{y + 8} Z" fill="{fill}" stroke="#fff" stroke-width="0.5">'
                f"<title>{esc(recovery_kind_label(str(rec.get('kind'))))} "
                f"#{esc(rec.get('total'))} in {esc(rec.get('phase'))}: "
                f"{esc(rec.get('reason'))}</title></path>"
            )
    out.append("</svg>")
    return "".join(out)


def _phase_bar(phase: Mapping[str, Any], y: int, span: float, report: Mapping[str, Any]) -> str:
    start = phase.get("start_s")
    if start is None:
        return ""
    end = phase.get("end_s")
    ongoing = end is None
    end_s = num(report["span"].get("seconds")) if ongoing else num(end)
    x0, x1 = _x(start, span), _x(max(end_s, num(start)), span)
    width = max(x1 - x0, 2.0)
    name = str(phase.get("phase") or "")
    fill = PHASE_COLOURS.get(name, OTHER_PHASE)
    result = str(phase.get("result") or ("running" if ongoing else ""))
    failed = result in FAILED_RESULTS
    stroke = ' stroke="#cc0000" stroke-width="2"' if failed else ""
    attempt = phase.get("attempt")
    recs = phase.get("recoveries") or {}
    rec_text = ", ".join(f"{esc(k)} {esc(v)}" for k, v in recs.items())
    tip = (
        f"{esc(name)} attempt {esc(attempt)}: {esc(result)} "
        f"({esc(fmt_s(max(end_s - num(start), 0.0)))}) on {esc(phase.get('worker'))}"
        + (f"; recoveries: {rec_text}" if rec_text else "")
    )
    out = (
        f'<rect class="phase" x="{x0:.1f}" y="{y + 9}" width="{width:.1f}" height="{ROW_H - 12}" '
        f'rx="2" fill="{fill}"{stroke}><title>{tip}</title></rect>'
    )
    if width >= 22 and attempt is not None:
        out += (
            f'<text x="{x0 + 3:.1f}" y="{y + 21}" style="font-size:10px">{esc(name[:3])}'
            f"{esc(attempt)}</text>"
        )
    return out


# --- recovery budget ----------------------------------------------------------------------------
def _budget(report: Mapping[str, Any], kinds: Sequence[str], colours: Mapping[str, str]) -> str:
    stories = report["stories"]
    limit = num(report["limits"].get("global_recovery"), 10)
    top = max([limit, *(num(s["budget"].get("total")) for s in stories)]) * 1.08 or 1
    bar_h, gap = 16, 8
    height = (bar_h + gap) * max(len(stories), 1) + 8
    width = LABEL_W + PLOT_W + 10

    def x(v: float) -> float:
        return LABEL_W + v / top * PLOT_W

    out = [
        f'<svg id="budget-chart" viewBox="0 0 {width} {height + 22}" width="{width}" role="img" '
        'aria-label="recovery budget per story">'
    ]
    for row, story in enumerate(stories):
        y = 4 + row * (bar_h + gap)
        budget = story["budget"]
        total = num(budget.get("total"))
        out.append(
            f'<text x="4" y="{y + 12}">{esc(story["id"])} <title>{esc(story.get("title"))}'
            "</title></text>"
        )
        left = 0.0
        by_kind: Mapping[str, Any] = budget.get("by_kind") or {}
        for kind in kinds:
            n = num(by_kind.get(kind))
            if n <= 0:
                continue
            out.append(
                f'<rect class="budget" x="{x(left):.1f}" y="{y}" '
                f'width="{x(left + n) - x(left):.1f}" '
                f'height="{bar_h}" fill="{colours[kind]}"><title>{esc(story["id"])}: '
                f"{int(n)} {esc(recovery_kind_label(kind))}</title></rect>"
            )
            left += n
        if total > left:  # counted before a breakdown existed
            out.append(
                f'<rect x="{x(left):.1f}" y="{y}" width="{x(total) - x(left):.1f}" '
                f'height="{bar_h}" fill="#bbb"><title>{int(total - left)} unattributed</title>'
                "</rect>"
            )
        out.append(
            f'<text x="{x(max(total, 0)) + 4:.1f}" y="{y + 12}">{int(total)}/{int(limit)}</text>'
        )
    lx = x(limit)
    out.append(
        f'<line id="limit-line" x1="{lx:.1f}" y1="0" x2="{lx:.1f}" y2="{height}" '
        'stroke="#cc0000" stroke-width="2" stroke-dasharray="5,3"/>'
        f'<text x="{lx - 4:.1f}" y="{height + 14}" text-anchor="end" fill="#cc0000">'
        f"global limit {int(limit)} (limits.global_recovery)</text></svg>"
    )
    return "".join(out)


# --- stop conditions ----------------------------------------------------------------------------
def _stop_charts(report: Mapping[str, Any]) -> str:
    points = report.get("stop_figures") or []
    cond = report["limits"].get("stop_conditions") or {}
    span = max(num(report["span"].get("seconds")), 0.001)
    charts = [
        ("total_attempts", "Agent attempts", cond.get("max_total_attempts"), False),
        ("consecutive_fails", "Consecutive fails", cond.get("max_consecutive_fails"), False),
        ("reject_rate", "Reject rate", cond.get("max_reject_rate"), True),
        ("retry_rate", "Retry rate", cond.get("max_retry_rate"), True),
    ]
    note = (
        f'<p class="sub">Replayed from the run\'s events. Rates judge the stories with an outcome '
        f"in the current segment, and only once {esc(cond.get('min_attempted'))} were attempted "
        "(run.stop_conditions.min_attempted).</p>"
    )
    cells = "".join(
        f'<div class="card">{_step_chart(points, key, label, limit, rate, span)}</div>'
        for key, label, limit, rate in charts
    )
    return f'{note}<div class="grid2">{cells}</div>'


def _step_chart(
    points: Sequence[Mapping[str, Any]],
    key: str,
    label: str,
    limit: Any,
    rate: bool,
    span: float,
) -> str:
    w, h, left, top, bottom = 520, 150, 40, 20, 22
    values = [num(p.get(key)) for p in points]
    ceiling = max([*values, num(limit), 1.0]) * 1.1
    plot_w, plot_h = w - left - 10, h - top - bottom

    def px(t: Any) -> float:
        return left + num(t) / span * plot_w

    def py(v: float) -> float:
        return top + plot_h - v / ceiling * plot_h

    coords: list[str] = [f"{px(0):.1f},{py(0):.1f}"]
    last = 0.0
    for p, v in zip(points, values, strict=True):
        x = px(p.get("at_s"))
        coords += [f"{x:.1f},{py(last):.1f}", f"{x:.1f},{py(v):.1f}"]
        last = v
    coords.append(f"{px(span):.1f},{py(last):.1f}")
    shown = f"{last:.2f}" if rate else f"{int(last)}"
    out = [
        f'<svg class="stop-chart" data-figure="{esc(key)}" viewBox="0 0 {w} {h}" width="{w}" '
        f'role="img" aria-label="{esc(label)} over time">',
        f'<text x="{left}" y="13" style="font-weight:600">{esc(label)}: {esc(shown)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#999"/>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
        f'<text x="{left + plot_w}" y="{h - 6}" text-anchor="end">{esc(fmt_s(span))}</text>',
    ]
    if limit is not None:
        ly = py(num(limit))
        out.append(
            f'<line x1="{left}" y1="{ly:.1f}" x2="{left + plot_w}" y2="{ly:.1f}" stroke="#cc0000" '
            f'stroke-dasharray="5,3"/><text x="{left + plot_w}" y="{ly - 3:.1f}" '
            f'text-anchor="end" fill="#cc0000">limit {esc(limit)}</text>'
        )
    out.append(
        f'<polyline points="{" ".join(coords)}" fill="none" stroke="#1155cc" stroke-width="2"/>'
    )
    for p, v in zip(points, values, strict=True):
        if str(p.get("event", "")).startswith("story_"):
            out.append(
                f'<circle cx="{px(p.get("at_s")):.1f}" cy="{py(v):.1f}" r="3" fill="#1155cc">'
                f"<title>{esc(p.get('story'))} {esc(p.get('event'))} at {esc(p.get('time'))}: "
                f"{esc(label.lower())} {esc(p.get(key))}</title></circle>"
            )
    out.append("</svg>")
    return "".join(out)


# --- usage --------------------------------------------------------------------------------------
def _usage_table(report: Mapping[str, Any]) -> str:
    rows = []
    for s in report["stories"]:
        u = s["usage"]
        cost = u.get("cost_usd")
        scope = "this run" if u.get("scope") == "run" else "all runs of the story"
        rows.append(
            f'<tr><td><a href="#story-{esc(s["id"])}">{esc(s["id"])}</a></td>'
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
        f"<tr><td>{esc(p.get('phase'))}</td><td class='n'>{esc(p.get('attempt'))}</td>"
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
    reason += _tests_line(story.get("tests"))
    return (
        f'<details class="story" id="story-{esc(sid)}" data-story="{esc(sid)}">'
        f"<summary>{esc(sid)} · {esc(story.get('title'))} "
        f'<span class="badge" style="background:{colour}">{esc(status)}</span> '
        f'<span class="sub">{len(events)} events</span></summary><div>'
        f"<p>{facts}</p>{reason}"
        "<table><tr><th>phase</th><th class='n'>attempt</th><th>result</th><th>started</th>"
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
