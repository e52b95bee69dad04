"""Every message that stops the user names the command that gets them out, and that command
works (issue 36 items 6 and 9): the phase-limit block names `ai-sdlc unblock`, and a bare
`ai-sdlc run` takes the story it picked to done."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CliRunner
from tests.workflow.test_cli_workflow import FAILING_CODE, rules, setup_python_project


def test_a_phase_limit_block_names_unblock_and_unblock_then_run_finishes_it(
    cli: CliRunner, project: Path
) -> None:
    setup_python_project(project)
    cli("config", "limits.implementation_retries", "2")
    cli("add", "Add multiply")
    lines = ["rules:"]
    for attempt in range(1, 4):
        code = FAILING_CODE + f"\n# attempt {attempt}\n"
        lines += [
            "  - phase: implement",
            f"    attempt: {attempt}",
            f"    files: {{calc/__init__.py: {json.dumps(code)}}}",
        ]
    rules(project, "\n".join(lines) + "\n")
    blocked = cli("run", "S-0001")
    assert blocked.returncode == 5, blocked.output
    assert "Implementation failed verification 3 times (limit 2 retries)" in blocked.stdout
    assert "fix the cause, then run 'ai-sdlc unblock S-0001'" in blocked.stderr
    # -q keeps the way out with the block.
    quiet = cli("-q", "run", "S-0001")
    assert quiet.returncode == 5, quiet.output
    assert "ai-sdlc unblock S-0001" in quiet.output
    shown = cli("show", "S-0001")
    assert "way out:   fix the cause, then run 'ai-sdlc unblock S-0001'" in shown.stdout
    # The cause fixed (the scripted agent now writes the right code), the named command works.
    right = "def multiply(a, b):\n    return a * b\n"
    rules(
        project,
        f"rules:\n  - phase: implement\n    files: {{calc/__init__.py: {json.dumps(right)}}}\n",
    )
    unblocked = cli("unblock", "S-0001")
    assert unblocked.returncode == 0, unblocked.output
    finished = cli("run", "S-0001")
    assert finished.returncode == 0, finished.output
    assert "S-0001: done" in finished.stdout
    assert "way out" not in cli("show", "S-0001").stdout


def test_run_without_an_id_names_the_story_it_picks_and_takes_it_to_done(
    cli: CliRunner, project: Path
) -> None:
    setup_python_project(project)
    assert cli("add", "Later", "--priority", "5").returncode == 0
    assert cli("add", "First", "--priority", "1").returncode == 0
    result = cli("run")
    assert result.returncode == 0, result.output
    assert "[S-0002] picked as the next story by priority" in result.stderr
    assert result.stdout.strip() == "S-0002: done"
    shown = json.loads(cli("show", "S-0002", "--json").stdout)
    assert shown["frontmatter"]["status"] == "done"
    assert json.loads(cli("show", "S-0001", "--json").stdout)["frontmatter"]["status"] == "backlog"
