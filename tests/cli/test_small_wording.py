"""Issue 36 item 11, the small ones, through the real CLI: no validation library's wording in an
error, a value typed on the command line judged the same way by `set` and `config`, `--type
Bug` lowercased, `-C` to a missing folder named as such, no help hint for a command that does
not exist, a YAML mistake in a story file named by file:line:column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CliRunner, run_cli

pytestmark = pytest.mark.e2e

LEAKS = ("Input should be", "Value error", "<unicode string>", " is int ", " is bool ")


def no_leak(text: str) -> None:
    assert not [leak for leak in LEAKS if leak in text], text


def test_range_and_choice_errors_speak_plainly(cli: CliRunner) -> None:
    assert cli("add", "One").returncode == 0
    priority = cli("add", "Two", "--priority", "-1")
    assert priority.returncode == 2 and "'--priority' / '-p': must be 0 or more" in priority.stderr
    jobs = cli("run", "--auto", "--jobs", "0")
    assert jobs.returncode == 2 and "must be 1 or more" in jobs.stderr
    step = cli("run", "S-0001", "--step", "deploy")
    assert step.returncode == 2 and "'deploy' is not one of 'refine'" in step.stderr
    word = cli("run", "--auto", "--jobs", "many")
    assert word.returncode == 2 and "must be a whole number" in word.stderr
    for result in (priority, jobs, step, word):
        no_leak(result.stderr)


def test_a_bad_value_is_a_usage_error_in_set_and_config_alike(
    cli: CliRunner, project: Path
) -> None:
    assert cli("add", "One").returncode == 0
    config_file = project / ".ai-sdlc" / "config.yaml"
    before = config_file.read_text()
    by_set = cli("set", "S-0001", "priority=-1")
    by_config = cli("config", "limits.global_recovery", "--", "-1")
    assert by_set.returncode == by_config.returncode == 2, (by_set.output, by_config.output)
    assert "config.yaml:" not in by_config.stderr  # typed here, not in the file
    assert "limits.global_recovery: must be an integer from 1" in by_config.stderr
    assert "`ai-sdlc config limits.global_recovery 10`" in by_config.stderr
    no_leak(by_config.stderr)
    assert config_file.read_text() == before  # nothing half-written


def test_a_type_is_lowercased_where_it_is_typed(cli: CliRunner, project: Path) -> None:
    added = cli("add", "Crash on start", "--type", "Bug")
    assert added.returncode == 0, added.output
    assert cli("set", "S-0001", "type=Chore").returncode == 0
    shown = json.loads(cli("show", "S-0001", "--json").stdout)
    assert shown["type"] == "chore"
    assert json.loads(cli("list", "--json").stdout)[0]["type"] == "chore"
    bad = cli("add", "Two", "--type", "two words")
    assert bad.returncode == 2 and "is not a story type" in bad.stderr


def test_a_missing_project_folder_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nothere"
    result = run_cli(missing, "status")
    assert result.returncode == 1
    assert f"error: no such folder: {missing}" in result.stderr
    assert "no ai-sdlc project" not in result.stderr
    assert not missing.exists()


def test_an_unknown_command_points_at_the_main_help(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "version", "--json")
    assert result.returncode == 2
    event = json.loads(result.stdout.splitlines()[-1])
    assert event["hint"] == "see 'ai-sdlc --help'"


def test_a_yaml_mistake_in_a_story_file_is_named_by_line_and_column(
    cli: CliRunner, tmp_path: Path
) -> None:
    story = tmp_path / "fix.md"
    story.write_text("---\ntitle: Fix: the login\n---\nThe login loops.\n")
    result = cli("add", "--from", str(story))
    assert result.returncode == 3
    assert f"{story}:2:11: bad YAML frontmatter: mapping values" in result.stderr
    assert 'title: "Fix: the login"' in result.stderr
    no_leak(result.stderr)


def test_init_says_why_it_writes_an_empty_setup(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    result = run_cli(root, "init")
    assert result.returncode == 0, result.output
    assert "setup: []" in (root / ".ai-sdlc" / "config.yaml").read_text()
    assert "worktree.setup: [] (no lock file or manifest found here" in result.stderr
    command = result.stderr.split("e.g. `", 1)[1].split("`", 1)[0]
    assert command == "ai-sdlc config worktree.setup '[\"npm ci\"]'"
