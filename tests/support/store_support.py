"""Helpers shared by the tests/test_store_*.py files: temp projects built from real fixtures."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from ai_sdlc.store import StoryStore
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "stories"
FIXTURE_IDS = sorted(p.name for p in FIXTURES.iterdir() if (p / "story.md").is_file())
#: Well in the past, so the listing cache trusts these files' timestamps.
OLD_NS = time.time_ns() - 3600 * 10**9


def make_project(root: Path, ids: list[str] | None = None, *, age: bool = True) -> StoryStore:
    """A project at `root` holding copies of the fixture stories (all of them by default)."""
    store = StoryStore(root)
    store.init()
    for story_id in ids if ids is not None else FIXTURE_IDS:
        target = store.stories_dir / story_id
        shutil.copytree(FIXTURES / story_id, target)
        os.chmod(target, 0o755)
        os.chmod(target / "story.md", 0o644)
        if age:
            os.utime(target / "story.md", ns=(OLD_NS, OLD_NS))
    return store


def write_story(store: StoryStore, story_id: str, text: str | bytes, *, age: bool = True) -> Path:
    """Write a story file byte-exactly (str is UTF-8 encoded as is, no newline translation)."""
    folder = store.stories_dir / story_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "story.md"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    if age:
        os.utime(path, ns=(OLD_NS, OLD_NS))
    return path


def minimal(story_id: str = "S-0001", **fields: str) -> str:
    """A small valid story; `fields` add or replace raw `key: value` lines."""
    values = {"id": story_id, "title": "A small story", "status": "ready", **fields}
    return "---\n" + "".join(f"{k}: {v}\n" for k, v in values.items()) + "---\n# Body\n"


def bump_recovery(story: Any, kind: str) -> int:
    """What the state owner writes for one recovery (total and the kind's count, +1 each), for
    store tests that need a realistic two-field edit; returns the new total."""
    breakdown = story.frontmatter.get("recovery_breakdown")
    if isinstance(breakdown, MutableMapping):
        breakdown[kind] = int(breakdown.get(kind) or 0) + 1
    else:
        story.frontmatter["recovery_breakdown"] = {kind: 1}
    return int(story.increment("total_recovery_attempts"))
