"""Issue 26 items 7 and 8 through the real CLI: a run counts what happened (over every
segment), a block is counted as a block (never a review rejection), a run that finished what it
could says so and exits with the blocked story's code (5), and a resume with nothing left to do
says so instead of "completed"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project, only_run, story_states, write_rules

pytestmark = pytest.mark.e2e

#: S-0003's implementation never changes anything: blocked by its phase limit (no review
#: ever runs).
FAILS_FOREVER = "rules:\n  - phase: implement\n    story: S-0003\n    files: {}\n"


def three_with_one_blocked(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    make_project(
        root,
        ["A", "B", "C"],
        "limits:\n  implementation_retries: 1\n",
    )
    return root


def test_two_done_one_blocked_is_not_a_disaster(tmp_path: Path) -> None:
    root = three_with_one_blocked(tmp_path)
    write_rules(root, FAILS_FOREVER)
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 5, result.output
    assert "FAILURE LOOP" not in result.output
    assert "every remaining story is escalated: S-0003 (blocked: " in result.output
    assert "finished what it could" in result.output
    assert "2 done · 1 blocked" in result.output
    assert "rejected" not in result.output
    state = only_run(root)
    stats = state["statistics"]
    assert (stats["approved"], stats["blocked"], stats["rejected"]) == (2, 1, 0)
    assert state["stop_reason"]["condition"] == "all_escalated"
    assert state["resumable"] is True
    assert story_states(state)["S-0003"]["status"] == "blocked"


def test_a_resume_with_nothing_left_says_so_and_counts_every_segment(tmp_path: Path) -> None:
    root = three_with_one_blocked(tmp_path)
    write_rules(root, FAILS_FOREVER)
    assert run_cli(root, "run", "--auto").returncode == 5
    resumed = run_cli(root, "run", "--continue")
    assert resumed.returncode == 5, resumed.output
    assert "nothing left to do: every remaining story is escalated: S-0003" in resumed.output
    assert "completed" not in resumed.output
    state = only_run(root)
    assert state["segments"] == 2 and state["run_status"] == "stopped"
    # The figures cover both segments: the two stories done in the first are counted.
    assert (state["statistics"]["attempted"], state["statistics"]["approved"]) == (3, 2)
    assert "stopped · all_escalated · 2/3 done" in run_cli(root, "runs").output
    show = run_cli(root, "runs", "show", state["run_id"]).output
    assert "3 attempted · 2 done · 1 blocked" in show
    shown = json.loads(run_cli(root, "runs", "show", state["run_id"], "--json").stdout)
    assert shown["statistics"]["approved"] == 2


def test_a_resumed_run_counts_what_the_first_segment_finished(tmp_path: Path) -> None:
    root = three_with_one_blocked(tmp_path)
    write_rules(root, FAILS_FOREVER)
    assert run_cli(root, "run", "--auto").returncode == 5
    (root / ".ai-sdlc" / "scripted.yaml").unlink()  # the operator fixes the cause
    assert run_cli(root, "unblock", "S-0003", "--reset-retries").returncode == 0
    resumed = run_cli(root, "run", "--continue")
    assert resumed.returncode == 0, resumed.output
    state = only_run(root)
    assert state["run_status"] == "completed"
    stats = state["statistics"]
    assert (stats["attempted"], stats["approved"], stats["blocked"]) == (3, 3, 0)
    assert "completed · 3/3 done" in run_cli(root, "runs").output
    assert "3 attempted · 3 done" in resumed.output
