"""No verification configured: a story cannot reach `done` unless the project says so
(`verify.none: true`, a guardrail the environment cannot set); then the story, `show`, `list`,
the board, the pull request and the report say "unverified", and the progress names only the
steps that happen (nothing is committed or pushed outside git)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.fakes.gh_support import gh_calls
from tests.support.git_support import Repo, gh_log, git_env, make_repo  # noqa: F401 (fixtures)


def _bare_project(root: Path) -> Path:
    root.mkdir()
    assert run_cli(root, "init").returncode == 0
    assert run_cli(root, "add", "Unverified change").returncode == 0
    return root


@pytest.mark.e2e
def test_without_verify_none_a_run_refuses_and_touches_nothing(tmp_path: Path) -> None:
    root = _bare_project(tmp_path / "proj")
    story = root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    before = story.read_bytes()
    for args in (("run", "S-0001"), ("run", "--auto")):
        result = run_cli(root, *args)
        assert result.returncode == 3, result.output
        assert result.stderr.count("no verification configured") == 1, result.stderr
        assert "ai-sdlc config verify.none true" in result.stderr
    assert story.read_bytes() == before
    assert not (root / ".ai-sdlc" / "stories" / "S-0001" / "events.jsonl").exists()
    # The environment cannot say it for the project: verify.none is a guardrail.
    loosened = run_cli(root, "run", "S-0001", env={"AI_SDLC_VERIFY__NONE": "true"})
    assert loosened.returncode == 3, loosened.output
    assert "would loosen the guardrail verify.none" in loosened.stderr
    assert story.read_bytes() == before


@pytest.mark.e2e
def test_verify_none_is_done_unverified_and_said_everywhere(tmp_path: Path) -> None:
    root = _bare_project(tmp_path / "proj")
    assert run_cli(root, "config", "verify.none", "true").returncode == 0
    result = run_cli(root, "run", "S-0001")
    assert result.returncode == 0, result.output
    assert "committing" not in result.output and "pushing" not in result.output  # no git
    fm = json.loads(run_cli(root, "show", "S-0001", "--json").stdout)
    assert fm["frontmatter"]["status"] == "done" and fm["unverified"] is True
    assert "unverified: true" in (root / ".ai-sdlc/stories/S-0001/story.md").read_text()
    assert "done (unverified" in run_cli(root, "show", "S-0001").stdout
    assert "done (unverified)" in run_cli(root, "list").stdout
    assert "unverified" in run_cli(root, "status").stdout
    assert "done (unverified)" in run_cli(root, "report", "S-0001").stdout


@pytest.mark.e2e
@pytest.mark.usefixtures("git_env", "gh_log")
def test_the_pull_request_of_an_unverified_story_says_so(tmp_path: Path) -> None:
    log = tmp_path / "gh.log"  # the stand-in `gh` of the fixture logs here
    repo: Repo = make_repo(tmp_path)
    sid = repo.story("Unverified change")
    repo.commit_all("a story")
    result = run_cli(repo.root, "run", sid)
    assert result.returncode == 0, result.output
    created = [argv for argv in gh_calls(log) if argv[:2] == ["pr", "create"]]
    assert created, gh_calls(log)
    body = created[0][created[0].index("--body") + 1]
    assert "**Unverified**: nothing was built or tested" in body, body
