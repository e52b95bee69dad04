"""`consecutive_fails` resets on a success: a story alternating failed and passed attempts is
never halted by `max_consecutive_fails` (through the real CLI)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli
from tests.support.runs_support import (
    make_project,
    only_run,
    story_states,
    write_rules,
)


def test_alternating_fail_and_pass_is_not_halted_by_max_consecutive_fails(
    tmp_path: Path,
) -> None:
    """Rejected, done, rejected, done, rejected with `max_consecutive_fails: 2`: no two failures
    in a row, so the run goes through all five stories."""
    root = tmp_path / "p"
    stop = "    max_consecutive_fails: 2\n    min_attempted: 100\n"
    make_project(
        root,
        ["A", "B", "C", "D", "E"],
        "limits:\n  refinement_iterations: 0\n"
        f"run:\n  cooldown_seconds: 0\n  max_consecutive_escalations: 10\n"
        f"  stop_conditions:\n{stop}",
    )
    rule = "  - phase: refine\n    story: {sid}\n    decision: REJECTED\n    feedback: no.\n"
    failing = ("S-0001", "S-0003", "S-0005")
    write_rules(root, "rules:\n" + "".join(rule.format(sid=s) for s in failing))
    result = run_cli(root, "run", "--auto")
    state = only_run(root)
    # The run reached its end: the only halt is the one at the end for the escalated stories.
    reason = state["stop_reason"]
    assert reason["condition"] == "all_escalated", (reason, result.output)
    assert "every remaining story is escalated" in reason["message"], reason
    statuses = {sid: s["status"] for sid, s in story_states(state).items()}
    assert statuses == {
        "S-0001": "blocked",
        "S-0002": "done",
        "S-0003": "blocked",
        "S-0004": "done",
        "S-0005": "blocked",
    }, statuses
    assert state["statistics"]["consecutive_fails"] == 1
    assert state["counters"]["consecutive_fails"] == 1
