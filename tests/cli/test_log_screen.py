"""`ai-sdlc log` at 80 columns: every event fits (its explanation wrapped under it, indented,
rather than running to 236 characters), the fixed columns line up on every event — a
`recovery (implementation_retry)` included — and an `edited` event reads `priority 10 → 3`,
not a Python dict. Through the real CLI over a real failing run."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner

pytestmark = pytest.mark.e2e


def test_the_timeline_fits_80_columns_and_reads_as_text(cli: CliRunner, project: Path) -> None:
    assert cli("config", "verify.test", "false").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("set", "S-0001", "priority=3", "labels=ui,power").returncode == 0
    assert cli("run", "S-0001").returncode == 5  # retries, then blocked

    result = cli("log", "S-0001", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.output
    lines = result.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), max(lines, key=len)

    events = [json.loads(x) for x in cli("log", "S-0001", "--json").stdout.splitlines()]
    firsts = [line for line in lines if not line.startswith(" ")]
    assert len(firsts) == len(events)
    # The action and the phase start in the same column on every event.
    for line, event in zip(firsts, events, strict=True):
        assert f"{line} ".index(f" {event['action']} ") + 1 == 22, line
        if event.get("phase"):
            assert line.index(f" {event['phase']}", 40) + 1 == 43, line
    # A recovery names its kind on its own line, in the outcome's column.
    recoveries = [line for line in firsts if " recovery " in line]
    assert recoveries and all(line[53:] == "implementation_retry" for line in recoveries)

    # The edit reads as text, wrapped under its line.
    edited = lines.index(next(line for line in firsts if " edited" in line))
    assert lines[edited + 1].strip() == "priority 10 → 3, labels none → ui, power"
    assert "{" not in result.stdout and "'from'" not in result.stdout

    # The block's reason is wrapped (several lines), each one indented under the event.
    blocked = lines.index(next(line for line in firsts if " blocked " in line))
    under = []
    for line in lines[blocked + 1 :]:
        if not line.startswith("    "):
            break
        under.append(line.strip())
    text = " ".join(under)
    assert len(under) >= 2 and "Implementation failed verification" in text
    assert "recoveries 4 (implementation_retry 4)" in text


def test_a_failed_verification_reads_as_its_cause_not_as_runner_output(
    cli: CliRunner, project: Path
) -> None:
    """A failed attempt's test output (`F [100%] ===== FAILURES ====…` once flattened and cut)
    is not the timeline's explanation: the recovery under it names the failing assertion, and
    `--full` shows the output whole."""
    script = (
        "print('F [100%]'); print('=' * 30 + ' FAILURES ' + '=' * 30); print('E  assert 1 == 2')"
    )
    test = shlex.join([sys.executable, "-c", script + "; raise SystemExit(1)"])
    assert cli("config", "verify.test", test).returncode == 0
    assert cli("config", "limits.implementation_retries", "0").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("run", "S-0001", "--no-worktree").returncode == 5

    result = cli("log", "S-0001", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.output
    assert "FAILURES" not in result.stdout and "[100%]" not in result.stdout
    lines = result.stdout.splitlines()
    failed = lines.index(next(line for line in lines if " phase " in line and "failed" in line))
    assert " recovery " in lines[failed + 1]  # nothing cut between the two
    full = cli("log", "S-0001", "--full", env={"COLUMNS": "80"})
    assert "=" * 30 + " FAILURES " in full.stdout and "E  assert 1 == 2" in full.stdout
