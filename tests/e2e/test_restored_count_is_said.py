"""A restored count is said where it is seen: after a hand-lowered counter in story.md, `show`,
`status` and `list` show the ledger's count and say the file disagreed, and `run` prints the
`tamper_detected` line on stderr (not only `log`)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner


def _lower(story: Path) -> None:
    text = story.read_text()
    text = re.sub(r"(?m)^total_recovery_attempts: \d+$", "total_recovery_attempts: 0", text)
    text = re.sub(r"(?m)^(  [a-z_]+): [1-9]\d*$", r"\1: 0", text)  # the breakdown's figures
    story.write_text(text)


@pytest.mark.e2e
def test_a_lowered_counter_shows_the_ledgers_count_and_says_why(
    cli: CliRunner, project: Path
) -> None:
    failing = shlex.join([sys.executable, "-c", "import sys; print('E  boom'); sys.exit(1)"])
    assert cli("config", "verify.test", failing).returncode == 0
    assert cli("config", "limits.implementation_retries", "1").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("run", "S-0001", "--no-worktree").returncode == 5
    before = json.loads(cli("show", "S-0001", "--json").stdout)["counters"]
    total = before["total_recovery_attempts"]
    assert total >= 2, before

    story = project / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    _lower(story)
    assert "total_recovery_attempts: 0\n" in story.read_text()

    shown = cli("show", "S-0001")
    assert shown.returncode == 0, shown.output
    assert f"recovery:  {total}/10" in shown.stdout, shown.stdout
    assert "story.md says 0" in shown.stdout
    assert f"story.md says 0/10 recoveries, the ledger {total}/10" in shown.stderr, shown.stderr
    as_json = json.loads(cli("show", "S-0001", "--json").stdout)
    assert as_json["counters"]["total_recovery_attempts"] == total
    assert as_json["counter_in_file"] == 0

    listed = cli("list")
    assert f"{total}/10" in listed.stdout, listed.stdout
    assert "story.md says 0/10" in listed.stderr, listed.stderr
    rows = json.loads(cli("list", "--json").stdout)
    assert rows[0]["total_recovery_attempts"] == total and rows[0]["counter_in_file"] == 0

    board = cli("status")
    assert f"↻{total}/10" in board.stdout, board.stdout
    assert "story.md says 0/10" in board.stderr, board.stderr
    stories = json.loads(cli("status", "--json").stdout)["stories"]
    assert stories[0]["total_recovery_attempts"] == total

    ran = cli("run", "S-0001", "--no-worktree")
    assert ran.returncode == 5, ran.output
    assert "tamper detected: total_recovery_attempts 0 → " in ran.stderr, ran.stderr
    # Restored: the file and the readers agree again, and nothing is said any more.
    again = cli("show", "S-0001")
    assert f"recovery:  {total}/10" in again.stdout
    assert "story.md says" not in again.output
