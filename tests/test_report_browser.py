"""The HTML run report in a real browser: headless Chromium (Debian's package) opens the file a
real run's `ai-sdlc report --html` wrote and must render it without a console error, showing
every story of the run. Skipped only when no Chromium binary is installed (`.ci/run` installs
one where it can)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.runs_support import only_run
from tests.test_report import report_project

pytestmark = pytest.mark.slow

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_browser = pytest.mark.skipif(
    BROWSER is None,
    reason="no chromium binary on PATH (install Debian's 'chromium' package; .ci/run does)",
)

#: Console messages (console.* calls, uncaught errors, CSP refusals) as Chromium logs them.
CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)")


def open_in_chromium(page: Path, profile: Path) -> tuple[str, list[str]]:
    """(the rendered DOM after scripts ran, the console messages) of `page`."""
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
    tmp_path: Path,
) -> None:
    root = report_project(tmp_path / "p")
    ran = run_cli(root, "run", "--auto")
    assert ran.returncode == 6, ran.output  # halted: S-0002 blocked at the recovery limit
    out = tmp_path / "report.html"
    result = run_cli(root, "report", "--html", str(out))
    assert result.returncode == 0, result.output
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
def test_the_browser_check_sees_a_script_error_and_a_blocked_fetch(tmp_path: Path) -> None:
    """The check above can fail: a page with a script error and a fetch its policy refuses
    (the report's own policy) is caught by both the console log and the page's error hook."""
    root = report_project(tmp_path / "p")
    run_cli(root, "run", "--auto")
    out = tmp_path / "report.html"
    assert run_cli(root, "report", "--html", str(out)).returncode == 0
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
