"""A project the TypeScript tool made (story files, no `.ai-sdlc/.gitignore`, never `init`-ed by
us) stays clean in `git status`: caches, locks, state, runs and worktrees are ignored from their
first use, and `unblock --reset-retries` writes only counters the story already has plus
`total_recovery_attempts`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import allow_unverified, run_cli
from tests.support.git_support import git, git_env  # noqa: F401 (fixture)
from tests.support.paths import FIXTURES
from tests.support.runs_support import frontmatter

FIXTURES = FIXTURES / "stories"
LEGACY = ("implementation_retry_count", "retry_count", "refinement_count")


def foreign_repo(tmp_path: Path) -> Path:
    root = tmp_path / "ts-project"
    stories = root / ".ai-sdlc" / "stories"
    stories.mkdir(parents=True)
    for sid in ("S-0003", "S-0020"):
        shutil.copytree(FIXTURES / sid, stories / sid)
    (root / "README.md").write_text("# a TypeScript ai-sdlc project\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "stories from the TypeScript tool")
    assert not (root / ".ai-sdlc" / ".gitignore").exists()
    return root


def porcelain(root: Path) -> list[str]:
    return git(root, "status", "--porcelain", "--untracked-files=all").splitlines()


@pytest.mark.usefixtures("git_env")
def test_status_leaves_git_status_clean(tmp_path: Path) -> None:
    root = foreign_repo(tmp_path)
    result = run_cli(root, "status")
    assert result.returncode == 0, result.output
    result = run_cli(root, "status", "--json")  # the second look writes the listing cache
    assert result.returncode == 0, result.output
    assert (root / ".ai-sdlc" / ".gitignore").exists()
    assert porcelain(root) == []


@pytest.mark.usefixtures("git_env")
@pytest.mark.parametrize("worktree", [False, True])
def test_a_run_changes_only_the_story_files(tmp_path: Path, worktree: bool) -> None:
    root = foreign_repo(tmp_path)
    allow_unverified(root)  # the project's config, committed, says stories may be unverified
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "ai-sdlc config")
    args = ["run", "S-0020"] + ([] if worktree else ["--no-worktree"])
    result = run_cli(root, *args)
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0020")["status"] == "done"
    for folder in (".locks", "state"):
        assert (root / ".ai-sdlc" / folder).is_dir(), folder
    changed = porcelain(root)
    assert " M .ai-sdlc/stories/S-0020/story.md" in changed
    # Without a worktree the (scripted) agent works in the checkout itself: its change shows.
    agents_work = [] if worktree else ["?? scripted-changes/S-0020.md"]
    stray = [
        line
        for line in changed
        if not line[3:].startswith(".ai-sdlc/stories/S-0020/") and line not in agents_work
    ]
    assert stray == [], changed


@pytest.mark.usefixtures("git_env")
def test_reset_retries_adds_no_counter_the_story_never_had(tmp_path: Path) -> None:
    root = foreign_repo(tmp_path)
    before = (root / ".ai-sdlc" / "stories" / "S-0003" / "story.md").read_text()
    assert not any(name in before for name in (*LEGACY, "total_recovery_attempts"))
    result = run_cli(root, "unblock", "S-0003", "--reset-retries")
    assert result.returncode == 0, result.output
    after = (root / ".ai-sdlc" / "stories" / "S-0003" / "story.md").read_text()
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert added == ["total_recovery_attempts: 0"], added
    fm = frontmatter(root, "S-0003")
    assert not any(name in fm for name in LEGACY)
    assert porcelain(root) == [
        " M .ai-sdlc/stories/S-0003/story.md",
        "?? .ai-sdlc/stories/S-0003/events.jsonl",  # the story's own log of the unblock
    ]
