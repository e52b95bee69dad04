"""Issue 26 item 11 through the real CLI: the run-wide cap (`max_total_attempts`) counts
attempts at the work (implement and rework, first ones included), not phase calls, so a healthy
backlog is not halted after 8 stories; the halt names what is left and how to go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project, only_run, phases_started, story_states

pytestmark = pytest.mark.e2e


def test_the_default_cap_lets_a_healthy_run_finish_about_fifty_stories(tmp_path: Path) -> None:
    root = tmp_path / "p"
    sids = [f"S-{n:04d}" for n in range(1, 61)]
    make_project(root, [f"Story {n}" for n in range(1, 61)])
    result = run_cli(root, "run", "--auto", timeout=600)
    assert result.returncode == 6, result.output
    state = only_run(root)
    assert state["stop_reason"]["condition"] == "max_total_attempts"
    implements = sum(phases_started(root, sid).count("implement") for sid in sids)
    assert implements == 50
    stories = story_states(state)
    done = [sid for sid in sids if stories[sid]["status"] == "done"]
    assert len(done) == 50
    assert state["counters"]["implementation_attempts"] == 50
    assert state["counters"]["total_attempts"] == 50 * 5  # every phase call, as before
    assert "the run made 50 implementation attempts" in result.stderr
    assert "10 stories are left" in result.stderr
    assert "ai-sdlc run --continue" in result.stderr and "--max-attempts N" in result.stderr

    # `run --continue` goes on: the cap counts each segment afresh (an operator's decision).
    resumed = run_cli(root, "run", "--continue", timeout=300)
    assert resumed.returncode == 0, resumed.output
    final = only_run(root)
    assert final["run_status"] == "completed"
    assert all(s["status"] == "done" for s in final["stories"])
    assert final["counters"]["implementation_attempts"] == 60


def test_max_attempts_sets_the_cap_for_one_run(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["A", "B", "C"])
    result = run_cli(root, "run", "--auto", "--max-attempts", "2")
    assert result.returncode == 6, result.output
    state = only_run(root)
    assert [s["status"] for s in state["stories"]] == ["done", "done", "pending"]
    assert (state["stop_reason"]["value"], state["stop_reason"]["threshold"]) == (2, 2)
    assert "1 story is left" in result.stderr
    assert phases_started(root, "S-0003") == []
    finished = run_cli(root, "run", "--continue", "--max-attempts", "5")
    assert finished.returncode == 0, finished.output
    assert only_run(root)["run_status"] == "completed"
    refused = run_cli(root, "run", "S-0001", "--max-attempts", "5")
    assert refused.returncode == 2
    assert "--max-attempts applies to a multi-story run" in refused.stderr
