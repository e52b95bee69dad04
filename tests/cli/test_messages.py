"""Messages a user reads: a silent failure says how it ended, the "no AI provider" warning only
when an agent phase actually runs, and a dry run lists the phases without filler."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner
from tests.support.runs_support import frontmatter

pytestmark = pytest.mark.e2e

#: No AI_SDLC_PROVIDER: the provider is auto-detected (none here: a run stops, exit 4).
AUTO = {"AI_SDLC_PROVIDER": "", "PATH": str(Path(sys.executable).parent)}
NO_AI = "no AI provider is configured"


def test_a_silent_verification_failure_says_how_it_ended(cli: CliRunner, project: Path) -> None:
    silent = shlex.join([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert cli("config", "verify.test", silent).returncode == 0
    assert cli("config", "limits.implementation_retries", "1").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    result = cli("run", "S-0001", "--no-worktree")
    assert result.returncode == 5, result.output
    reason = str(frontmatter(project, "S-0001")["blocked_reason"])
    assert "step 'test' failed with exit status 3 and printed nothing" in reason, reason
    assert "no details" not in result.output + reason


def test_a_failure_without_a_telling_line_keeps_its_last_line(
    cli: CliRunner, project: Path
) -> None:
    quiet = shlex.join([sys.executable, "-c", "import sys; print('widgets: 3'); sys.exit(2)"])
    assert cli("config", "verify.test", quiet).returncode == 0
    assert cli("config", "limits.implementation_retries", "1").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("run", "S-0001", "--no-worktree").returncode == 5
    reason = str(frontmatter(project, "S-0001")["blocked_reason"])
    assert "failed with exit status 2 (last output line: widgets: 3)" in reason, reason


def test_no_provider_stops_every_run_once_and_names_the_way_out(
    cli: CliRunner, project: Path
) -> None:
    """No stand-in: without a provider, a run stops before it touches anything (exit 4), the
    reason said once, with the way out; the offline provider runs when named."""
    assert cli("config", "verify.test", shlex.join([sys.executable, "-c", "pass"])).returncode == 0
    assert cli("add", "Something").returncode == 0
    story = (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_bytes()

    for args in (("run", "S-0001", "--no-worktree"), ("run", "--auto"), ("run",)):
        stopped = cli(*args, env=AUTO)
        assert stopped.returncode == 4, stopped.output
        assert stopped.stderr.count(NO_AI) == 1, stopped.stderr
        assert "--provider scripted" in stopped.stderr
    assert (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_bytes() == story

    ran = cli("run", "S-0001", "--no-worktree", "--provider", "scripted", env=AUTO)
    assert ran.returncode == 0, ran.output
    assert NO_AI not in ran.output


def test_dry_run_lists_only_the_phases_that_run(cli: CliRunner, project: Path) -> None:
    assert cli("add", "One").returncode == 0
    assert cli("add", "Two").returncode == 0
    auto = cli("run", "--auto", "--dry-run")
    assert auto.returncode == 0, auto.output
    assert auto.stderr.splitlines() == ["Dry run: nothing will be changed."]
    assert auto.stdout.splitlines() == [
        "S-0001: refine → research → plan → implement → review",
        "S-0002: refine → research → plan → implement → review",
    ]
    assert "then:" not in auto.output
    next_action = cli("run", "--dry-run")
    assert next_action.stdout.splitlines() == ["S-0001: refine"]
    step = cli("run", "S-0002", "--step", "plan", "--dry-run")
    assert step.stdout.splitlines() == ["S-0002: plan", "  (only this phase (--step))"]
    assert cli("config", "gates.before_implementation", "true").returncode == 0
    gated = cli("run", "S-0001", "--dry-run")
    assert gated.stdout.splitlines() == [
        "S-0001: refine → research → plan",
        "  (then: waiting for approval: run 'ai-sdlc approve S-0001')",
    ]
