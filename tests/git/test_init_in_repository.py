"""Issue 26 item 6: `init` inside a git repository creates the project at the repository's top
(and says so) unless `--here`; `doctor` reports a nested `.ai-sdlc` between the current folder
and the repository's top, with the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.cli.test_cli_conventions import run_in
from tests.support.git_support import git, git_env  # noqa: F401 (fixture)


def repository(tmp_path: Path) -> tuple[Path, Path]:
    top = tmp_path / "app"
    deep = top / "src" / "pkg"
    deep.mkdir(parents=True)
    git(top, "init", "-q", "-b", "main")
    return top, deep


@pytest.mark.usefixtures("git_env")
def test_init_in_a_subfolder_creates_the_project_at_the_repository_top(tmp_path: Path) -> None:
    top, deep = repository(tmp_path)
    result = run_in(deep, "init")
    assert result.returncode == 0, result.output
    assert (top / ".ai-sdlc" / "stories").is_dir()
    assert not (deep / ".ai-sdlc").exists()
    assert f"inside the git repository {top.resolve()}" in result.stderr, result.stderr
    assert str(top.resolve() / ".ai-sdlc") in result.output  # says where
    assert "--here" in result.stderr
    # Every command below finds that one project.
    assert run_in(deep, "add", "From below").stdout == "S-0001\n"
    assert (top / ".ai-sdlc" / "stories" / "S-0001" / "story.md").is_file()
    again = run_in(deep / "..", "init", "--json")
    assert json.loads(again.stdout)["project"] == str(top.resolve())
    assert json.loads(again.stdout)["created"] is False


@pytest.mark.usefixtures("git_env")
def test_init_here_keeps_a_separate_project_in_the_current_folder(tmp_path: Path) -> None:
    top, deep = repository(tmp_path)
    result = run_in(deep, "init", "--here")
    assert result.returncode == 0, result.output
    assert (deep / ".ai-sdlc" / "stories").is_dir()
    assert not (top / ".ai-sdlc").exists()


@pytest.mark.usefixtures("git_env")
def test_doctor_reports_a_nested_project_with_the_fix(tmp_path: Path) -> None:
    top, deep = repository(tmp_path)
    assert run_in(top, "init").returncode == 0
    assert run_in(deep, "init", "--here").returncode == 0
    below = deep / "inner"
    below.mkdir()
    clean = run_in(top, "doctor")
    assert "nested project" not in clean.output, clean.output
    report = run_in(below, "doctor")
    nested = deep.resolve() / ".ai-sdlc"
    assert f"⚠ nested project {nested} inside the git repository {top.resolve()}" in (
        report.output
    ), report.output
    assert f"use it instead of {top.resolve()}'s project" in report.output
    assert "fix: " in report.output and f"remove {nested}" in report.output
    data = json.loads(run_in(below, "doctor", "--json").stdout)
    assert [n["folder"] for n in data["nested_projects"]] == [str(nested)]


@pytest.mark.usefixtures("git_env")
def test_doctor_says_how_to_move_a_nested_project_when_the_top_has_none(tmp_path: Path) -> None:
    top, deep = repository(tmp_path)
    assert run_in(deep, "init", "--here").returncode == 0
    report = run_in(deep, "doctor")
    assert f"fix: move it to the top: mv {deep.resolve() / '.ai-sdlc'} {top.resolve()}/" in (
        report.output
    ), report.output


@pytest.mark.usefixtures("git_env")
def test_a_here_project_runs_its_stories_in_worktrees_of_the_whole_repository(
    tmp_path: Path,
) -> None:
    """`init --here` in a subfolder of the repository (a monorepo's service): its own project
    there, its story run (scripted) to done in a worktree of the whole repository, and git
    then sees only its story files and its config in the subfolder."""
    top, _ = repository(tmp_path)
    git(top, "commit", "-q", "--allow-empty", "-m", "start")
    service = top / "service"
    service.mkdir()
    assert run_in(service, "init", "--here").returncode == 0
    # An empty project has nothing to test: the user says so (else the run refuses, exit 3).
    assert run_in(service, "config", "verify.none", "true").returncode == 0
    assert run_in(service, "add", "Health endpoint").stdout == "S-0001\n"
    done = run_in(service, "run", "S-0001", env={"AI_SDLC_PROVIDER": "scripted"})
    assert done.returncode == 0, done.output
    assert StoryStore(service).get("S-0001").frontmatter["status"] == "done"
    status = git(service, "status", "--porcelain", "--untracked-files=all")
    paths = sorted(line[3:] for line in status.splitlines())
    assert "service/.ai-sdlc/stories/S-0001/story.md" in paths, status
    assert all(
        p.startswith("service/.ai-sdlc/stories/")
        or p in ("service/.ai-sdlc/config.yaml", "service/.ai-sdlc/.gitignore")
        for p in paths
    ), status
