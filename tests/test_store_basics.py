"""Project layout, init, add, references, artifacts and the Story helpers."""

from __future__ import annotations

import datetime as dt
import os
import stat
from pathlib import Path

import pytest

from ai_sdlc.errors import UsageError
from ai_sdlc.store import StoryStore
from ai_sdlc.store.ids import slugify
from tests.store_support import bump_recovery, make_project, minimal, write_story


def test_init_creates_layout_and_gitignore_once(tmp_path: Path) -> None:
    store = StoryStore(tmp_path)
    assert not store.is_initialized()
    assert store.init() is True
    assert store.is_initialized() and store.stories_dir.is_dir()
    ignored = (store.ai_dir / ".gitignore").read_text().splitlines()
    assert {".cache/", ".locks/", "state/", "runs/"} <= set(ignored)
    assert store.init() is False
    assert not (store.ai_dir / "config.yaml").exists()


def test_init_completes_an_existing_gitignore_without_losing_lines(tmp_path: Path) -> None:
    (tmp_path / ".ai-sdlc").mkdir()
    (tmp_path / ".ai-sdlc" / ".gitignore").write_text("mine/\n.cache/")
    assert StoryStore(tmp_path).init() is True
    lines = (tmp_path / ".ai-sdlc" / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["mine/", ".cache/"]
    assert sorted(lines[2:]) == [".locks/", "runs/", "state/", "worktrees/"]


def test_add_writes_a_ts_style_story(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0012"])
    story = StoryStore(tmp_path, today=lambda: dt.date(2026, 4, 1)).add(
        "Café: export the board!", type="bug", labels=["ux", "ux", "p1: now"]
    )
    assert story.id == "S-0013"
    assert story.path == store.stories_dir / "S-0013" / "story.md"
    assert story.path.read_text() == (
        "---\n"
        "id: S-0013\n"
        "title: 'Café: export the board!'\n"
        "slug: cafe-export-the-board\n"
        "priority: 40\n"
        "status: backlog\n"
        "type: bug\n"
        "created: '2026-04-01'\n"
        "updated: '2026-04-01'\n"
        "labels:\n"
        "  - ux\n"
        "  - 'p1: now'\n"
        "research_complete: false\n"
        "plan_complete: false\n"
        "implementation_complete: false\n"
        "reviews_complete: false\n"
        "---\n"
        "# Café: export the board!\n"
    )
    assert story.title == "Café: export the board!" and story.status == "backlog"
    assert stat.S_IMODE(os.stat(story.path).st_mode) & 0o600 == 0o600


def test_add_with_body_priority_and_no_labels(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    story = store.add("First", priority=5, body="Body text\n")
    assert story.id == "S-0001"
    assert story.frontmatter["priority"] == 5
    assert story.frontmatter["labels"] == []
    assert story.body == "Body text\n"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"title": "  "}, "needs a title"),
        ({"title": "two\nlines"}, "one line"),
        ({"title": "ok", "type": "Big Epic"}, "not a story type"),
        ({"title": "ok", "labels": ["bad\tlabel"]}, "invalid label"),
        ({"title": "ok", "priority": True}, "whole number"),
    ],
)
def test_add_rejects_bad_input(tmp_path: Path, kwargs: dict[str, object], words: str) -> None:
    store = make_project(tmp_path, [])
    with pytest.raises(UsageError, match=words):
        store.add(**kwargs)  # type: ignore[arg-type]
    assert list(store.stories_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Export the board as CSV", "export-the-board-as-csv"),
        ("Retry: honour the server hint!", "retry-honour-the-server-hint"),
        ("Ünïcödé  —  títle", "unicode-title"),
        ("日本語", "story"),
        ("a" * 60, "a" * 50),
        ("word " * 20, ("word-" * 10).rstrip("-")),
    ],
)
def test_slugify(title: str, slug: str) -> None:
    assert slugify(title) == slug


def test_resolve_accepts_ids_and_slugs(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0012"])
    assert {store.resolve(r) for r in ("S-0003", "s-3", "S-3", " s-0003 ")} == {"S-0003"}
    assert store.resolve("retry-honour-server-hint") == "S-0012"
    write_story(store, "S-0004", minimal("S-0004", slug="retry-honour-server-hint"))
    with pytest.raises(UsageError, match="several stories"):
        store.resolve("retry-honour-server-hint")


def test_artifacts_are_written_atomically_in_the_story_folder(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    path = store.write_artifact("S-0003", "plan.md", "# Plan\r\nkeep CRLF\n")
    assert path == store.stories_dir / "S-0003" / "plan.md"
    assert path.read_bytes() == b"# Plan\r\nkeep CRLF\n"
    assert store.read_artifact("S-0003", "plan.md") == "# Plan\r\nkeep CRLF\n"
    assert store.read_artifact("S-0003", "review.md") is None
    os.chmod(path, 0o600)
    store.write_artifact("S-0003", "plan.md", "v2")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(UsageError, match=r"StoryStore\.edit"):
        store.write_artifact("S-0003", "story.md", "x")
    assert sorted(p.name for p in path.parent.iterdir()) == ["plan.md", "story.md"]


def test_story_helpers(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0012"])
    with store.edit("S-0012") as story:
        assert story.counter("total_recovery_attempts") == 3
        assert bump_recovery(story, "implementation_retry") == 4
        assert bump_recovery(story, "implementation_retry") == 5
        assert story.increment("implementation_retry_count", by=2) == 4
        story.status = "blocked"
        with pytest.raises(ValueError, match="unknown status"):
            story.status = "stuck"
        with pytest.raises(ValueError, match=">= 1"):
            story.increment("retry_count", by=0)
    reread = store.get("S-0012")
    assert reread.recovery_breakdown == {"implementation_retry": 2}
    assert reread.counter("implementation_retry_count") == 4
    data = reread.to_json()
    assert list(data)[:3] == ["id", "title", "priority"]
    assert data["created"] == "2026-01-21" and data["status"] == "blocked"
    assert data["last_test_run"]["timestamp"] == "2026-01-23T09:14:05.118Z"
    assert "S-0012" in repr(reread)


def test_a_write_sweeps_temp_files_left_by_killed_writers(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    folder = store.stories_dir / "S-0003"
    (folder / ".story.md.k1ll3d.tmp").write_text("half a story")
    (folder / "plan.md").write_text("kept")
    with store.edit("S-0003") as story:
        story.increment("retry_count")
    assert sorted(p.name for p in folder.iterdir()) == ["plan.md", "story.md"]
