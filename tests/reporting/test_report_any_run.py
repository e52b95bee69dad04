"""`ai-sdlc report` for any run: a single-story run (`ai-sdlc run S-0001`) is reported as a run
of one story, `report S-0001` picks a story's latest run, `report` the latest run of any kind;
and the report's layout fixes (attempts named as the console names them, a skipped story's
reason, a resumed run's idle gap, the halt banner after a resume), all through the real CLI."""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.reporting.page import GAP_W, PLOT_W
from tests.conftest import run_cli
from tests.reporting.test_report import FAST, RULES, by_id
from tests.support.runs_support import (
    make_project,
    only_run,
    stop_or_explain,
    story_events,
    write_rules,
)
from tests.support.waits import wait_for_pid
from tests.workflow.parallel.test_parallel_runs import add_field

pytestmark = pytest.mark.e2e

LONG = (
    "Make the quarterly reconciliation export handle every currency the finance team listed, "
    "including the historical ones with three decimals, and keep the totals exact to the cent"
)


def report_json(root: Path, *which: str) -> dict[str, Any]:
    result = run_cli(root, "report", *which, "--json")
    assert result.returncode == 0, result.output
    return json.loads(result.stdout)


def test_a_single_story_run_is_reported_with_the_consoles_attempts(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["One", "Two"])
    ran = run_cli(root, "run", "S-0001")
    assert ran.returncode == 0, ran.output

    report = report_json(root)
    run = report["run"]
    assert run["mode"] == "single" and run["run_status"] == "completed"
    assert [s["id"] for s in report["stories"]] == ["S-0001"]
    story = report["stories"][0]
    assert story["status"] == "done"
    # Every phase the story's own log says started, in order, placed within the run.
    started = [e["phase"] for e in story_events(root, "S-0001") if e["action"] == "phase_started"]
    assert [p["phase"] for p in story["phases"]] == started
    assert all(
        0 <= p["start_s"] <= p["end_s"] <= report["span"]["seconds"] for p in story["phases"]
    )
    assert report["totals"]["attempts"] == len(started)
    # Named as the console named them while it ran ("implement · attempt 1 · retries 0/3").
    shown = re.findall(r"(?m)^\[S-0001\] (\w+) · (attempt .+)$", ran.stderr)
    assert [(p["phase"], p["attempt_label"]) for p in story["phases"]] == shown
    assert ("implement", "attempt 1 · retries 0/3") in shown

    # Kept apart from the multi-story runs: `runs` and `run --resume` do not see it.
    assert json.loads(run_cli(root, "runs", "--json").stdout) == {"runs": []}
    resume = run_cli(root, "run", "--resume", run["run_id"])
    assert resume.returncode == 1 and f"no run {run['run_id']}" in resume.stderr

    # Its HTML: the file's path is the data (stdout), the note about it goes to stderr.
    out = tmp_path / "single.html"
    result = run_cli(root, "report", "--html", str(out))
    assert result.returncode == 0, result.output
    assert (
        result.stdout == f"{out}\n" and f"Wrote the report of run {run['run_id']}" in result.stderr
    )
    page = out.read_text(encoding="utf-8")
    assert page.count('class="phase"') == len(started)
    assert "implement · attempt 1 · retries 0/3" in page  # the bar's tooltip, as the console
    assert "imp1" not in page
    # Stop conditions judge multi-story runs: none drawn for a single story's run.
    assert 'class="stop-chart"' not in page and "judge multi-story runs only" in page
    assert report["run"]["statistics"]["approved"] == 1


def test_report_of_a_story_picks_its_latest_run_of_either_kind(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["One", "Two", "Three"])
    assert run_cli(root, "run", "S-0001").returncode == 0
    assert run_cli(root, "run", "--batch", "S-0002").returncode == 0
    single = report_json(root, "S-0001")["run"]
    batch = only_run(root)
    assert single["mode"] == "single" and batch["mode"] == "batch"
    # No argument: the latest run of any kind (the batch), then the single run once newer.
    assert report_json(root)["run"]["run_id"] == batch["run_id"]
    assert report_json(root, "S-0002")["run"]["run_id"] == batch["run_id"]
    assert report_json(root, "s-1")["run"]["run_id"] == single["run_id"]  # any story reference
    assert report_json(root, single["run_id"])["run"]["run_id"] == single["run_id"]
    assert run_cli(root, "run", "S-0003").returncode == 0
    latest = report_json(root)
    assert latest["run"]["mode"] == "single" and [s["id"] for s in latest["stories"]] == ["S-0003"]
    # The summary is data too: on stdout.
    summary = run_cli(root, "report", "S-0001")
    assert summary.returncode == 0, summary.output
    assert summary.stdout.startswith(f"Run {single['run_id']} · single · completed")
    assert "S-0001  done" in summary.stdout

    # A story without a run, a story that does not exist, and neither a run nor a story.
    assert run_cli(root, "add", "Four").returncode == 0
    never = run_cli(root, "report", "S-0004")
    assert never.returncode == 1 and "no run of S-0004" in never.stderr
    assert "ai-sdlc run S-0004" in never.stderr
    for bad in ("S-0099", "not-a-story"):
        result = run_cli(root, "report", bad)
        assert result.returncode == 2, result.output
        assert "is not a run id" in result.stderr and "nor a story" in result.stderr
        assert "Traceback" not in result.output and result.stdout == ""


def test_a_single_run_that_blocks_its_story_keeps_the_reason_and_the_banner(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_project(root, ["Blocked by rate limits"], FAST)
    write_rules(root, "rules:\n  - phase: refine\n    fault: {kind: rate_limit, retry_after: 0}\n")
    ran = run_cli(root, "run", "S-0001")
    assert ran.returncode == 5, ran.output  # blocked
    report = report_json(root, "S-0001")
    story = report["stories"][0]
    assert story["status"] == "blocked" and story["budget"]["total"] == 10
    assert "Global recovery limit exceeded (10/10)" in story["reason"]
    out = tmp_path / "r.html"
    assert run_cli(root, "report", "S-0001", "--html", str(out)).returncode == 0
    page = out.read_text(encoding="utf-8")
    banner = re.search(r'<div class="stop" id="halt-banner">(.*?)</div>', page)
    assert banner and "Still blocked" in banner[1] and "S-0001" in banner[1]
    assert "Global recovery limit exceeded (10/10)" in banner[1]


# --- a halted, then resumed run ---------------------------------------------------------------
def halted_and_resumed(root: Path) -> dict[str, Any]:
    """Four stories: a long title (done), S-0002 blocked at the global recovery limit (the run
    halts), S-0003 reworked once, S-0004 depending on S-0002 (skipped). Then the run is resumed
    without unblocking S-0002: S-0004 is skipped again, the run completes, S-0002 still blocked."""
    make_project(
        root, [LONG, "Blocked by rate limits", "Reworked once", "Needs the blocked one"], FAST
    )
    write_rules(root, RULES)
    add_field(root, "S-0004", "dependencies: [S-0002]")
    # every remaining story is escalated (S-0002 blocked, S-0004 waiting on it): exit 5
    assert run_cli(root, "run", "--auto").returncode == 5
    run_id = only_run(root)["run_id"]
    resumed = run_cli(root, "run", "--resume", run_id)
    assert resumed.returncode == 5, resumed.output
    return only_run(root)


def shift_before(root: Path, run_id: str, cut: str, hours: float) -> None:
    """As if the run had been resumed `hours` later: every time the run and its stories recorded
    before `cut` (the resume) moves that far back (state, the run's and the stories' events)."""
    limit = dt.datetime.fromisoformat(cut.replace("Z", "+00:00"))
    stamp = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"')

    def earlier(match: re.Match[str]) -> str:
        moment = dt.datetime.fromisoformat(match[1].replace("Z", "+00:00"))
        if moment >= limit:
            return match[0]
        moved = (moment - dt.timedelta(hours=hours)).isoformat(timespec="milliseconds")
        return f'"{moved.replace("+00:00", "Z")}"'

    ai = root / ".ai-sdlc"
    files = [ai / "runs" / run_id / "state.json", ai / "runs" / run_id / "events.jsonl"]
    files += sorted((ai / "stories").glob("S-*/events.jsonl"))
    for path in files:
        path.write_text(stamp.sub(earlier, path.read_text()))


def test_after_a_resume_the_report_marks_the_gap_and_keeps_the_halt(tmp_path: Path) -> None:
    root = tmp_path / "p"
    state = halted_and_resumed(root)
    events = [
        json.loads(line)
        for line in (root / ".ai-sdlc/runs" / state["run_id"] / "events.jsonl").open()
    ]
    resumed_at = next(e["time"] for e in events if e["action"] == "run_resumed")
    shift_before(root, state["run_id"], resumed_at, hours=2)

    report = report_json(root)
    stories = by_id(report)
    assert {sid: s["status"] for sid, s in stories.items()} == {
        "S-0001": "done",
        "S-0002": "blocked",
        "S-0003": "done",
        "S-0004": "skipped",
    }
    # the resumed run found nothing left to do: S-0002 is still blocked...
    assert report["run"]["stop_reason"]["condition"] == "all_escalated"
    assert "nothing left to do" in report["run"]["stop_reason"]["message"]
    halt = report["halts"][0]  # ...and the first halt, the one that blocked S-0002, is kept
    assert halt["condition"] == "all_escalated" and halt["resumed_at"] == resumed_at
    [gap] = report["span"]["gaps"]
    assert 7200 <= gap["seconds"] < 7260
    assert gap["end_s"] == next(
        e["at_s"] for e in report["run_events"] if e["action"] == "run_resumed"
    )
    assert report["span"]["active_seconds"] == round(report["span"]["seconds"] - gap["seconds"], 3)
    assert report["span"]["active_seconds"] < 60

    out = tmp_path / "r.html"
    assert run_cli(root, "report", "--html", str(out)).returncode == 0
    page = out.read_text(encoding="utf-8")
    # The gap: one marked break per time axis (the timeline's rows and four stop charts), the
    # same few pixels wide whatever its length; the worked time fills the timeline instead.
    timeline = page[page.index('id="timeline-chart"') : page.index('id="budget"')]
    assert timeline.count('<g class="gap"') == 4  # one per story row
    assert f'width="{GAP_W:.1f}"' in timeline and "idle 2.0 h" in timeline
    assert page.count('<g class="gap"') == 4 + 4
    ends = [
        float(x) + float(w)
        for x, w in re.findall(r'class="phase" x="([\d.]+)" y="\d+" width="([\d.]+)"', timeline)
    ]
    # Drawn to scale, the first segment would end 0.04 % into the width; the break starts
    # where the worked time says (its share of the active time), after the last bar.
    gap_x = float(
        re.findall(r'<g class="gap" data-idle-s="[\d.]+"><rect x="([\d.]+)"', timeline)[0]
    )
    share = gap["start_s"] / report["span"]["active_seconds"]
    assert abs(gap_x - share * (PLOT_W - GAP_W)) <= 0.1
    assert share > 0.3  # the resumed segment only skipped a story: far shorter than the first
    assert 0.5 * gap_x < max(ends) <= gap_x + 0.1  # the bars spread over the first segment
    # The banner stays: the earlier halt and the story it left blocked.
    banner = re.search(r'<div class="stop" id="halt-banner">(.*?)</div>', page)
    assert banner, "no halt banner"
    assert "Stopped earlier by all_escalated" in banner[1] and f"resumed {resumed_at}" in banner[1]
    assert "Still blocked" in banner[1] and "#story-S-0002" in banner[1]
    # The skipped story's row and section give its reason.
    reason = "depends on S-0002, which is blocked"
    assert stories["S-0004"]["reason"] == reason
    row = re.search(r'<div class="tl-row" data-story="S-0004">(.*?)</div></div>', page)
    assert row and f"<b>skipped</b>: {reason}" in row[1]
    assert re.search(rf'id="story-S-0004".*?<summary>.*?{reason}.*?</summary>', page, re.S)
    # A long title: whole in the label (wrapped by the page) and in its tooltip.
    assert f'title="S-0001 {LONG} (done): ' in page and f"<b>S-0001</b> {LONG}</a>" in page


def test_a_single_run_stopped_by_ctrl_c_is_reported_as_interrupted(tmp_path: Path) -> None:
    """Ctrl-C in the implement phase's agent call (a real process, waited for by its marker):
    the run's record says it was interrupted, its phases up to there are drawn."""
    from tests.e2e.test_interrupts import GUARD, Point, _env, _kill_leftovers, _project, _start

    root, agent, verify = _project(tmp_path, Point("report", agent="implement"))
    proc = _start(root, "run", "S-0001")
    try:
        wait_for_pid(agent, timeout=GUARD)
        proc.send_signal(signal.SIGINT)
        _, stderr = stop_or_explain(proc, GUARD)
    finally:
        _kill_leftovers((agent, verify))
    assert proc.returncode == 130, stderr
    result = run_cli(root, "report", "S-0001", "--json", env=_env())
    assert result.returncode == 0, result.output
    report = json.loads(result.stdout)
    assert report["run"]["mode"] == "single" and report["run"]["run_status"] == "stopped"
    assert report["run"]["stop_reason"]["condition"] == "interrupted"
    phases = report["stories"][0]["phases"]
    assert [p["phase"] for p in phases] == ["refine", "research", "plan", "implement"]
    assert phases[-1]["attempt_label"] == "attempt 1 · retries 0/3"
    out = tmp_path / "r.html"
    assert run_cli(root, "report", "--html", str(out), env=_env()).returncode == 0
    assert "<b>Stopped by interrupted</b>" in out.read_text(encoding="utf-8")
