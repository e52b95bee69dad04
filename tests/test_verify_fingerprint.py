"""workspace_fingerprint with a real git repository and with a plain folder."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.verify import workspace_fingerprint

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_tree(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# demo\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    make_tree(root)
    (root / ".gitignore").write_text("build/\n*.log\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


@needs_git
def test_git_stable_without_changes(repo: Path) -> None:
    assert workspace_fingerprint(repo) == workspace_fingerprint(repo)


@needs_git
def test_git_tracked_edit_changes_it_and_reverting_restores_it(repo: Path) -> None:
    before = workspace_fingerprint(repo)
    app = repo / "src" / "app.py"
    app.write_text("print('changed')\n")
    assert workspace_fingerprint(repo) != before
    app.write_text("print('hi')\n")
    assert workspace_fingerprint(repo) == before


@needs_git
def test_git_untracked_file_counts_but_ignored_does_not(repo: Path) -> None:
    before = workspace_fingerprint(repo)
    (repo / "build").mkdir()
    (repo / "build" / "out.bin").write_bytes(b"\x00\x01")
    (repo / "debug.log").write_text("noise\n")
    assert workspace_fingerprint(repo) == before
    (repo / "src" / "new_module.py").write_text("X = 1\n")
    assert workspace_fingerprint(repo) != before


@needs_git
def test_git_deletion_and_mode_change_count(repo: Path) -> None:
    before = workspace_fingerprint(repo)
    (repo / "src" / "app.py").chmod(0o755)
    after_chmod = workspace_fingerprint(repo)
    assert after_chmod != before
    (repo / "README.md").unlink()
    assert workspace_fingerprint(repo) not in (before, after_chmod)


@needs_git
def test_git_runner_state_folder_is_ignored(repo: Path) -> None:
    (repo / ".ai-sdlc" / "stories" / "S-0001").mkdir(parents=True)
    story = repo / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    story.write_text("---\nstatus: ready\n---\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "story")
    before = workspace_fingerprint(repo)
    story.write_text("---\nstatus: in-progress\n---\n")
    assert workspace_fingerprint(repo) == before


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "plain"])
def test_runner_state_changes_do_not_count_but_source_changes_do(
    tmp_path: Path, use_git: bool
) -> None:
    if use_git and shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "work"
    make_tree(root)
    if use_git:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "init")
    stories = root / ".ai-sdlc" / "stories"
    for n in range(1, 4):  # untracked runner state, as in a project that never commits it
        (stories / f"S-{n:04d}").mkdir(parents=True)
        (stories / f"S-{n:04d}" / "story.md").write_text(f"---\nstatus: ready\nid: {n}\n---\n")
    before = workspace_fingerprint(root)
    (stories / "S-0002" / "story.md").write_text("---\nstatus: done\n---\n")
    (stories / "S-0004").mkdir()
    (stories / "S-0004" / "story.md").write_text("---\nstatus: backlog\n---\n")
    (root / ".ai-sdlc" / "events.jsonl").write_text("{}\n")
    assert workspace_fingerprint(root) == before
    (root / "src" / "app.py").write_text("print('implemented')\n")
    assert workspace_fingerprint(root) != before


@needs_git
def test_git_subfolder_workspace_sees_only_its_files(repo: Path) -> None:
    sub = repo / "src"
    before = workspace_fingerprint(sub)
    (repo / "README.md").write_text("# other\n")
    assert workspace_fingerprint(sub) == before
    (sub / "app.py").write_text("print('sub')\n")
    assert workspace_fingerprint(sub) != before


@needs_git
def test_folder_ignored_by_an_enclosing_repo_is_walked(repo: Path) -> None:
    ignored = repo / "build"
    ignored.mkdir()
    (ignored / "a.txt").write_text("one\n")
    before = workspace_fingerprint(ignored)
    (ignored / "a.txt").write_text("two\n")
    assert workspace_fingerprint(ignored) != before


def test_plain_folder_stable_and_edits_change_it(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    make_tree(root)
    before = workspace_fingerprint(root)
    assert workspace_fingerprint(root) == before
    (root / "src" / "app.py").write_text("print('changed')\n")
    changed = workspace_fingerprint(root)
    assert changed != before
    (root / "src" / "extra.py").write_text("")
    assert workspace_fingerprint(root) not in (before, changed)


def test_plain_folder_skips_tooling_folders(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    make_tree(root)
    before = workspace_fingerprint(root)
    for folder in (".git", ".venv", "__pycache__", "node_modules", ".ai-sdlc", "src/__pycache__"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "noise.txt").write_text("noise\n")
    assert workspace_fingerprint(root) == before


def test_plain_folder_symlinks_are_hashed_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.txt").write_text("outside\n")
    root = tmp_path / "plain"
    make_tree(root)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    before = workspace_fingerprint(root)
    (outside / "big.txt").write_text("changed outside\n")
    assert workspace_fingerprint(root) == before
    (root / "linked").unlink()
    (root / "linked").symlink_to(root / "src")
    assert workspace_fingerprint(root) != before


def test_missing_folder_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such folder"):
        workspace_fingerprint(tmp_path / "nope")
