"""Issue 36 item 11, the small ones, through the real CLI: no validation library's wording in an
error, a value typed on the command line judged the same way by `set` and `config`, `--type
Bug` lowercased, `-C` to a missing folder named as such, no help hint for a command that does
not exist, a YAML mistake in a story file named by file:line:column, `init`'s empty setup
explained, a `.ai-sdlc/.gitignore` that keeps itself out of `git status`, a gate said in words
(not "waiting in 0.5s"), uncommitted changes of the checkout said once. Elsewhere: help without
Python types, whole summaries and an example (tests/cli/test_help_screen.py, which also
completes `--provider`), `--resume --dry-run` (tests/cli/test_resume_preview.py), exit 5 only
as news (tests/cli/test_run_exit.py)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner, run_cli
from tests.support.git_support import git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = pytest.mark.e2e

LEAKS = (
    "Input should be",
    "Value error",
    "<unicode string>",
    " is int ",
    " is bool ",
    "is not in the range",
    "is not a valid",
)


def no_leak(text: str) -> None:
    assert not [leak for leak in LEAKS if leak in text], text


def test_range_and_choice_errors_speak_plainly(cli: CliRunner) -> None:
    assert cli("add", "One").returncode == 0
    priority = cli("add", "Two", "--priority", "-1")
    assert priority.returncode == 2 and "'--priority' / '-p': must be 0 or more" in priority.stderr
    jobs = cli("run", "--auto", "--jobs", "0")
    assert jobs.returncode == 2 and "must be from 1 to 64" in jobs.stderr
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
    # The next step leads to a run, not into its "no verification configured" wall (exit 3):
    # verification first, with a command that works as written.
    step = "Next: say how the project is tested (ai-sdlc config verify.test 'pytest -q'), then "
    assert f'{step}ai-sdlc add "Your first story"' in result.stderr
    assert run_cli(root, "config", "verify.test", "pytest -q").returncode == 0


@pytest.mark.usefixtures("git_env")
def test_a_new_gitignore_keeps_itself_out_of_git_status(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "start")
    assert run_cli(root, "init").returncode == 0
    assert run_cli(root, "add", "One").returncode == 0
    status = git(root, "status", "--porcelain", "--untracked-files=all")
    paths = sorted(line[3:] for line in status.splitlines())
    assert paths == [".ai-sdlc/config.yaml", ".ai-sdlc/stories/S-0001/story.md"], status


def test_a_gate_is_said_in_words_not_as_a_timing(cli: CliRunner) -> None:
    assert cli("config", "verify.test", shlex.join([sys.executable, "-c", "pass"])).returncode == 0
    assert cli("config", "gates.before_done", "true").returncode == 0
    assert cli("add", "Gated work").returncode == 0
    result = cli("run", "S-0001", "--no-worktree")
    assert result.returncode == 0, result.output
    assert result.stdout == "S-0001: waiting for approval: run 'ai-sdlc approve S-0001'\n"
    assert "waiting in" not in result.stderr and "[S-0001] waiting" not in result.stderr
    assert cli("approve", "S-0001").returncode == 0
    early = cli("approve", "S-0001")  # passed already: where it is, and the way on
    assert early.returncode == 1 and "S-0001 is not waiting at a gate (it is" in early.stderr
    assert "'ai-sdlc run S-0001' takes it on" in early.stderr
    finished = cli("run", "S-0001", "--no-worktree")
    assert finished.returncode == 0, finished.output
    assert "[S-0001] done in " in finished.stderr  # a story run to its end says how long
    done = cli("approve", "S-0001")
    assert done.returncode == 1 and "hint: nothing to approve: it is done" in done.stderr


@pytest.mark.usefixtures("git_env")
def test_uncommitted_changes_of_the_checkout_are_said_once(tmp_path: Path) -> None:
    """A story's worktree starts from commits: the user's uncommitted edits are neither seen
    nor judged, and the run says so in one line (said nothing before)."""
    repo = make_repo(tmp_path, remote=False)
    (repo.root / "README.md").write_text("# project, edited\n")
    (repo.root / "notes.txt").write_text("not committed\n")
    first = repo.story("One")
    result = run_cli(repo.root, "run", first, "--step", "refine")
    assert result.returncode == 0, result.output
    line = (
        "warning: uncommitted changes in your checkout (README.md, notes.txt) stay out of the "
        "story's worktree, which starts from commits: commit them first if the story needs them"
    )
    assert " ".join(result.stderr.split()).count(line) == 1, result.stderr
    repo.commit_all("the edits")
    clean = run_cli(repo.root, "run", first, "--step", "research")
    assert clean.returncode == 0, clean.output
    assert "uncommitted" not in clean.output


@pytest.mark.usefixtures("git_env")
def test_counts_are_in_english_not_event_s(tmp_path: Path) -> None:
    """`log` says how many events it shortened as a person would: "1 event shortened … shows
    it whole" (it said "1 event(s) shortened")."""
    repo = make_repo(tmp_path, remote=False)
    sid = repo.story("Add a greeting")
    assert run_cli(repo.root, "run", sid).returncode == 0
    result = run_cli(repo.root, "log", sid, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.output
    assert "(s)" not in result.output
    assert f"1 event shortened; `ai-sdlc log {sid} --full` shows it whole" in result.stderr
