"""A line is said once per stream (issue 36 item 4): a multi-story run whose phase crashes and
is rolled back prints the rollback line once per roll-back (the run's own record of it stays
in its event log, unshown), and its last progress line counts nothing as running; a failed
verification is one `✗ verification failed` line, not also `verification failed` before it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ai_sdlc.cli.live import Board
from tests.conftest import CliRunner, run_cli
from tests.workflow.runs.test_runs_rollback import _prepare


def test_a_rolled_back_phase_is_said_once_in_a_multi_story_run(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _prepare(root, tmp_path)
    config = root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text() + "run:\n  cooldown_seconds: 0\n  max_story_errors: 1\n")
    result = run_cli(root, "run", "--auto", "--provider", "command")
    crashes = 1  # run.max_story_errors: 1, escalated at the first crash
    assert "[S-0001] escalated: its phases crashed 1 time: " in result.stderr, result.output
    rollbacks = result.stderr.count("[S-0001] rolled back to the checkpoint before implement")
    assert rollbacks == crashes, result.output
    # Not blocked, only escalated: the way out named is the one that works (no `unblock`).
    assert "ai-sdlc unblock" not in result.output, result.output
    assert "Once the cause is fixed, continue: " in result.stderr, result.output
    summaries = re.findall(r"^stories \d+/\d+ · .*$", result.stderr, re.M)
    assert summaries and "· 0 running ·" in summaries[-1], result.stderr
    runs = root / ".ai-sdlc" / "runs"
    (log,) = list(runs.glob("*/events.jsonl"))
    recorded = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    # Not shown twice, still recorded: the run's own log keeps the roll-back for its report.
    assert any(e.get("action") == "rollback_initiated" for e in recorded), recorded


def test_the_last_summary_counts_nothing_running_once_the_run_ended() -> None:
    board = Board(clock=lambda: 0.0)
    board.observe({"event": "run_started", "stories": ["S-0001", "S-0002"]})
    board.observe({"event": "story_started", "story": "S-0001"})
    board.observe({"event": "phase_started", "story": "S-0001", "phase": "refine"})
    board.observe({"event": "story_finished", "story": "S-0001", "outcome": "done"})
    board.observe({"event": "story_started", "story": "S-0002"})  # then the run is stopped
    board.observe({"event": "run_stopped"})
    assert re.search(r"· 1 done · 0 blocked · 0 running ·", board.summary(0.0)), board.summary(0)


def test_a_failed_verification_is_said_once_per_attempt(cli: CliRunner) -> None:
    assert cli("config", "verify.test", "false").returncode == 0
    assert cli("config", "limits.implementation_retries", "1").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    result = cli("run", "S-0001", "--no-worktree")
    assert result.returncode == 5, result.output
    lines = result.stderr.splitlines()
    failed = [line for line in lines if "verification failed" in line]
    assert len(failed) == 2 and all("[S-0001] implement ✗ verification failed" in f for f in failed)
