"""The wording slips of issue 25 item 9, each through the real CLI: plurals, a/an, nothing said
twice, attempt numbers that agree with the commit trailer after `unblock`, a mistyped config
key, `worktrees`' header, `watch --once --json`, failed verifications in `metrics`, `pr` that
did nothing. (`import github`'s label → type mapping: tests/cli/test_add_from_and_import.py.)"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.git.issues import story_type
from ai_sdlc.store import StoryStore
from ai_sdlc.wording import article, count
from tests.conftest import CliRunner, cli_environment, run_cli
from tests.support.git_support import Repo, gh_log, git, git_env, repo

__all__ = ["gh_log", "git_env", "repo"]


def failing_until(marker: Path) -> str:
    """A `verify.test` that fails until `marker` exists, naming its failing test as a runner
    does (a failure that names no test is a broken verify command at the base: issue 33)."""
    code = (
        f"import os, sys\nif not os.path.exists({str(marker)!r}):\n"
        "    print('FAILED tests/test_marker.py::test_marker - no marker yet')\n    sys.exit(1)\n"
    )
    return shlex.join([sys.executable, "-c", code])


def test_words_for_counts_and_articles() -> None:
    assert [count(n, "story") for n in (0, 1, 2)] == ["0 stories", "1 story", "2 stories"]
    assert count(1, "attempt") == "1 attempt" and count(3, "retry") == "3 retries"
    assert article("implementation retry") == "an implementation retry"
    assert article("rework cycle") == "a rework cycle"
    assert article("API retry") == "an API retry"
    assert article("refinement iteration") == "a refinement iteration"


def test_one_story_is_one_story(cli: CliRunner) -> None:
    assert cli("add", "Only one").returncode == 0
    result = cli("run", "--batch", "S-0001", "--no-sandbox")
    assert result.returncode == 0, result.output
    assert "started: 1 story (S-0001)" in result.stderr
    assert re.search(r"completed\. 1 story · ", result.stdout), result.stdout
    assert "1 stories" not in result.output and "1 attempts" not in result.output


@pytest.mark.usefixtures("git_env")
def test_the_pull_request_line_says_it_once(repo: Repo, gh_log: Path) -> None:
    sid = repo.story("Add login")
    result = run_cli(repo.root, "run", sid)
    assert result.returncode == 0, result.output
    url = "https://github.com/example/project/pull/1"
    lines = [ln for ln in result.stderr.splitlines() if "pull request" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"[{sid}] pull request opened {url}"), lines
    assert result.output.count("pull request opened") == 1


def test_a_blocked_story_is_said_blocked_once(cli: CliRunner, project: Path) -> None:
    assert cli("add", "Stuck").returncode == 0
    path = StoryStore(project).story_path("S-0001")
    path.write_text(
        path.read_text().replace("status: backlog", "status: blocked\nblocked_reason: no key", 1)
    )
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output
    assert result.stdout == "S-0001: blocked: no key\n"
    assert "is blocked" not in result.output and "warning: S-0001" not in result.stderr


def test_a_dead_processs_attempt_counts_as_an_implementation_retry(
    cli: CliRunner, project: Path
) -> None:
    assert cli("add", "Crashy").returncode == 0
    reserve = (
        "import sys; from pathlib import Path; from ai_sdlc.store import StoryStore;"
        "from ai_sdlc.providers.base import Phase;"
        "from ai_sdlc.workflow.state.transitions import StoryState;"
        "StoryState(StoryStore(Path(sys.argv[1]))).begin_action('S-0001', Phase.IMPLEMENT)"
    )
    env = cli_environment()
    died = subprocess.run([sys.executable, "-c", reserve, str(project)], env=env, check=False)
    assert died.returncode == 0  # the reservation stays open: its process is gone
    result = cli("run", "S-0001", "--step", "refine")
    assert "Traceback" not in result.output
    events = [
        json.loads(line)
        for line in (project / ".ai-sdlc/stories/S-0001/events.jsonl").read_text().splitlines()
    ]
    stale = [e for e in events if e.get("action") == "recovery" and e.get("stale")]
    assert len(stale) == 1, events
    assert stale[0]["reason"].endswith("the attempt counts as an implementation retry")


@pytest.mark.usefixtures("git_env")
def test_after_a_plain_unblock_the_console_and_the_commit_trailer_agree(
    repo: Repo, tmp_path: Path
) -> None:
    root = repo.root
    marker = tmp_path / "pass-now"
    for key, value in (
        ("verify.test", failing_until(marker)),
        ("limits.implementation_retries", "1"),
        ("git.keep_worktrees", "true"),
    ):
        assert run_cli(root, "config", key, value).returncode == 0
    sid = repo.story("Multiply")
    first = run_cli(root, "run", sid)
    assert first.returncode == 5, first.output  # two failed attempts: over the limit of 1
    assert "implement · attempt 1 · retries 0/1" in first.stderr
    assert "implement · attempt 2 · retries 1/1" in first.stderr
    assert run_cli(root, "unblock", sid).returncode == 0  # plain: the counters stay
    marker.write_text("")
    second = run_cli(root, "run", sid)
    assert second.returncode == 0, second.output
    said = "implement · attempt 3 · retries spent (2/1, unblocked): the next failure blocks"
    assert said in second.stderr, second.stderr
    assert "/1 " not in second.stderr.replace("(2/1,", "")  # never "attempt 3/2"
    branch = StoryStore(root).get(sid).frontmatter["branch"]
    log = git(root, "log", "--format=%B", f"main..{branch}")
    assert "AI-SDLC-Attempt: 3" in log, log


def test_a_mistyped_config_key_is_an_unknown_key_not_a_file_error(
    cli: CliRunner, project: Path
) -> None:
    before = (project / ".ai-sdlc" / "config.yaml").read_text()
    result = cli("config", "verify.tset", "x")
    assert result.returncode == 2, result.output
    assert "error: unknown config key 'verify.tset'" in result.stderr
    assert "did you mean 'verify.test'?" in result.stderr
    assert "config.yaml" not in result.stderr
    assert (project / ".ai-sdlc" / "config.yaml").read_text() == before


@pytest.mark.usefixtures("git_env")
def test_worktrees_has_a_header_row(repo: Repo) -> None:
    assert run_cli(repo.root, "config", "git.keep_worktrees", "true").returncode == 0
    sid = repo.story("Listed")
    assert run_cli(repo.root, "run", sid).returncode == 0
    listed = run_cli(repo.root, "worktrees")
    header, row = listed.stdout.splitlines()
    assert header.split() == ["STORY", "STATUS", "STATE", "+AHEAD/-BEHIND", "BRANCH", "PATH"]
    assert row.split()[:3] == [sid, "done", "clean"]
    assert row.index("ai-sdlc/") == header.index("BRANCH")  # the columns line up


def test_watch_once_json_prints_its_result(cli: CliRunner, project: Path) -> None:
    nothing = cli("watch", "--once", "--json", "--no-sandbox")
    assert nothing.returncode == 0, nothing.output
    assert [json.loads(line) for line in nothing.stdout.splitlines()] == [
        {
            "event": "watch_finished",
            "runs": [],
            "blocked": [],
            "halted": False,
            "stopped_by": None,
            "idle": {
                "message": "Nothing ready to run: no story has an actionable next step.",
                "exit_code": 0,
                "held": [],
                "unreadable": [],
            },
        }
    ]
    StoryStore(project).add("Ready one", status="ready")
    ran = cli("watch", "--once", "--json", "--no-sandbox")
    assert ran.returncode == 0, ran.output
    last = json.loads(ran.stdout.splitlines()[-1])
    assert last["event"] == "watch_finished" and len(last["runs"]) == 1
    assert [o["result"] for o in last["runs"][0]["outcomes"]] == ["done"]


def test_metrics_count_failed_verifications(cli: CliRunner, project: Path, tmp_path: Path) -> None:
    assert cli("config", "verify.test", failing_until(tmp_path / "never")).returncode == 0
    assert cli("config", "limits.implementation_retries", "2").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("run", "S-0001", "--no-worktree").returncode == 5
    verification = json.loads(cli("metrics", "--json").stdout)["policies"]["verification"]
    assert verification["failures"] == 3 and verification["failed_results"] == 3
    assert verification["successes"] == 0
    shown = cli("metrics")
    assert "verification: ops 3, ok 0, failed 3" in shown.stdout


@pytest.mark.usefixtures("git_env")
def test_pr_that_publishes_nothing_fails(tmp_path: Path) -> None:
    from tests.support.git_support import make_repo

    local = make_repo(tmp_path, remote=False)
    assert run_cli(local.root, "config", "git.keep_worktrees", "true").returncode == 0
    sid = local.story("No remote")
    assert run_cli(local.root, "run", sid).returncode == 0
    result = run_cli(local.root, "pr", sid)
    assert result.returncode == 1 and result.stdout == ""
    assert "error: no pull request: no git remote 'origin'" in result.stderr
    assert f"`ai-sdlc pr {sid}`" in result.stderr
    as_json = run_cli(local.root, "pr", sid, "--json")
    assert as_json.returncode == 1
    first, last = (json.loads(line) for line in as_json.stdout.splitlines())
    assert (first["outcome"], last["event"], last["exit_code"]) == ("skipped", "error", 1)


def test_issue_labels_name_the_story_type() -> None:
    assert story_type(["bug", "enhancement"]) == "bug"
    assert story_type(["Type: Bug"]) == "bug" and story_type(["kind/regression"]) == "bug"
    assert story_type(["enhancement"]) == "feature" and story_type([]) == "feature"
    assert story_type(["documentation"]) == "chore" and story_type(["question"]) == "spike"
    assert story_type(["good first issue"]) == "feature"
