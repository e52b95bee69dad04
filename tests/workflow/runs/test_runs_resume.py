"""Resume that works, through the real CLI: after a halt, after SIGKILL mid-phase, and after
Ctrl-C; finished stories are never redone and the run's counters carry over."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import run_cli
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    frontmatter,
    killed_tmpdir,
    make_project,
    only_run,
    phases_started,
    run_events,
    start_cli,
    stop_or_explain,
    story_events,
    story_states,
    write_rules,
)
from tests.support.waits import host_pid, wait_for_pid, wait_until_gone

__all__ = ["killed_tmpdir"]  # a fixture

pytestmark = pytest.mark.e2e

ALL_PHASES = ["refine", "research", "plan", "implement", "review"]

#: A verification command that hangs on its Nth call (writing its pid first) and passes
#: otherwise: lets a test stop a run in the middle of a given story's phase.
SLOW_VERIFY = """
import os, pathlib, sys, time
count_file, hang_on, marker = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])
n = int(count_file.read_text()) + 1 if count_file.exists() else 1
count_file.write_text(str(n))
if n == hang_on:
    marker.write_text(str(os.getpid()))
    time.sleep(60)
"""


def slow_verify_config(tmp_path: Path, hang_on: int) -> tuple[str, Path]:
    script = tmp_path / "slow_verify.py"
    script.write_text(SLOW_VERIFY)
    records = records_path(tmp_path / "p")  # the project's: the counter and the pid marker
    marker = records / "hanging.pid"
    argv = [sys.executable, str(script), str(records / "count"), str(hang_on), str(marker)]
    return f"verify:\n  build: {json.dumps(shlex.join(argv))}\n", marker


def total_started(root: Path, sids: list[str]) -> int:
    return sum(len(phases_started(root, sid)) for sid in sids)


def test_resume_after_a_halt_continues_without_redoing_finished_stories(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["A", "B", "C", "D"], "limits:\n  refinement_iterations: 0\n")
    write_rules(
        root,
        "rules:\n"
        + "".join(
            f"  - phase: refine\n    story: {sid}\n    decision: REJECTED\n    feedback: vague\n"
            for sid in ("S-0002", "S-0003")
        ),
    )
    halted = run_cli(root, "run", "--auto")
    assert halted.returncode == 6, halted.output
    first = only_run(root)
    assert first["counters"]["total_attempts"] == 7
    # The operator fixes the cause and unblocks the stories, then resumes the same run.
    (root / ".ai-sdlc" / "scripted.yaml").unlink()
    store = StoryStore(root)
    for sid in ("S-0002", "S-0003"):
        StoryState(store).unblock(sid, reset_retries=True)
    resumed = run_cli(root, "run", "--resume", first["run_id"])
    assert resumed.returncode == 0, resumed.output
    state = only_run(root)
    assert state["run_id"] == first["run_id"]
    assert state["run_status"] == "completed" and state["resumable"] is False
    assert state["segments"] == 2
    assert phases_started(root, "S-0001") == ALL_PHASES  # not redone
    # Unblocked back to the backlog: the refinement it never passed runs again, then the rest.
    assert phases_started(root, "S-0002") == ["refine", *ALL_PHASES]
    assert StoryStore(root).get("S-0002").frontmatter["total_recovery_attempts"] == 0
    assert [s["status"] for s in state["stories"]] == ["done"] * 4
    sids = ["S-0001", "S-0002", "S-0003", "S-0004"]
    assert state["counters"]["total_attempts"] == total_started(root, sids) == 7 + 5 + 5 + 5
    names = [e["action"] for e in run_events(root, state["run_id"])]
    assert names.count("run_resumed") == 1 and names[-1] == "run_completed"
    again = run_cli(root, "run", "--resume", first["run_id"])
    assert again.returncode == 1
    assert "completed" in again.stderr


def test_sigkill_mid_phase_then_continue(tmp_path: Path, killed_tmpdir: Path) -> None:
    root = tmp_path / "p"
    # S-0001 verifies once (review reuses its implement verdict); the 2nd run is S-0002's.
    config, marker = slow_verify_config(tmp_path, hang_on=2)
    make_project(root, ["A", "B", "C"], config)
    records_folder(root)
    proc = start_cli(root, "run", "--auto", env={"TMPDIR": str(killed_tmpdir)})
    hanging = host_pid(wait_for_pid(marker), str(marker))  # its own pid is its namespace's
    try:
        proc.kill()
        stop_or_explain(proc, 30)
    finally:
        os.kill(hanging, signal.SIGKILL)  # the verification outlives a SIGKILLed run
    crashed = only_run(root)
    assert crashed["run_status"] == "running"
    assert story_states(crashed)["S-0002"]["status"] == "in-progress"
    listing = json.loads(run_cli(root, "runs", "--json").stdout)["runs"]
    assert [(r["run_id"], r["active"]) for r in listing] == [(crashed["run_id"], False)]
    attempts_before = crashed["counters"]["total_attempts"]
    assert attempts_before == 5 + 4

    result = run_cli(root, "run", "--continue")
    assert result.returncode == 0, result.output
    state = only_run(root)
    assert state["run_status"] == "completed"
    assert phases_started(root, "S-0001") == ALL_PHASES
    # Picked up again from its last completed phase: only the killed implement is redone.
    assert phases_started(root, "S-0002") == [*ALL_PHASES[:4], "implement", "review"]
    assert phases_started(root, "S-0003") == ALL_PHASES
    assert state["counters"]["total_attempts"] == attempts_before + 2 + 5 == 16
    assert story_states(state)["S-0002"]["attempts"] == 6
    # The killed attempt was reserved before it ran: the next run counted it.
    s2 = frontmatter(root, "S-0002")
    assert s2["total_recovery_attempts"] == 1
    assert dict(s2["recovery_breakdown"]) == {"implementation_retry": 1}
    rollback = [e for e in story_events(root, "S-0002") if e["action"] == "rollback_initiated"]
    assert len(rollback) == 1
    assert rollback[0]["phase"] == "implement"
    assert "earlier run stopped during implement" in rollback[0]["reason"]
    assert not (root / ".ai-sdlc" / "state" / "checkpoints" / "S-0002.json").exists()


def test_ctrl_c_halts_gracefully_and_resume_completes(tmp_path: Path) -> None:
    root = tmp_path / "p"
    config, marker = slow_verify_config(tmp_path, hang_on=1)  # S-0001's implement verification
    make_project(root, ["A", "B"], config)
    records_folder(root)
    proc = start_cli(root, "run", "--auto")
    # The verification is running: the run is mid-implement (its own pid is its namespace's).
    hanging = host_pid(wait_for_pid(marker), str(marker))
    proc.send_signal(signal.SIGINT)
    _, stderr = stop_or_explain(proc, 60, leftovers=(hanging,))
    assert proc.returncode == 130, stderr
    state = only_run(root)
    assert "interrupted" in stderr
    assert f"run --resume {state['run_id']}" in stderr
    assert state["run_status"] == "stopped" and state["resumable"] is True
    assert state["stop_reason"]["condition"] == "interrupted"
    assert state["resume_from"] == "S-0001"
    assert story_states(state)["S-0001"]["status"] == "in-progress"
    # The hung verification was killed with the run, and the story is at its checkpoint.
    # (Ended, not necessarily reaped: killed with its sandbox launcher, it is init's to reap.)
    wait_until_gone(hanging, "the hung verification")
    fm = frontmatter(root, "S-0001")
    assert fm["plan_complete"] is True and not fm.get("implementation_complete")
    rollback = [e for e in story_events(root, "S-0001") if e["action"] == "rollback_initiated"]
    assert [e["reason"] for e in rollback] == ["interrupted"]
    assert fm.get("total_recovery_attempts", 0) == 0  # a user's Ctrl-C is not a recovery
    assert phases_started(root, "S-0002") == []

    resumed = run_cli(root, "run", "--resume", state["run_id"])
    assert resumed.returncode == 0, resumed.output
    final = only_run(root)
    assert final["run_status"] == "completed"
    assert phases_started(root, "S-0001") == [*ALL_PHASES[:4], "implement", "review"]
    assert phases_started(root, "S-0002") == ALL_PHASES
    assert frontmatter(root, "S-0001")["status"] == "done"
