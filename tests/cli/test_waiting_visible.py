"""A story held at a stage gate is visible as such: its own board column with the gate's name,
a `show` line saying what `approve` passes, and `waiting_for` in `status --json` / `show --json`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner

pytestmark = pytest.mark.e2e


def gated_story(cli: CliRunner, gate: str) -> None:
    assert cli("config", "verify.test", shlex.join([sys.executable, "-c", "pass"])).returncode == 0
    assert cli("config", f"gates.{gate}", "true").returncode == 0
    assert cli("add", "Gated work").returncode == 0
    assert cli("add", "Other work").returncode == 0
    result = cli("run", "S-0001", "--no-worktree")
    assert result.returncode == 0, result.output
    assert "ai-sdlc approve S-0001" in result.stdout


@pytest.mark.parametrize("gate", ["before_done", "before_implementation"])
def test_waiting_story_has_its_own_column_and_fields(
    cli: CliRunner, project: Path, gate: str
) -> None:
    gated_story(cli, gate)

    board = cli("status")
    assert board.returncode == 0, board.output
    lines = board.stdout.splitlines()
    waiting = lines.index("Waiting for approval (1)")
    assert lines[waiting + 1].split() == ["S-0001", "Gated", "work"]
    assert lines[waiting + 2].strip().startswith("p")  # priority (the type: feature, unsaid)
    assert lines[waiting + 3].strip() == f"gate: {gate} (ai-sdlc approve S-0001)"
    assert "In progress (0)" in lines and "Backlog (1)" in lines

    rows = {r["id"]: r for r in json.loads(cli("status", "--json").stdout)["stories"]}
    assert rows["S-0001"]["waiting_for"] == gate
    assert rows["S-0002"]["waiting_for"] is None

    details = json.loads(cli("show", "S-0001", "--json").stdout)
    assert details["waiting_for"] == gate
    shown = cli("show", "S-0001").stdout
    assert f"waiting:   for approval at gate {gate}; `ai-sdlc approve S-0001` passes it" in shown

    assert cli("approve", "S-0001").returncode == 0
    rows = {r["id"]: r for r in json.loads(cli("status", "--json").stdout)["stories"]}
    assert rows["S-0001"]["waiting_for"] is None
    assert json.loads(cli("show", "S-0001", "--json").stdout)["waiting_for"] is None
    assert "waiting:" not in cli("show", "S-0001").stdout
    assert "Waiting for approval (0)" in cli("status").stdout.splitlines()

    finished = cli("run", "S-0001", "--no-worktree")
    assert finished.returncode == 0, finished.output
    if gate == "before_done":
        rows = {r["id"]: r for r in json.loads(cli("status", "--json").stdout)["stories"]}
        assert rows["S-0001"]["status"] == "done" and rows["S-0001"]["waiting_for"] is None


def test_without_gates_nothing_waits(cli: CliRunner, project: Path) -> None:
    assert cli("config", "verify.test", shlex.join([sys.executable, "-c", "pass"])).returncode == 0
    assert cli("add", "Plain").returncode == 0
    assert cli("run", "S-0001", "--no-worktree").returncode == 0
    row = json.loads(cli("status", "--json").stdout)["stories"][0]
    assert row["status"] == "done" and row["waiting_for"] is None
    assert "Waiting for approval (0)" in cli("status").stdout.splitlines()
