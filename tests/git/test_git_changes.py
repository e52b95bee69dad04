"""What a story's work changed, asked of git (`ai_sdlc.git.changes`), with real repositories.

The content key of a work tree, the change against a base commit (earlier commits, uncommitted
edits, untracked files, with line counts), the review's diff and its cap, that no program named
by the repository's config or attributes runs while git is asked, and the story base a
`GitWorkspace` compares with (the fork point, also for a story resumed by another process).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ai_sdlc.git import changes
from ai_sdlc.git.seam import InPlace
from ai_sdlc.git.workspace import GitWorkspace
from ai_sdlc.workflow.engine.work import REVIEW_DIFF_LIMIT, change_section
from tests.support.git_support import Repo, git, git_env, make_repo, prepared, repo

__all__ = ["git_env", "repo"]

pytestmark = pytest.mark.usefixtures("git_env")


def key(root: Path) -> str:
    return changes.work_state(root).key


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def test_key_is_stable_changes_with_an_edit_and_comes_back_when_it_is_undone(repo: Repo) -> None:
    before = key(repo.root)
    assert key(repo.root) == before
    readme = repo.root / "README.md"
    readme.write_text("# changed\n")
    edited = key(repo.root)
    assert edited != before
    readme.write_text("# changed again\n")  # a second edit of a file already dirty
    assert key(repo.root) not in (before, edited)
    readme.write_text("# project\n")
    assert key(repo.root) == before


def test_untracked_work_counts_but_ignored_scratch_and_runner_state_do_not(repo: Repo) -> None:
    before = key(repo.root)
    (repo.root / "build").mkdir()
    (repo.root / "build" / "out.bin").write_bytes(b"\x00\x01")  # ignored by .gitignore
    (repo.root / "debug.log").write_text("noise\n")
    (repo.root / "notes.swp").write_text("swap\n")
    (repo.root / "__pycache__").mkdir()
    (repo.root / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\x00")
    (repo.root / ".ai-sdlc" / "stories" / "S-0009").mkdir(parents=True)
    (repo.root / ".ai-sdlc" / "stories" / "S-0009" / "story.md").write_text("---\n---\n")
    assert key(repo.root) == before
    (repo.root / "src").mkdir()
    (repo.root / "src" / "new_module.py").write_text("X = 1\n")
    assert key(repo.root) != before
    assert changes.work_state(repo.root).untracked == ("src/new_module.py",)


def test_a_deletion_and_a_mode_change_count(repo: Repo) -> None:
    before = key(repo.root)
    (repo.root / "README.md").chmod(0o755)
    chmodded = key(repo.root)
    assert chmodded != before
    (repo.root / ".gitignore").unlink()
    assert key(repo.root) not in (before, chmodded)


def test_a_commit_changes_the_key_even_with_a_clean_tree(repo: Repo) -> None:
    before = key(repo.root)
    git(repo.root, "commit", "-q", "--allow-empty", "-m", "empty")
    assert key(repo.root) != before


def test_the_change_against_a_base_holds_commits_edits_deletions_and_new_files(
    repo: Repo,
) -> None:
    base = head(repo.root)
    (repo.root / "lib.py").write_text("def one():\n    return 1\n")
    repo.commit_all("an earlier attempt")
    (repo.root / "README.md").write_text("# project\n\nMore words.\n")
    (repo.root / ".gitignore").unlink()
    (repo.root / "logo.png").write_bytes(b"\x89PNG\x00\x00binary")
    (repo.root / "notes.txt").write_text("one\ntwo\nthree")  # no final newline: 3 lines

    found = changes.change_set(repo.root, base)

    summary = {f.path: (f.status, f.added, f.deleted) for f in found.files}
    assert summary == {
        ".gitignore": ("D", 0, 2),
        "README.md": ("M", 2, 0),
        "lib.py": ("A", 2, 0),
        "logo.png": ("A", None, None),
        "notes.txt": ("A", 3, 0),
    }
    assert found.summary() == "5 files changed (+7 -2)"
    assert changes.changed_paths(repo.root, base) == sorted(summary)
    assert not found.empty and found.key == key(repo.root)


def test_no_change_against_the_base_is_empty_even_after_commits_that_cancel_out(
    repo: Repo,
) -> None:
    base = head(repo.root)
    assert changes.change_set(repo.root, base).empty
    (repo.root / "scratch.py").write_text("x = 1\n")
    repo.commit_all("add")
    git(repo.root, "rm", "-q", "scratch.py")
    git(repo.root, "commit", "-q", "-m", "remove again")
    (repo.root / "editor.swp").write_text("swap\n")  # scratch is never work
    found = changes.change_set(repo.root, base)
    assert found.empty and found.summary() == "no file changed"


def test_the_review_diff_shows_tracked_and_new_files(repo: Repo) -> None:
    base = head(repo.root)
    (repo.root / "README.md").write_text("# project\n\nUsage: run it.\n")
    (repo.root / "src").mkdir()
    (repo.root / "src" / "mul.py").write_text("def mul(a, b):\n    return a * b")

    text = change_section(changes.change_set(repo.root, base))

    assert "3 files changed" not in text and "2 files changed (+4 -0)" in text
    assert "- M README.md (+2 -0)" in text and "- A src/mul.py (+2 -0)" in text
    assert "```diff\n" in text
    assert "+Usage: run it." in text
    assert "diff --git a/src/mul.py b/src/mul.py\nnew file mode 100644\n" in text
    assert "+    return a * b\n\\ No newline at end of file" in text


def test_a_large_change_is_listed_by_file_without_its_diff(repo: Repo) -> None:
    base = head(repo.root)
    line = "value = 'a line long enough to fill the review prompt quickly'\n"
    (repo.root / "big.py").write_text(line * (REVIEW_DIFF_LIMIT // len(line) + 10))
    found = changes.change_set(repo.root, base)
    assert changes.patch_text(found, limit=REVIEW_DIFF_LIMIT) is None
    text = change_section(found)
    assert "- A big.py (+" in text and "is not shown" in text and "```" not in text
    assert len(text) < 1000


def test_no_program_from_the_repositorys_config_or_attributes_runs(
    repo: Repo, tmp_path: Path
) -> None:
    """An agent can write `.gitattributes` (and, unconfined, the repository's config): asking
    git what changed must not run the diff driver or text conversion it names."""
    marker = tmp_path / "ran"
    tool = tmp_path / "tool.sh"
    tool.write_text(f'#!/bin/sh\necho ran >> {marker}\ncat "$1" 2>/dev/null\n')
    tool.chmod(0o755)
    git(repo.root, "config", "diff.external", str(tool))
    git(repo.root, "config", "diff.evil.textconv", str(tool))
    git(repo.root, "config", "diff.evil.command", str(tool))
    base = head(repo.root)
    (repo.root / ".gitattributes").write_text("* diff=evil\n")
    (repo.root / "README.md").write_text("# changed\n")
    repo.commit_all("attributes")
    (repo.root / "README.md").write_text("# changed again\n")

    found = changes.change_set(repo.root, base)
    text = change_section(found)

    assert "+# changed again" in text
    assert not marker.exists()


def test_repository_top_is_none_outside_git_and_for_an_ignored_folder(
    repo: Repo, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert changes.repository_top(plain) is None
    (repo.root / "build").mkdir()
    assert changes.repository_top(repo.root / "build") is None  # `build/` is ignored
    (repo.root / "sub").mkdir()
    assert changes.repository_top(repo.root / "sub") == repo.root.resolve()


def test_in_place_asks_git_in_a_repository_and_hashes_a_plain_folder(
    repo: Repo, tmp_path: Path
) -> None:
    in_git = InPlace(repo.root)
    before = in_git.fingerprint(None, repo.root)
    assert before == key(repo.root)  # git's answer, not a hash of every file
    (repo.root / "new.txt").write_text("new\n")
    assert in_git.fingerprint(None, repo.root) != before
    assert in_git.changes(None, repo.root) is None  # no story base in the project folder
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("a\n")
    outside = InPlace(plain)
    first = outside.fingerprint(None, plain)
    assert len(first) == 64
    (plain / "a.txt").write_text("b\n")
    assert outside.fingerprint(None, plain) != first


def test_a_resumed_story_is_compared_with_its_fork_point_not_its_checkpoint(
    repo: Repo,
) -> None:
    """Another process (no memory of creating the branch) still counts the story's earlier
    commits; the base branch moving on is merged in when the story resumes (issue 26), and
    its commits are not the story's."""
    sid = repo.story()
    fork = head(repo.root)
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "greet.py").write_text("def greet():\n    return 'hi'\n")
    record = ws.attempt_passed(story, path, attempt=1)
    assert record.commit is not None
    assert record.key == ws.fingerprint(story, path)  # the key right after the commit
    (repo.root / "main_only.txt").write_text("on main\n")
    repo.commit_all("main moves on")

    later = GitWorkspace(repo.root)
    story, path = prepared(repo, later, sid)
    found = later.changes(story, path)

    assert found.base == head(repo.root) != fork  # the fork point is now the merged main
    assert (path / "main_only.txt").is_file()
    assert found.paths == ["greet.py"]
    assert later.fingerprint(story, path) == found.key
    os.utime(path / "greet.py")  # touched, not changed
    assert later.changes(story, path).key == found.key


def test_a_clean_read_only_check_stands_for_the_next_look_only_when_told(
    tmp_path: Path,
) -> None:
    """After a read-only check that found nothing (scratch files aside), the key it saw is the
    key a fresh `git status` gives; it answers one `fingerprint(checked=True)`, is dropped by
    any other call about the story, and a check that found a change leaves nothing to reuse."""
    project = make_repo(tmp_path, remote=False)
    sid = project.story()
    ws = GitWorkspace(project.root)
    story, path = prepared(project, ws, sid)
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0scratch")
    (path / "notes.txt.swp").write_text("swap\n")

    assert ws.read_only_violations(story, path) == []
    assert ws.fingerprint(story, path, checked=True) == key(path)
    (path / "after.py").write_text("x = 1\n")  # no token left: git is asked again
    assert ws.fingerprint(story, path, checked=True) == key(path) != changes.clean_key(head(path))
    (path / "after.py").unlink()

    assert ws.read_only_violations(story, path) == []
    (path / "during.py").write_text("x = 2\n")
    ws.prepare(story)  # anything else about the story drops the check's look
    assert ws.fingerprint(story, path, checked=True) == key(path)

    assert ws.read_only_violations(story, path) == ["during.py"]
    assert ws.fingerprint(story, path, checked=True) == key(path)  # a change: asked again


def test_a_done_worktree_is_forced_away_only_after_a_clean_check(tmp_path: Path) -> None:
    """`finish(checked=True)` skips git's own look before removing the worktree only when this
    workspace's last look at the story (a read-only check, a commit of all the work) found it
    clean; uncommitted work otherwise keeps it."""
    project = make_repo(tmp_path, remote=False)
    sid = project.story()
    ws = GitWorkspace(project.root)
    story, path = prepared(project, ws, sid)
    (path / "a.py").write_text("a = 1\n")
    ws.attempt_passed(story, path, attempt=1)
    (path / "left.py").write_text("uncommitted\n")
    later = GitWorkspace(project.root)  # another run: it has seen no clean check
    story, path = prepared(project, later, sid)

    kept = later.finish(story, path, checked=True)  # so git looks, and refuses

    assert "kept worktree" in kept.message and (path / "left.py").exists()
    (path / "left.py").unlink()
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert later.read_only_violations(story, path) == []
    removed = later.finish(story, path, checked=True)
    assert "removed worktree" in removed.message and not path.exists()


def test_the_look_after_a_commit_of_all_the_work_is_the_one_git_gives(tmp_path: Path) -> None:
    """Right after the attempt's commit (nothing run since), the review's look is answered
    from the commit: the same files, line counts and key as a fresh `git status` and a diff of
    the work tree, scratch files in the work tree and all."""
    project = make_repo(tmp_path, remote=False)
    sid = project.story()
    ws = GitWorkspace(project.root)
    story, path = prepared(project, ws, sid)
    base = head(path)
    (path / "greet.py").write_text("def greet():\n    return 'hi'\n")
    (path / "README.md").unlink()
    (path / "logo.bin").write_bytes(b"\0\1\2")
    record = ws.attempt_passed(story, path, attempt=1)
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "greet.cpython-311.pyc").write_bytes(b"\0")

    answered = ws.changes(story, path, checked=True)
    asked = ws.changes(story, path)

    assert answered.key == asked.key == record.key == key(path)
    assert answered.files == asked.files == changes.change_set(path, base).files
    assert [(f.path, f.status) for f in answered.files] == [
        ("README.md", "D"), ("greet.py", "A"), ("logo.bin", "A"),
    ]  # fmt: skip
