"""`ai-sdlc report`: a run's report as data (`--json`) and as one self-contained HTML file,
through the real CLI on real runs (one at a time, and parallel in a real git repository)."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.support.git_support import git_env, make_repo  # noqa: F401  (fixture)
from tests.support.runs_support import (
    frontmatter,
    make_project,
    only_run,
    run_states,
    story_events,
    write_config,
    write_rules,
)

pytestmark = pytest.mark.e2e

#: The API retries of a rate-limited phase are quick and plenty, so a story hammered by them
#: reaches the global recovery limit (10) inside one attempt and is blocked.
FAST = (
    "resilience:\n  policies:\n    llm:\n      max_attempts: 100\n"
    "      initial_delay: 0.001\n      max_delay: 0.002\n      jitter: 0\n"
    "      breaker:\n        failure_threshold: 1000\n"
    "  budget:\n    enabled: false\n"
    "run:\n  cooldown_seconds: 0\n  max_story_errors: 20\n"
    "  stop_conditions:\n    max_consecutive_fails: 20\n"
)
TITLE = 'Greet <b>users</b> & "friends"'
FEEDBACK = "needs <script>alert('x')</script> tests"
RULES = (
    "rules:\n"
    "  - phase: refine\n    story: S-0002\n    fault: {kind: rate_limit, retry_after: 0}\n"
    "  - phase: review\n    story: S-0003\n    times: 1\n    decision: REJECTED\n"
    f"    feedback: {json.dumps(FEEDBACK)}\n"
)


def report_project(root: Path) -> Path:
    """Three stories: S-0001 done (a title full of HTML), S-0002 blocked at the global recovery
    limit by API retries, S-0003 done after one rework (review feedback full of HTML)."""
    make_project(root, [TITLE, "Blocked by rate limits", "Reworked once"], FAST)
    write_rules(root, RULES)
    return root


def run_and_report(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the project (`run --auto`: it finishes what it can; the blocked story's code, 5)
    and report it."""
    ran = run_cli(root, "run", "--auto")
    assert ran.returncode == 5, ran.output
    result = run_cli(root, "report", "--json")
    assert result.returncode == 0, result.output
    return json.loads(result.stdout), only_run(root)


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in report["stories"]}


FIGURES = (
    "attempted",
    "approved",
    "blocked",
    "failed",
    "waiting",
    "retried",
    "retry_rate",
    "reject_rate",
    "consecutive_fails",
    "total_attempts",
)


def test_json_report_of_a_run_with_a_blocked_and_a_reworked_story(tmp_path: Path) -> None:
    root = report_project(tmp_path / "p")
    report, state = run_and_report(root)
    assert report["format"] == "ai-sdlc/run-report" and report["version"] == 1
    assert report["run"]["run_id"] == state["run_id"]
    assert report["run"]["stop_reason"]["condition"] == "all_escalated"
    stories = by_id(report)
    assert list(stories) == ["S-0001", "S-0002", "S-0003"]
    assert [stories[s]["status"] for s in stories] == ["done", "blocked", "done"]
    assert stories["S-0001"]["title"] == TITLE

    # The blocked story: ten API retries in this run, its budget full at the limit.
    blocked = stories["S-0002"]
    fm = frontmatter(root, "S-0002")
    assert blocked["budget"] == {
        "total": fm["total_recovery_attempts"],
        "by_kind": dict(fm["recovery_breakdown"]),
        "limit": 10,
    }
    assert blocked["budget"]["total"] == 10
    assert blocked["recoveries_by_kind"] == {"api_retry": 10}
    assert [r["total"] for r in blocked["recoveries"]] == list(range(1, 11))
    assert "Global recovery limit exceeded (10/10)" in blocked["reason"]
    # The reworked story: one rework, carrying the review's feedback.
    reworked = stories["S-0003"]
    assert reworked["recoveries_by_kind"] == {"rework": 1}
    assert reworked["recoveries"][0]["reason"] == FEEDBACK
    assert [(p["phase"], p["attempt"], p["result"]) for p in reworked["phases"]][-3:] == [
        ("review", 1, "rejected"),
        ("rework", 1, "passed"),
        ("review", 2, "approved"),
    ]
    assert report["recovery_kinds"] == ["rework", "api_retry"]

    # Timeline: the run state's phases, placed in seconds from the run's start, in order.
    saved = {s["story_id"]: s for s in state["stories"]}
    for sid, story in stories.items():
        assert [p["started_at"] for p in story["phases"]] == [
            p["started_at"] for p in saved[sid]["phases"]
        ]
        for phase in story["phases"]:
            assert 0 <= phase["start_s"] <= phase["end_s"] <= report["span"]["seconds"]
        assert story["events"] == [
            {**e, "at_s": story["events"][i]["at_s"]} for i, e in enumerate(story_events(root, sid))
        ]

    # Stop conditions replayed from the events end where the run's own statistics ended.
    figures = report["stop_figures"]
    assert {k: figures[-1][k] for k in FIGURES} == {k: state["statistics"][k] for k in FIGURES}
    attempts = [p["total_attempts"] for p in figures]
    assert attempts == sorted(attempts) and attempts[-1] == state["counters"]["total_attempts"]
    assert [p["at_s"] for p in figures] == sorted(p["at_s"] for p in figures)

    # Usage: each story's recorded usage (all of it spent in this run), the run's totals.
    for sid, story in stories.items():
        recorded = frontmatter(root, sid).get("usage") or {}
        assert story["usage"]["scope"] == "run"
        assert story["usage"]["input_tokens"] == recorded.get("input_tokens", 0)
        assert story["usage"]["output_tokens"] == recorded.get("output_tokens", 0)
    assert report["totals"]["run_input_tokens"] == state["counters"]["input_tokens"]
    assert report["totals"]["recoveries_in_run"] == 11


def test_html_report_is_self_contained_and_escapes_what_stories_and_models_wrote(
    tmp_path: Path,
) -> None:
    root = report_project(tmp_path / "p")
    run_and_report(root)
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    result = run_cli(root, "report", "--html", str(out))
    assert result.returncode == 0, result.output
    assert f"to {out}" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # Every story, with its events readable in the file itself.
    for sid in ("S-0001", "S-0002", "S-0003"):
        assert f'id="story-{sid}"' in page and f'href="#story-{sid}"' in page
    assert page.count('class="phase"') == sum(len(s["phases"]) for s in only_run(root)["stories"])
    assert page.count('class="recovery"') == 11
    assert page.count('id="limit-line"') == 1 and page.count('class="stop-chart"') == 4
    # Escaped: the title and the model's feedback appear as text, never as markup.
    assert "Greet &lt;b&gt;users&lt;/b&gt; &amp; &quot;friends&quot;" in page
    assert "<b>users</b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<script>alert" not in page
    # Self-contained: nothing fetched at view time (and the page's own policy forbids it).
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert "Content-Security-Policy" in page and "default-src &#x27;none&#x27;" in page


def test_report_defaults_to_the_latest_run_and_prints_a_summary(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["One", "Two"])
    assert run_cli(root, "run", "--batch", "S-0001").returncode == 0
    assert run_cli(root, "run", "--batch", "S-0002").returncode == 0
    first, latest = (s["run_id"] for s in run_states(root))
    report = json.loads(run_cli(root, "report", "--json").stdout)
    assert report["run"]["run_id"] == latest
    assert [s["id"] for s in report["stories"]] == ["S-0002"]
    named = json.loads(run_cli(root, "report", first, "--json").stdout)
    assert [s["id"] for s in named["stories"]] == ["S-0001"]
    summary = run_cli(root, "report")
    assert summary.returncode == 0, summary.output
    assert f"Run {latest} · batch · completed" in summary.stdout
    assert "S-0002  done" in summary.stdout and "budget 0/10" in summary.stdout


def test_unknown_or_bad_run_ids_and_no_runs_are_errors(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["One"])
    none = run_cli(root, "report")
    assert none.returncode == 1 and "no runs in" in none.stderr
    unknown = run_cli(root, "report", "20250101T000000Z-abcdef")
    shown = run_cli(root, "runs", "show", "20250101T000000Z-abcdef")
    assert unknown.returncode == shown.returncode == 1
    assert "no run 20250101T000000Z-abcdef" in unknown.stderr
    bad = run_cli(root, "report", "../../etc", "--html", str(tmp_path / "x.html"))
    assert bad.returncode == 2 and "is not a run id" in bad.stderr
    assert not (tmp_path / "x.html").exists()
    for result in (none, unknown, bad):
        assert "Traceback" not in result.output


@pytest.mark.parametrize("where", ["missing-folder", "under-a-file", "a-folder"])
def test_an_unwritable_output_path_is_a_clear_error_and_nothing_is_written(
    tmp_path: Path, where: str
) -> None:
    root = tmp_path / "p"
    make_project(root, ["One"])
    assert run_cli(root, "run", "--auto").returncode == 0
    blocker = tmp_path / "file.txt"
    blocker.write_text("keep me\n")
    (tmp_path / "folder").mkdir()
    target = {
        "missing-folder": tmp_path / "nowhere" / "r.html",
        "under-a-file": blocker / "r.html",
        "a-folder": tmp_path / "folder",
    }[where]
    before = sorted(
        p.relative_to(tmp_path) for p in tmp_path.rglob("*") if ".ai-sdlc" not in str(p)
    )
    result = run_cli(root, "report", "--html", str(target))
    assert result.returncode == 2, result.output
    assert "--html" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.output
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if ".ai-sdlc" not in str(p))
    assert after == before and blocker.read_text() == "keep me\n"


def test_a_failed_write_keeps_the_previous_report_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    make_project(root, ["One"])
    assert run_cli(root, "run", "--auto").returncode == 0
    out = tmp_path / "report.html"
    out.write_text("previous report\n")

    # The disk fills up: the atomic writer's temp file cannot be made durable.
    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    result = run_cli(root, "report", "--html", str(out))
    assert result.returncode == 2, result.output
    assert "No space left on device" in result.stderr
    assert out.read_text() == "previous report\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report.html")] == []


def test_report_of_a_parallel_run_replays_the_same_statistics(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    for title in ("Alpha", "Blocked by rate limits", "Reworked once", "Delta"):
        repo.story(title)
    write_config(repo.root, FAST)
    write_rules(repo.root, "delay: 0.05\n" + RULES)
    ran = run_cli(repo.root, "run", "--auto", "--jobs", "2")
    assert ran.returncode == 5, ran.output
    state = only_run(repo.root)
    report = json.loads(run_cli(repo.root, "report", "--json").stdout)
    assert report["run"]["jobs"] == 2 and report["run"]["executor"] == "local"
    assert [s["id"] for s in report["stories"]] == ["S-0001", "S-0002", "S-0003", "S-0004"]
    figures = report["stop_figures"]
    assert {k: figures[-1][k] for k in FIGURES} == {k: state["statistics"][k] for k in FIGURES}
    workers = {p["worker"] for s in report["stories"] for p in s["phases"]}
    assert len(workers) >= 2 and all(w.startswith("local:") for w in workers), workers
    assert by_id(report)["S-0002"]["budget"]["total"] == 10
    # The workers' attempts reach the timeline as the console names them.
    implements = [p for s in report["stories"] for p in s["phases"] if p["phase"] == "implement"]
    assert implements and all(p["step"] is not None and p["of"] == 4 for p in implements)
    assert {p["attempt_label"] for p in implements} == {"attempt 1 · retries 0/3"}
