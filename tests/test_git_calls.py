"""How often a story run asks git, and that asking less changed no answer.

Every git call forks a process (~2-4 ms CPU each, and a fork of a large Python process): issue
10 puts the tool's own overhead per story at 0.2 s. A scripted story run in a git project with a
bare `origin` once made 50 git calls; it now makes 20 (`bench/bench_run.py`'s project). The
first test counts them through the real CLI with a logging `git` first on PATH (counted, never
timed); the others pin the answers the fewer calls must still give: the base branch a story
starts from, the checkpoint an agent cannot move, the commit that must not be empty, and the
identity a commit falls back to.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.git.run import GitError
from ai_sdlc.git.workspace import GitWorkspace
from ai_sdlc.store import StoryStore
from ai_sdlc.store.story import Story
from tests.conftest import run_cli
from tests.fakes.gh_support import gh_calls, install_gh
from tests.git_support import Repo, git, git_env, make_repo, repo

__all__ = ["git_env", "repo"]

pytestmark = pytest.mark.usefixtures("git_env")

#: Git calls one story run (backlog → done, one passing attempt, push + PR) may make.
GIT_CALLS_PER_STORY = 20


def logging_git(bin_dir: Path, log: Path) -> None:
    """`bin_dir/git`: appends its arguments to `log`, then runs the real git."""
    real = shutil.which("git")
    assert real is not None, "these tests need git"
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)


@pytest.mark.skipif(os.name == "nt", reason="the logging git wrapper is a POSIX shell script")
def test_one_story_run_makes_at_most_twenty_git_calls(tmp_path: Path) -> None:
    project = make_repo(tmp_path)
    test = shlex.join([sys.executable, "-c", "pass"])
    (project.root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  build: {json.dumps(test)}\n  test: {json.dumps(test)}\n"
    )
    sid = project.story("Add a greeting")
    bin_dir, log, gh_log = tmp_path / "bin", tmp_path / "git.log", tmp_path / "gh.log"
    install_gh(bin_dir)
    logging_git(bin_dir, log)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_GH_LOG": str(gh_log)}

    result = run_cli(project.root, "run", sid, env=env)

    assert result.returncode == 0, result.output
    assert "status: done" in (project.root / ".ai-sdlc" / "stories" / sid / "story.md").read_text()
    assert [c[:2] for c in gh_calls(gh_log)].count(["pr", "create"]) == 1  # pushed, PR opened
    calls = log.read_text().splitlines()
    # The stand-in gh checks the push with `git ls-remote` (the real gh asks GitHub): not ours.
    ours = [c for c in calls if not c.startswith("ls-remote ")]
    listing = "\n".join(f"  {c[:160]}" for c in ours)
    assert len(ours) <= GIT_CALLS_PER_STORY, (
        f"one story run made {len(ours)} git calls (budget {GIT_CALLS_PER_STORY}; each forks "
        f"a process): ask git less, or raise the budget with a reason.\n{listing}"
    )
    # The checks that must stay: one `status` after each agent phase (refine, research, plan,
    # implement, review) and the commit itself.
    assert sum(c.startswith("status ") for c in ours) == 5, listing
    assert sum(c.endswith(" commit --quiet --no-verify --file=-") for c in ours) == 1, listing


# --- the answers behind fewer calls --------------------------------------------------------------


def story_of(repo: Repo, story_id: str) -> Story:
    return StoryStore(repo.root).get(story_id)


def prepared(ws: GitWorkspace, repo: Repo, story_id: str) -> tuple[Story, Path]:
    story = story_of(repo, story_id)
    prep = ws.prepare(story)
    recorded = Story(story.id, story.path, {**dict(story.frontmatter), **prep.fields})
    return recorded, prep.path


def test_new_story_starts_from_the_remote_head_not_the_checkouts_branch(repo: Repo) -> None:
    git(repo.root, "switch", "-q", "-c", "develop")
    (repo.root / "dev.txt").write_text("develop\n")
    repo.commit_all("on develop")
    git(repo.root, "push", "-q", "origin", "develop")
    git(repo.root, "remote", "set-head", "origin", "develop")
    git(repo.root, "switch", "-q", "main")
    sid = repo.story()

    prep = GitWorkspace(repo.root).prepare(story_of(repo, sid))

    assert prep.notice and prep.notice.endswith("from develop")
    assert git(prep.path, "rev-parse", "HEAD") == git(repo.root, "rev-parse", "develop")


def test_without_a_remote_head_a_story_starts_from_the_checkouts_branch(repo: Repo) -> None:
    git(repo.root, "switch", "-q", "-c", "feature")
    (repo.root / "feature.txt").write_text("feature\n")
    repo.commit_all("on feature")
    sid = repo.story()

    ws = GitWorkspace(repo.root)
    prep = ws.prepare(story_of(repo, sid))

    assert prep.notice and prep.notice.endswith("from feature")
    assert git(prep.path, "rev-parse", "HEAD") == git(repo.root, "rev-parse", "feature")
    assert ws.base_branch() == "feature"


def test_a_remote_head_naming_a_deleted_branch_is_refused_as_before(repo: Repo) -> None:
    git(repo.root, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/gone")
    sid = repo.story()

    with pytest.raises(GitError, match="base branch 'gone' does not exist"):
        GitWorkspace(repo.root).prepare(story_of(repo, sid))


def test_an_agent_cannot_hide_its_commit_by_moving_the_checkpoint(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(ws, repo, sid)
    base = git(path, "rev-parse", "HEAD").strip()
    # During a read-only phase the agent commits and points the checkpoint ref at its commit.
    (path / "sneaky.py").write_text("x = 1\n")
    git(path, "add", "sneaky.py")
    git(path, "commit", "-q", "-m", "agent")
    git(path, "update-ref", f"refs/ai-sdlc/checkpoints/{sid}", "HEAD")

    assert ws.read_only_violations(story, path) == ["HEAD (a commit was made)"]
    ws.revert(story, path)
    assert git(path, "rev-parse", "HEAD").strip() == base
    assert not (path / "sneaky.py").exists()


def test_changes_staged_back_to_head_make_no_empty_commit(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(ws, repo, sid)
    head = git(path, "rev-parse", "HEAD")
    original = (path / "README.md").read_text()
    (path / "README.md").write_text("staged by the agent\n")
    git(path, "add", "README.md")
    (path / "README.md").write_text(original)  # ... then put back: `git status` says MM

    assert ws.attempt_passed(story, path, attempt=1).commit is None
    assert git(path, "rev-parse", "HEAD") == head


def test_a_commit_falls_back_to_our_identity_only_without_user_email(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(ws, repo, sid)
    (path / "a.py").write_text("a = 1\n")
    ws.attempt_passed(story, path, attempt=1)
    assert git(path, "log", "-1", "--format=%ae") == "test@example.com\n"

    empty = tmp_path / "no-identity"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GIT_COMMITTER_EMAIL", raising=False)
    other = GitWorkspace(repo.root)  # a new run: `user.email` is read again
    story, path = prepared(other, repo, sid)
    (path / "b.py").write_text("b = 1\n")
    other.attempt_passed(story, path, attempt=2)
    assert git(path, "log", "-1", "--format=%an <%ae>") == "ai-sdlc <ai-sdlc@localhost>\n"


def test_status_v2_reports_what_porcelain_v1_did_plus_head(repo: Repo) -> None:
    """`staging.snapshot` reads porcelain v2 (for HEAD's sha in the same call): its changes
    are exactly porcelain v1's, awkward names, deletions, staged and unmerged paths included."""
    from ai_sdlc.git import staging

    root = repo.root
    (root / "both.txt").write_text("base\n")
    repo.commit_all("base")
    git(root, "switch", "-q", "-c", "other")
    (root / "both.txt").write_text("theirs\n")
    repo.commit_all("theirs")
    git(root, "switch", "-q", "main")
    (root / "both.txt").write_text("ours\n")
    repo.commit_all("ours")
    done = subprocess.run(["git", "merge", "-q", "other"], cwd=root, capture_output=True)
    assert done.returncode != 0  # a conflict: both.txt is unmerged
    (root / "README.md").unlink()
    (root / "with space.txt").write_text("x\n")
    (root / "line\nbreak.txt").write_text("x\n")
    (root / "staged.py").write_text("x = 1\n")
    git(root, "add", "staged.py")
    (root / "staged.py").write_text("x = 2\n")

    v1 = git(root, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames")
    expected = sorted((t[:2], t[3:]) for t in v1.split("\0") if t)
    snap = staging.snapshot(root, include_state=True)

    assert sorted((c.xy, c.path) for c in snap.changes) == expected
    assert ("UU", "both.txt") in expected and ("AM", "staged.py") in expected
    assert snap.head == git(root, "rev-parse", "HEAD").strip()
