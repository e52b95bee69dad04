"""Listing: fast loader + cache give exactly what the round-trip parser gives, and stay fresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import StoryStore
from ai_sdlc.store.cache import FILE_NAME
from ai_sdlc.store.values import strict_equal, to_plain
from tests.store_support import FIXTURE_IDS, OLD_NS, make_project, minimal, write_story


def cache_file(store: StoryStore) -> Path:
    return store.cache_dir / FILE_NAME


def cached_ids(store: StoryStore) -> list[str]:
    return sorted(json.loads(cache_file(store).read_text())["entries"])


def assert_matches_roundtrip(store: StoryStore) -> None:
    listed = store.list()
    assert [s.id for s in listed] == sorted(s.id for s in listed)
    for story in listed:
        reference = store.get(story.id)
        assert strict_equal(to_plain(story.frontmatter), to_plain(reference.frontmatter)), story.id
        assert story.to_json() == reference.to_json()
        json.dumps(story.to_json(), allow_nan=False)
        assert story.body == reference.body


def test_cold_and_warm_listing_equal_the_roundtrip_parse(tmp_path: Path) -> None:
    store = make_project(tmp_path)
    assert not cache_file(store).exists()
    assert_matches_roundtrip(store)  # cold: fast loader (+ ruamel for S-0033)
    assert cached_ids(store) == FIXTURE_IDS
    assert_matches_roundtrip(store)  # warm: from the cache


def test_dates_and_odd_values_survive_the_cache(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0032", "S-0033"])
    cold = {s.id: to_plain(s.frontmatter) for s in store.list()}
    warm = {s.id: to_plain(s.frontmatter) for s in store.list()}
    assert strict_equal(cold, warm)
    assert warm["S-0032"]["created"].isoformat() == "2026-02-01"
    assert warm["S-0032"]["blocked_at"].isoformat() == "2026-02-03T17:45:12.500000+01:00"
    assert warm["S-0033"]["octal_looking"] == 777 and warm["S-0033"]["answer"] == "yes"


def test_edit_with_the_same_size_invalidates_the_entry(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0012"])
    assert store.list()[0].counter("retry_count") == 1
    assert cached_ids(store) == ["S-0012"]
    path = store.stories_dir / "S-0012" / "story.md"
    size = path.stat().st_size
    with store.edit("S-0012") as story:
        story.increment("retry_count")
    assert path.stat().st_size == size
    assert store.list()[0].counter("retry_count") == 2


def test_in_place_rewrite_with_same_size_and_inode_is_seen_by_mtime(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", minimal(retry_count="1"))
    assert store.list()[0].counter("retry_count") == 1
    inode = path.stat().st_ino
    with open(path, "r+b") as handle:  # same inode, same size, like an editor saving in place
        data = handle.read()
        handle.seek(0)
        handle.write(data.replace(b"retry_count: 1", b"retry_count: 7"))
    os.utime(path, ns=(OLD_NS + 1, OLD_NS + 1))
    assert path.stat().st_ino == inode
    assert store.list()[0].counter("retry_count") == 7


def test_freshly_modified_files_are_not_cached(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal(), age=False)
    assert [s.id for s in store.list()] == ["S-0001"]
    assert cached_ids(store) == []
    later = StoryStore(tmp_path, now_ns=lambda: time.time_ns() + 10 * 10**9)
    assert [s.id for s in later.list()] == ["S-0001"]
    assert cached_ids(store) == ["S-0001"]


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b"[]",
        b'{"format": "ai-sdlc/story-cache", "version": 999, "entries": {}}',
        b"\x00\xff",
    ],
)
def test_corrupt_or_old_cache_is_ignored_and_rebuilt(tmp_path: Path, content: bytes) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0020"])
    store.cache_dir.mkdir()
    cache_file(store).write_bytes(content)
    assert_matches_roundtrip(store)
    assert cached_ids(store) == ["S-0003", "S-0020"]


def test_foreign_or_tampered_entries_are_not_trusted(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    store.list()
    raw = json.loads(cache_file(store).read_text())
    entry = raw["entries"]["S-0003"]
    entry[3]["fm"]["title"] = "forged"
    moved = dict(raw, stories_dir="/elsewhere/.ai-sdlc/stories")
    cache_file(store).write_text(json.dumps(moved))
    assert store.list()[0].title == "Export the board as CSV"
    entry[3] = {"fm": {"$date": 5}, "plain": False}
    cache_file(store).write_text(json.dumps(raw))
    assert store.list()[0].title == "Export the board as CSV"


def test_unwritable_cache_location_still_lists(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    store.cache_dir.write_text("a file where the cache folder should be")
    assert [s.id for s in store.list()] == ["S-0003"]
    assert store.cache_dir.read_text().startswith("a file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_project_still_lists(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    os.chmod(store.ai_dir, 0o555)
    try:
        assert [s.id for s in store.list()] == ["S-0003"]
    finally:
        os.chmod(store.ai_dir, 0o755)


def test_deleted_stories_leave_the_cache_and_odd_folders_are_ignored(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0012"])
    store.list()
    (store.stories_dir / "S-0012" / "story.md").unlink()
    for name in ("S-1", "S-00012", "notes", "S-0013"):
        (store.stories_dir / name).mkdir()
    (store.stories_dir / "S-1" / "story.md").write_text(minimal("S-1"))
    assert [s.id for s in store.list()] == ["S-0003"]
    assert cached_ids(store) == ["S-0003"]


def test_ids_sort_numerically_past_9999(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    for story_id in ("S-10000", "S-9999", "S-0002"):
        write_story(store, story_id, minimal(story_id))
    assert [s.id for s in store.list()] == ["S-0002", "S-9999", "S-10000"]
    assert store.add("Next one").id == "S-10001"


def _probe(root: Path) -> dict[str, bool]:
    code = (
        "import sys, json; from pathlib import Path; from ai_sdlc.store import StoryStore;"
        f"StoryStore(Path({str(root)!r})).list();"
        "print(json.dumps({m: m in sys.modules for m in ('ruamel.yaml', 'yaml', 'ai_sdlc.locks')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def test_listing_keeps_heavy_imports_out(tmp_path: Path) -> None:
    make_project(tmp_path, [i for i in FIXTURE_IDS if i != "S-0033"])
    cold = _probe(tmp_path)
    assert cold == {"ruamel.yaml": False, "yaml": True, "ai_sdlc.locks": False}
    warm = _probe(tmp_path)
    assert warm == {"ruamel.yaml": False, "yaml": False, "ai_sdlc.locks": False}


def test_recursive_alias_is_refused_by_both_loaders(tmp_path: Path) -> None:
    # A value that contains itself expands without end: over the alias-expansion limit.
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal(loop="&x {b: *x}", items="&y [1, *y]"))
    scan = store.scan()
    assert scan.stories == []
    assert len(scan.errors) == 1 and "contains itself" in scan.errors[0].message
    with pytest.raises(InvalidInputError, match="contains itself"):
        store.get("S-0001")
