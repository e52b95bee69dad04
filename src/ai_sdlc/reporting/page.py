"""The run report page's frame: its Content-Security-Policy, CSS and script, the colours and
geometry its charts share, and the text helpers every part uses (escaping, numbers, durations).
Nothing here reads the report's data."""

from __future__ import annotations

import html
from typing import Any

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
ROW_H = 30
#: The width of a resumed run's idle gap on the time axes (not to scale).
GAP_W = 44
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
.timeline{background:#fff}
.tl-row{display:grid;grid-template-columns:230px minmax(0,1fr);align-items:center;gap:0 8px}
.tl-label{font-size:12px;line-height:15px;max-height:30px;overflow:hidden;text-decoration:none;
display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow-wrap:anywhere}
.tl-plot{position:relative;min-width:0}.tl-plot svg{width:100%}
.tl-note{position:absolute;left:6px;right:6px;top:50%;transform:translateY(-50%);font-size:12px;
line-height:15px;color:#444;overflow:hidden;display:-webkit-box;-webkit-line-clamp:2;
-webkit-box-orient:vertical;overflow-wrap:anywhere}
td.id{white-space:nowrap}
summary .why{font-weight:400;color:#444;overflow-wrap:anywhere}
.stop .earlier{color:#555}
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
