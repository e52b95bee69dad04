"""The HTML run report in a real browser: headless Chromium (Debian's package) opens the file a
real run's `ai-sdlc report --html` wrote and must render it without a console error, showing
every story of the run. Skipped only when no Chromium binary is installed (`.ci/run` installs
one where it can)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.reporting.test_report import report_project
from tests.reporting.test_report_any_run import LONG, halted_and_resumed
from tests.support.runs_support import make_project, only_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_browser = pytest.mark.skipif(
    BROWSER is None,
    reason="no chromium binary on PATH (install Debian's 'chromium' package; .ci/run does)",
)


@pytest.fixture(scope="module")
def auto_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(project, report): `run --auto` over three stories (S-0002 blocked at the recovery limit,
    the rest done) and its `report --html`, made once; the tests only read them."""
    folder = tmp_path_factory.mktemp("auto")
    root = report_project(folder / "p")
    ran = run_cli(root, "run", "--auto")
    assert ran.returncode == 5, ran.output  # S-0002 blocked at the recovery limit, the rest done
    out = folder / "report.html"
    result = run_cli(root, "report", "--html", str(out))
    assert result.returncode == 0, result.output
    return root, out


@pytest.fixture(scope="module")
def resumed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a resumed run with a long title, a skipped story and one still blocked,
    made once; the tests lay out copies of it."""
    folder = tmp_path_factory.mktemp("resumed")
    root = folder / "p"
    halted_and_resumed(root)
    out = folder / "report.html"
    assert run_cli(root, "report", "--html", str(out)).returncode == 0
    return out


#: Console messages (console.* calls, uncaught errors, CSP refusals) as Chromium logs them.
CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)")


def open_in_chromium(
    page: Path, profile: Path, width: int = 1280, height: int = 900
) -> tuple[str, list[str]]:
    """(the rendered DOM after scripts ran, the console messages) of `page`, in a window of
    `width` × `height` pixels."""
    assert BROWSER is not None
    profile.mkdir()
    proc = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={width},{height}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, CONSOLE.findall(proc.stderr)


@needs_browser
def test_the_report_renders_in_chromium_without_errors_showing_every_story(
    auto_report: tuple[Path, Path], tmp_path: Path
) -> None:
    root, out = auto_report
    stories = only_run(root)["stories"]
    assert {s["story_id"]: s["status"] for s in stories} == {
        "S-0001": "done",
        "S-0002": "blocked",
        "S-0003": "done",
    }

    dom, console = open_in_chromium(out, tmp_path / "profile")
    assert console == []
    assert 'data-errors="' not in dom
    # The page's script ran to its end and counted one section per story of the run.
    assert re.search(r'<html[^>]* data-ready="3"', dom), dom[:400]
    shown = re.findall(r'<details class="story" id="story-([^"]+)"', dom)
    assert shown == [s["story_id"] for s in stories]
    for s in stories:
        assert f'href="#story-{s["story_id"]}"' in dom  # its timeline row links to its events
    assert dom.count('class="phase"') == sum(len(s["phases"]) for s in stories)
    assert dom.count('class="recovery"') == 11  # ten API retries, one rework
    # The model's feedback is text in the page, not a script that ran.
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in dom


@needs_browser
def test_the_browser_check_sees_a_script_error_and_a_blocked_fetch(
    auto_report: tuple[Path, Path], tmp_path: Path
) -> None:
    """The check above can fail: a page with a script error and a fetch its policy refuses
    (the report's own policy) is caught by both the console log and the page's error hook."""
    _, out = auto_report
    page = out.read_text(encoding="utf-8")
    broken = page.replace(
        "</main>", '</main><img src="https://example.invalid/x.png"><script>nope();</script>'
    )
    bad = tmp_path / "broken.html"
    bad.write_text(broken, encoding="utf-8")
    dom, console = open_in_chromium(bad, tmp_path / "profile")
    assert any("nope is not defined" in line for line in console), console
    assert any("Content Security Policy" in line for line in console), console
    assert 'data-errors="1"' in dom


#: Appended to a copy of the page: measures, in the browser, what the layout fixes promise and
#: writes it into the DOM (`--dump-dom` then carries it out).
MEASURE = """<script>(function(){
  function box(e){var r=e.getBoundingClientRect();return {sw:e.scrollWidth,cw:e.clientWidth,
    h:e.offsetHeight,left:r.left,right:r.right,width:r.width,title:e.getAttribute('title'),
    text:e.textContent};}
  function all(sel){return Array.prototype.map.call(document.querySelectorAll(sel),box);}
  var rows=Array.prototype.map.call(
    document.querySelectorAll('#timeline-chart .tl-row[data-story]'),function(r){
      return {story:r.getAttribute('data-story'),label:box(r.querySelector('.tl-label')),
      plot:box(r.querySelector('.tl-plot'))};});
  var d=document.documentElement;
  var out={rows:rows,notes:all('.tl-note'),banner:all('#halt-banner'),gaps:all('g.gap rect'),
    why:all('details.story summary .why'),page:{sw:d.scrollWidth,cw:d.clientWidth}};
  var pre=document.createElement('pre');pre.id='measured';pre.textContent=JSON.stringify(out);
  document.body.appendChild(pre);})();</script>"""


def measured(page: Path, tmp: Path, name: str, width: int, css: str = "") -> dict[str, Any]:
    """The layout of `page` as Chromium lays it out `width` pixels wide (`css` added last)."""
    text = page.read_text(encoding="utf-8").replace(
        "</body>", f"<style>{css}</style>{MEASURE}</body>" if css else f"{MEASURE}</body>"
    )
    copy = tmp / f"{name}.html"
    copy.write_text(text, encoding="utf-8")
    dom, console = open_in_chromium(copy, tmp / f"profile-{name}", width=width)
    assert console == [] and 'data-errors="' not in dom, console
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    result: dict[str, Any] = json.loads(html.unescape(found[1]))
    return result


@needs_browser
@pytest.mark.parametrize("width", [1280, 800])
def test_layout_fixes_hold_in_chromium(resumed_report: Path, tmp_path: Path, width: int) -> None:
    """A resumed run with a long title, a skipped story and a story still blocked, laid out by
    Chromium: no label or note overflows its box or runs into the bars, the whole title is in
    the label and its tooltip, the skipped row says why, the idle gap is drawn, the banner shows,
    and nothing makes the page scroll sideways."""
    m = measured(resumed_report, tmp_path, "fixed", width)

    assert [r["story"] for r in m["rows"]] == ["S-0001", "S-0002", "S-0003", "S-0004"]
    for row in m["rows"]:
        label, plot = row["label"], row["plot"]
        assert label["sw"] <= label["cw"], row  # wraps, never overflows sideways
        assert label["right"] <= plot["left"] + 0.5, row  # never over the bars
        assert label["h"] > 0 and plot["width"] > 200, row
    first = m["rows"][0]["label"]
    assert LONG in first["text"] and LONG in first["title"]
    [note] = m["notes"]
    assert note["h"] > 0 and note["sw"] <= note["cw"]
    assert note["text"] == "skipped: depends on S-0002, which is blocked"
    assert any("depends on S-0002, which is blocked" in w["text"] for w in m["why"])
    [banner] = m["banner"]
    assert banner["h"] > 0 and "Still blocked: S-0002" in banner["text"]
    assert "Stopped earlier by all_escalated" in banner["text"]
    assert len(m["gaps"]) == 8 and all(g["width"] > 3 for g in m["gaps"])
    assert m["page"]["sw"] <= m["page"]["cw"], m["page"]


@needs_browser
def test_the_layout_check_sees_a_title_that_overflows(resumed_report: Path, tmp_path: Path) -> None:
    """The check above can fail: the labels without wrapping (as a title on one line) overflow,
    and the browser's numbers say so."""
    css = ".tl-label{white-space:nowrap;display:block}"
    m = measured(resumed_report, tmp_path, "nowrap", 1280, css)
    label = m["rows"][0]["label"]
    assert label["sw"] > label["cw"], label


@needs_browser
def test_a_single_story_runs_report_renders_in_chromium(tmp_path: Path) -> None:
    """`ai-sdlc run S-0001`'s report (no stop-condition charts) renders without an error, its
    one story's row laid out like any other."""
    root = tmp_path / "p"
    make_project(root, [LONG])
    assert run_cli(root, "run", "S-0001").returncode == 0
    out = tmp_path / "single.html"
    result = run_cli(root, "report", "S-0001", "--html", str(out))
    assert result.returncode == 0 and result.stdout == f"{out}\n", result.output
    m = measured(out, tmp_path, "single", 1280)
    [row] = m["rows"]
    assert row["story"] == "S-0001" and LONG in row["label"]["title"]
    assert (
        row["label"]["sw"] <= row["label"]["cw"]
        and row["label"]["right"] <= row["plot"]["left"] + 0.5
    )
    assert m["banner"] == [] and m["gaps"] == []
    assert m["page"]["sw"] <= m["page"]["cw"]
