"""`ai-sdlc worktrees`, `ai-sdlc worktrees prune` and `ai-sdlc pr` through the real CLI, on a
real git repository with a local bare `origin` and the stand-in `gh` on PATH."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.git.workspace import GitWorkspace
from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.fakes.gh_support import gh_calls
from tests.support.git_support import Repo, checkout_snapshot, gh_log, git, git_env, repo

__all__ = ["gh_log", "git_env", "repo"]

pytestmark = pytest.mark.usefixtures("git_env")


def work_on(repo: Repo, title: str, files: dict[str, str], *, commit: bool) -> tuple[str, Path]:
    """A story whose worktree holds `files` (committed as an attempt, or left uncommitted)."""
    sid = repo.story(title)
    ws = GitWorkspace(repo.root)
    story = StoryStore(repo.root).get(sid)
    path = ws.prepare(story).path
    for name, text in files.items():
        (path / name).write_text(text)
    if commit:
        ws.attempt_passed(story, path, attempt=1)
    return sid, path


def set_status(repo: Repo, sid: str, status: str) -> None:
    path = StoryStore(repo.root).story_path(sid)
    text = path.read_text()
    path.write_text(re.sub(r"(?m)^status: .*$", f"status: {status}", text, count=1))


def listing(repo: Repo) -> dict[str, Any]:
    result = run_cli(repo.root, "worktrees", "--json")
    assert result.returncode == 0, result.output
    return {w["story"]: w for w in json.loads(result.stdout)["worktrees"]}


def test_worktrees_lists_status_branch_dirty_and_ahead_behind(repo: Repo) -> None:
    one, _ = work_on(repo, "Add login", {"login.py": "x = 1\n"}, commit=True)
    two, _ = work_on(repo, "Fix logout", {"logout.py": "y = 2\n"}, commit=False)
    (repo.root / "later.txt").write_text("a new commit on main\n")
    repo.commit_all("main moves on")

    found = listing(repo)

    assert found[one]["branch"] == f"ai-sdlc/{one}-add-login"
    assert found[one]["path"] == f".ai-sdlc/worktrees/{one}-add-login"
    assert (found[one]["state"], found[one]["ahead"], found[one]["behind"]) == ("clean", 1, 1)
    assert (found[two]["state"], found[two]["ahead"], found[two]["changed"]) == (
        "dirty",
        0,
        ["logout.py"],
    )
    assert found[one]["status"] == found[two]["status"] == "backlog"

    human = run_cli(repo.root, "worktrees")
    assert human.returncode == 0, human.output
    assert f"{one}  backlog" in human.output and "clean" in human.output
    assert "+1/-1" in human.output and f"ai-sdlc/{two}-fix-logout" in human.output


def test_worktrees_outside_git_is_a_clear_error(project: Path) -> None:
    result = run_cli(project, "worktrees")
    assert result.returncode == 1
    assert "not inside a git repository" in result.stderr and "Traceback" not in result.output


def test_prune_removes_finished_clean_worktrees_and_keeps_uncommitted_work(repo: Repo) -> None:
    done_clean, clean_path = work_on(repo, "Done clean", {"a.py": "a\n"}, commit=True)
    done_dirty, dirty_path = work_on(repo, "Done dirty", {"b.py": "b\n"}, commit=False)
    active, active_path = work_on(repo, "Still going", {"c.py": "c\n"}, commit=False)
    set_status(repo, done_clean, "done")
    set_status(repo, done_dirty, "done")
    (repo.root / "mine.txt").write_text("the user's own uncommitted file\n")
    before = checkout_snapshot(repo.root)

    result = run_cli(repo.root, "worktrees", "prune", "--json")

    assert result.returncode == 0, result.output
    report = json.loads(result.stdout)
    assert report["removed"] == [f".ai-sdlc/worktrees/{done_clean}-done-clean"]
    assert (
        "uncommitted work (b.py)" in report["kept"][f".ai-sdlc/worktrees/{done_dirty}-done-dirty"]
    )
    assert not clean_path.exists() and dirty_path.exists() and active_path.exists()
    assert git(repo.root, "branch", "--list", f"ai-sdlc/{done_clean}-*").strip()  # branch kept

    forced = run_cli(repo.root, "worktrees", "prune", "--force")
    assert forced.returncode == 0, forced.output
    assert not dirty_path.exists() and (active_path / "c.py").exists()
    assert set(listing(repo)) == {active}
    assert checkout_snapshot(repo.root) == before


def test_pr_opens_once_records_pr_url_then_reuses(repo: Repo, gh_log: Path) -> None:
    sid, _ = work_on(repo, "Add login", {"login.py": "x = 1\n"}, commit=True)

    first = run_cli(repo.root, "pr", sid, "--json")
    second = run_cli(repo.root, "pr", sid)

    assert first.returncode == 0, first.output
    data = json.loads(first.stdout)
    url = "https://github.com/example/project/pull/1"
    assert (data["outcome"], data["pr_url"], data["branch"]) == (
        "opened",
        url,
        f"ai-sdlc/{sid}-add-login",
    )
    assert second.returncode == 0, second.output
    assert f"already open: {url}" in second.stdout
    assert StoryStore(repo.root).get(sid).frontmatter["pr_url"] == url
    creates = [c for c in gh_calls(gh_log) if c[:2] == ["pr", "create"]]
    assert len(creates) == 1 and creates[0][creates[0].index("--title") + 1] == f"{sid}: Add login"
    assert repo.origin is not None
    assert git(repo.origin, "branch", "--list", f"ai-sdlc/{sid}-add-login").strip()


def test_pr_without_gh_fails_with_the_command_to_run(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sid, _ = work_on(repo, "Add login", {"login.py": "x = 1\n"}, commit=True)
    real_git = shutil.which("git")
    assert real_git is not None
    only_git = tmp_path / "only-git"
    only_git.mkdir()
    (only_git / "git").symlink_to(real_git)
    monkeypatch.setenv("PATH", str(only_git))  # git, and no gh

    result = run_cli(repo.root, "pr", sid)

    assert result.returncode == 1, result.output  # nothing published: not a success
    assert result.stdout == ""
    assert "error: no pull request: gh (GitHub CLI) not found" in result.stderr
    assert f"`ai-sdlc pr {sid}`" in result.stderr
    assert "pr_url" not in StoryStore(repo.root).get(sid).frontmatter


def test_pr_for_a_story_without_a_branch_says_so(repo: Repo, gh_log: Path) -> None:
    sid = repo.story("Never run")
    result = run_cli(repo.root, "pr", sid)
    assert result.returncode == 1
    assert "has no branch to publish" in result.stderr and f"ai-sdlc run {sid}" in result.stderr
    assert gh_calls(gh_log) == []
