"""workspace_fingerprint: the content hash of a plain folder (the fallback outside git; in git
the runner asks git, see tests/git/test_git_changes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.verify import workspace_fingerprint


def make_tree(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# demo\n")


def test_runner_state_changes_do_not_count_but_source_changes_do(tmp_path: Path) -> None:
    root = tmp_path / "work"
    make_tree(root)
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
