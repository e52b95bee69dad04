"""The run report's SVG charts: the timeline of every story's phases and recoveries, the
recovery budget per story and the stop conditions over time, drawn from the report's data
(`reporting.data`) in the page's colours (`reporting.page`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ai_sdlc.reporting.data import recovery_kind_label
from ai_sdlc.reporting.page import (
    AXIS_H,
    FAILED_RESULTS,
    GAP_W,
    LABEL_W,
    OTHER_PHASE,
    PHASE_COLOURS,
    PLOT_W,
    ROW_H,
    STATUS_COLOURS,
    esc,
    fmt_s,
    num,
)


def phase_legend() -> str:
    items = "".join(
        f'<span><i style="background:{c}"></i>{esc(p)}</span>' for p, c in PHASE_COLOURS.items()
    )
    failed = '<span><i style="background:#fff;border:2px solid #cc0000"></i>failed attempt</span>'
    return f'<div class="legend">{items}{failed}</div>'


def kind_legend(kinds: Sequence[str], colours: Mapping[str, str], prefix: str) -> str:
    if not kinds:
        return '<div class="legend">no recoveries in this run</div>'
    items = "".join(
        f'<span><i style="background:{colours[k]}"></i>{esc(prefix)}{esc(recovery_kind_label(k))}'
        "</span>"
        for k in kinds
    )
    return f'<div class="legend">{items}</div>'


# --- time axis ---------------------------------------------------------------------------------
def _step(raw: float) -> float:
    steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60]
    steps += [120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400]
    return float(next((s for s in steps if s >= raw), steps[-1]))


class Axis:
    """Seconds since the run's start → x, over `width` pixels from `left`. A resumed run's idle
    gaps (`span.gaps`) are drawn as a break `gap_w` pixels wide, not to scale: the time the run
    worked fills the width."""

    def __init__(self, report: Mapping[str, Any], left: float, width: float, gap_w: float) -> None:
        span = report["span"]
        self.span = max(num(span.get("seconds")), 0.001)
        self.gaps = [
            (num(g.get("start_s")), num(g.get("end_s")))
            for g in span.get("gaps") or []
            if num(g.get("end_s")) > num(g.get("start_s"))
        ]
        self.left, self.gap_w = left, gap_w
        active = self.span - sum(b - a for a, b in self.gaps)
        self.scale = max(width - gap_w * len(self.gaps), 1.0) / max(active, 0.001)

    def x(self, seconds: Any) -> float:
        t = min(max(num(seconds), 0.0), self.span)
        px, last = 0.0, 0.0
        for a, b in self.gaps:
            if t <= a:
                break
            px += (a - last) * self.scale
            if t < b:
                return self.left + px + (t - a) / (b - a) * self.gap_w
            px += self.gap_w
            last = b
        return self.left + px + (t - last) * self.scale

    def segments(self) -> list[tuple[float, float]]:
        """The stretches the run worked, in seconds."""
        out, last = [], 0.0
        for a, b in self.gaps:
            out.append((last, a))
            last = b
        return [*out, (last, self.span)]

    def ticks(self, count: int = 8) -> list[float]:
        """Round ticks within the worked stretches (one step for all), none inside a gap."""
        step = _step(sum(b - a for a, b in self.segments()) / count)
        out: list[float] = []
        for a, b in self.segments():
            t = math.ceil(a / step - 1e-9) * step
            while t <= b + 1e-9:
                if not out or self.x(t) - self.x(out[-1]) >= 36:
                    out.append(round(t, 6))
                t += step
        return out

    def gap_marks(self, top: float, height: float) -> list[str]:
        out = []
        for a, b in self.gaps:
            x = self.x(a)
            out.append(
                f'<g class="gap" data-idle-s="{b - a:.3f}"><rect x="{x:.1f}" y="{top:.1f}" '
                f'width="{self.gap_w:.1f}" height="{height:.1f}" fill="#eceef1" '
                'stroke="#999" stroke-dasharray="3,2"/>'
                f"<title>idle {esc(fmt_s(b - a))}: the run was stopped, then resumed</title></g>"
            )
        return out


def _axis(axis: Axis, top: float, height: float) -> list[str]:
    out = []
    for t in axis.ticks():
        x = axis.x(t)
        out.append(
            f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{top + height:.1f}" '
            'stroke="#e4e7eb"/>'
        )
        anchor = "start" if x - axis.left < 12 else "middle"  # the first label stays in view
        out.append(
            f'<text x="{x:.1f}" y="{top + height + 14:.1f}" text-anchor="{anchor}">'
            f"{esc(fmt_s(t) if t else '0')}</text>"
        )
    return out


# --- timeline ---------------------------------------------------------------------------------
#: A blocked, skipped or failed story's row says why (and the reason is its label's tooltip).
_EXPLAINED = ("skipped", "blocked", "failed", "waiting", "pending")


def timeline(report: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    """One row per story: its label (HTML, so a long title wraps: two lines at most, the whole
    title in the tooltip) and its phases and recoveries (SVG); an axis row below; a resumed
    run's idle gaps as a marked break."""
    stories = report["stories"]
    axis = Axis(report, 0, PLOT_W, GAP_W)
    rows = []
    for n, story in enumerate(stories):
        sid = str(story["id"])
        title = str(story.get("title") or "")
        status = str(story.get("status"))
        reason = str(story.get("reason") or "")
        colour = STATUS_COLOURS.get(status, "#333")
        tip = f"{sid} {title} ({status})" + (f": {reason}" if reason else "")
        label = (
            f'<a class="tl-label" href="#story-{esc(sid)}" title="{esc(tip)}" '
            f'style="color:{colour}"><b>{esc(sid)}</b> {esc(title)}</a>'
        )
        bars = [f'<rect width="{PLOT_W}" height="{ROW_H}" fill="#f7f8fa"/>'] if n % 2 else []
        bars += _axis_lines(axis)
        bars += axis.gap_marks(0, ROW_H)
        for phase in story.get("phases") or []:
            bars.append(_phase_bar(phase, axis, report))
        for rec in story.get("recoveries") or []:
            if rec.get("at_s") is None:
                continue
            x = axis.x(rec["at_s"])
            fill = colours.get(str(rec.get("kind")), "#000")
            bars.append(
                f'<path class="recovery" d="M{x - 4:.1f},1 L{x + 4:.1f},1 '
                f'L{x:.1f},8 Z" fill="{fill}" stroke="#fff" stroke-width="0.5">'
                f"<title>{esc(recovery_kind_label(str(rec.get('kind'))))} "
                f"#{esc(rec.get('total'))} in {esc(rec.get('phase'))}: "
                f"{esc(rec.get('reason'))}</title></path>"
            )
        note = ""
        if status in _EXPLAINED and not story.get("phases"):
            note = (
                f'<div class="tl-note" title="{esc(reason)}"><b>{esc(status)}</b>'
                + (f": {esc(reason)}" if reason else "")
                + "</div>"
            )
        rows.append(
            f'<div class="tl-row" data-story="{esc(sid)}">{label}<div class="tl-plot">'
            f'<svg viewBox="0 0 {PLOT_W} {ROW_H}" width="{PLOT_W}" role="img" '
            f'aria-label="phases of {esc(sid)} over time">{"".join(bars)}</svg>{note}</div></div>'
        )
    ticks = _axis(axis, 0, 4)
    rows.append(
        '<div class="tl-row tl-axis"><span></span><div class="tl-plot">'
        f'<svg viewBox="0 0 {PLOT_W} {AXIS_H}" width="{PLOT_W}">{"".join(ticks)}'
        f"{''.join(_gap_labels(axis))}</svg></div></div>"
    )
    return f'<div id="timeline-chart" class="timeline">{"".join(rows)}</div>'


def _axis_lines(axis: Axis) -> list[str]:
    return [
        f'<line x1="{axis.x(t):.1f}" y1="0" x2="{axis.x(t):.1f}" y2="{ROW_H}" stroke="#e4e7eb"/>'
        for t in axis.ticks()
    ]


def _gap_labels(axis: Axis) -> list[str]:
    return [
        f'<text class="gap-label" x="{axis.x(a) + axis.gap_w / 2:.1f}" y="{AXIS_H - 2}" '
        f'text-anchor="middle" fill="#555">idle {esc(fmt_s(b - a))}</text>'
        for a, b in axis.gaps
    ]


def _phase_bar(phase: Mapping[str, Any], axis: Axis, report: Mapping[str, Any]) -> str:
    start = phase.get("start_s")
    if start is None:
        return ""
    end = phase.get("end_s")
    ongoing = end is None
    end_s = num(report["span"].get("seconds")) if ongoing else num(end)
    x0, x1 = axis.x(start), axis.x(max(end_s, num(start)))
    width = max(x1 - x0, 2.0)
    name = str(phase.get("phase") or "")
    fill = PHASE_COLOURS.get(name, OTHER_PHASE)
    result = str(phase.get("result") or ("running" if ongoing else ""))
    failed = result in FAILED_RESULTS
    stroke = ' stroke="#cc0000" stroke-width="2"' if failed else ""
    attempt = str(phase.get("attempt_label") or "")
    recs = phase.get("recoveries") or {}
    rec_text = ", ".join(f"{esc(k)} {esc(v)}" for k, v in recs.items())
    tip = (
        f"{esc(name)} · {esc(attempt)}: {esc(result)} "
        f"({esc(fmt_s(max(end_s - num(start), 0.0)))}) on {esc(phase.get('worker'))}"
        + (f"; recoveries: {rec_text}" if rec_text else "")
    )
    out = (
        f'<rect class="phase" x="{x0:.1f}" y="9" width="{width:.1f}" height="{ROW_H - 12}" '
        f'rx="2" fill="{fill}"{stroke}><title>{tip}</title></rect>'
    )
    # The console's words ("implement · attempt 1/4"), as much of them as the bar holds.
    for text in (f"{name} · {attempt}", attempt, attempt.removeprefix("attempt ")):
        if text and len(text) * 5.6 + 6 <= width:
            out += (
                f'<text class="attempt" x="{x0 + 3:.1f}" y="{ROW_H - 5}" '
                f'style="font-size:10px">{esc(text)}</text>'
            )
            break
    return out


# --- recovery budget ----------------------------------------------------------------------------
def budget(report: Mapping[str, Any], kinds: Sequence[str], colours: Mapping[str, str]) -> str:
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
def stop_charts(report: Mapping[str, Any]) -> str:
    points = report.get("stop_figures") or []
    cond = report["limits"].get("stop_conditions") or {}
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
        f'<div class="card">{_step_chart(points, key, label, limit, rate, report)}</div>'
        for key, label, limit, rate in charts
    )
    return f'{note}<div class="grid2">{cells}</div>'


def _step_chart(
    points: Sequence[Mapping[str, Any]],
    key: str,
    label: str,
    limit: Any,
    rate: bool,
    report: Mapping[str, Any],
) -> str:
    w, h, left, top, bottom = 520, 150, 40, 20, 22
    values = [num(p.get(key)) for p in points]
    ceiling = max([*values, num(limit), 1.0]) * 1.1
    plot_w, plot_h = w - left - 10, h - top - bottom
    axis = Axis(report, left, plot_w, 12)
    px, span = axis.x, axis.span

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
        *axis.gap_marks(top, plot_h),
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
