"""Issue 26 item 11 through the real CLI: the run-wide cap (`max_total_attempts`) counts
attempts at the work (implement and rework, first ones included), not phase calls, so a healthy
backlog is not halted after 8 stories; the halt names what is left and how to go on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project, only_run, phases_started, story_states

pytestmark = pytest.mark.e2e


def test_the_cap_counts_implementation_attempts_so_fifty_stories_finish(tmp_path: Path) -> None:
    """The default cap is 50 implementation attempts: about fifty healthy stories (each 5 phase
    calls: a cap on phase calls would halt after 10). The halt itself is walked with the cap
    lowered in the project's config, as a user would: 3 attempts over 5 stories."""
    root = tmp_path / "p"
    sids = [f"S-{n:04d}" for n in range(1, 6)]
    make_project(root, [f"Story {n}" for n in range(1, 6)])
    key = "run.stop_conditions.max_total_attempts"
    default = run_cli(root, "config", key, "--json")
    assert default.returncode == 0, default.output
    assert json.loads(default.stdout) == {key: 50}
    assert run_cli(root, "config", key, "3").returncode == 0
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 6, result.output
    state = only_run(root)
    assert state["stop_reason"]["condition"] == "max_total_attempts"
    assert (state["stop_reason"]["value"], state["stop_reason"]["threshold"]) == (3, 3)
    implements = sum(phases_started(root, sid).count("implement") for sid in sids)
    assert implements == 3
    stories = story_states(state)
    done = [sid for sid in sids if stories[sid]["status"] == "done"]
    assert done == sids[:3]
    assert state["counters"]["implementation_attempts"] == 3
    assert state["counters"]["total_attempts"] == 3 * 5  # every phase call, as before
    assert "the run made 3 implementation attempts" in result.stderr
    assert "2 stories are left" in result.stderr
    assert "ai-sdlc run --continue" in result.stderr and "--max-attempts N" in result.stderr

    # `run --continue` goes on: the cap counts each segment afresh (an operator's decision).
    resumed = run_cli(root, "run", "--continue")
    assert resumed.returncode == 0, resumed.output
    final = only_run(root)
    assert final["run_status"] == "completed"
    assert all(s["status"] == "done" for s in final["stories"])
    assert final["counters"]["implementation_attempts"] == 5


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
