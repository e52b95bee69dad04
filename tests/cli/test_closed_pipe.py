"""A closed stdout/stderr ends the output, never the work (issue 36 item 2): `ai-sdlc run …
2>&1 | head -1` finishes the story (nothing rolled back, no `BrokenPipeError` anywhere) and
exits with the run's own code; `ai-sdlc status -q | head -1` exits 0 every time. Real
processes and a real pipe whose reader goes away early."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import CliRunner, cli_environment
from tests.workflow.test_cli_workflow import setup_python_project


def _with_reader_gone(project: Path, *args: str, lines: int) -> tuple[int, list[str]]:
    """`ai-sdlc <args> 2>&1 | head -<lines>`: read that many lines, close the pipe, wait."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=cli_environment(),
        text=True,
    )
    assert proc.stdout is not None
    read = [proc.stdout.readline() for _ in range(lines)]
    proc.stdout.close()  # the reader is gone: every later write meets a closed pipe
    return proc.wait(timeout=300), read


def test_a_run_piped_into_head_finishes_the_story(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    code, read = _with_reader_gone(project, "run", "S-0001", lines=1)
    assert read[0].strip(), read
    assert code == 0
    fm = json.loads(cli("show", "S-0001", "--json").stdout)["frontmatter"]
    assert fm["status"] == "done", fm
    events = (project / ".ai-sdlc" / "stories" / "S-0001" / "events.jsonl").read_text()
    assert "BrokenPipe" not in events and "rollback" not in events


def test_status_piped_into_head_exits_zero_every_time(cli: CliRunner, project: Path) -> None:
    for n in range(12):
        cli("add", f"Story {n}")
    codes = set()
    for _ in range(3):
        code, read = _with_reader_gone(project, "-q", "status", lines=0)
        assert read == []
        codes.add(code)
    assert codes == {0}
