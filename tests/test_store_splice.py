"""Edits through StoryStore.edit change only the lines of changed keys; every other byte stays."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import StoryStore, editing
from ai_sdlc.store.values import to_plain
from tests.store_support import FIXTURE_IDS, bump_recovery, make_project, write_story


def lines_of(data: bytes) -> list[str]:
    return data.decode("utf-8").splitlines(keepends=True)


def diff(old: bytes, new: bytes) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) between two file versions."""
    a, b = lines_of(old), lines_of(new)
    removed: list[str] = []
    added: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


@pytest.fixture
def store(tmp_path: Path) -> StoryStore:
    return make_project(tmp_path)


def read(store: StoryStore, story_id: str) -> bytes:
    return (store.stories_dir / story_id / "story.md").read_bytes()


@pytest.mark.parametrize("story_id", FIXTURE_IDS)
def test_edit_without_changes_does_not_touch_the_file(store: StoryStore, story_id: str) -> None:
    path = store.stories_dir / story_id / "story.md"
    before = os.stat(path)
    with store.edit(story_id) as story:
        story.frontmatter["status"] = str(story.frontmatter["status"])
        story.frontmatter["title"] = str(story.frontmatter["title"])
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("story_id", FIXTURE_IDS)
def test_status_change_rewrites_exactly_one_line(store: StoryStore, story_id: str) -> None:
    old = read(store, story_id)
    with store.edit(story_id) as story:
        previous = story.status
        story.status = "done" if previous != "done" else "ready"
    removed, added = diff(old, read(store, story_id))
    newline = "\r\n" if b"\r\n" in old else "\n"
    assert removed == [f"status: {previous}{newline}"]
    assert added == [f"status: {story.status}{newline}"]
    assert read(store, story_id).startswith(b"\xef\xbb\xbf") == old.startswith(b"\xef\xbb\xbf")


def test_crlf_file_gets_crlf_lines_for_new_keys(store: StoryStore) -> None:
    old = read(store, "S-0020")
    with store.edit("S-0020") as story:
        assert story.increment("retry_count") == 1
    new = read(store, "S-0020")
    removed, added = diff(old, new)
    assert removed == []
    assert added == ["retry_count: 1\r\n"]
    assert new.count(b"\n") == new.count(b"\r\n")
    assert new.index(b"retry_count: 1\r\n") < new.index(b"---\r\n# Windows")


def test_bom_file_keeps_its_bom_and_body(store: StoryStore) -> None:
    old = read(store, "S-0021")
    with store.edit("S-0021") as story:
        bump_recovery(story, "api_retry")
    new = read(store, "S-0021")
    assert new.startswith(b"\xef\xbb\xbf---\n")
    assert new.endswith(old[old.index(b"---\n# A file") :])
    removed, added = diff(old, new)
    assert removed == []
    assert added == [
        "recovery_breakdown:\n",
        "  api_retry: 1\n",
        "total_recovery_attempts: 1\n",
    ]


def test_end_of_line_comments_survive_value_changes(store: StoryStore) -> None:
    old = read(store, "S-0030")
    with store.edit("S-0030") as story:
        story.increment("retry_count")
        story.frontmatter["updated"] = "2026-02-01"
    removed, added = diff(old, read(store, "S-0030"))
    assert removed == [
        "updated: 2026-01-09   # unquoted: a date for YAML\n",
        "retry_count: 2    # review retries so far\n",
    ]
    assert added == [
        "updated: '2026-02-01'   # unquoted: a date for YAML\n",
        "retry_count: 3    # review retries so far\n",
    ]


def test_comment_lines_before_a_key_stay_when_neighbours_change(store: StoryStore) -> None:
    old = read(store, "S-0012")
    with store.edit("S-0012") as story:
        story.increment("retry_count")
        bump_recovery(story, "rework")
    new = read(store, "S-0012")
    assert b"retry_count: 2\n# total_recovery_attempts is maintained" in new
    removed, added = diff(old, new)
    assert removed == ["retry_count: 1\n", "total_recovery_attempts: 3\n"]
    assert added == [
        "retry_count: 2\n",
        "total_recovery_attempts: 4\n",
        "recovery_breakdown:\n",
        "  rework: 1\n",
    ]


def test_multi_line_folded_value_is_replaced_as_a_whole(store: StoryStore) -> None:
    old = read(store, "S-0012")
    with store.edit("S-0012") as story:
        story.frontmatter["worktree_path"] = "/tmp/wt"
    removed, added = diff(old, read(store, "S-0012"))
    assert removed == [
        "worktree_path: >-\n",
        "  /home/dev/src/project/.ai-sdlc/worktrees/"
        "S-0012-retry-honour-server-hint-with-a-very-long-folder-name\n",
    ]
    assert added == ["worktree_path: /tmp/wt\n"]


def test_literal_block_with_hash_lines_is_content_not_comment(store: StoryStore) -> None:
    old = read(store, "S-0030")
    with store.edit("S-0030") as story:
        story.frontmatter["notes"] = "short"
    removed, added = diff(old, read(store, "S-0030"))
    assert removed == [
        "notes: |\n",
        "  # not a comment: part of the literal block\n",
        "  keep: this line\n",
        "    and this indented one\n",
    ]
    assert added == ["notes: short\n"]


def test_flow_list_stays_a_flow_list(store: StoryStore) -> None:
    old = read(store, "S-0020")
    with store.edit("S-0020") as story:
        story.frontmatter["labels"].append("needs: review")
    removed, added = diff(old, read(store, "S-0020"))
    assert removed == ["labels: [windows, storage]\r\n"]
    assert added == ["labels: [windows, storage, 'needs: review']\r\n"]


def test_nested_breakdown_changes_only_its_changed_lines(store: StoryStore) -> None:
    old = read(store, "S-0032")
    with store.edit("S-0032") as story:
        assert bump_recovery(story, "rework") == 11
        assert story.recovery_breakdown == {"implementation_retry": 6, "rework": 4, "api_retry": 1}
    removed, added = diff(old, read(store, "S-0032"))
    assert removed == ["total_recovery_attempts: 10\r\n", "  rework: 3\r\n"]
    assert added == ["total_recovery_attempts: 11\r\n", "  rework: 4\r\n"]


def test_deleting_keys_removes_their_lines_only(store: StoryStore) -> None:
    old = read(store, "S-0032")
    with store.edit("S-0032") as story:
        del story.frontmatter["blocked_reason"]
        del story.frontmatter["blocked_at"]
        story.status = "ready"
    removed, added = diff(old, read(store, "S-0032"))
    assert removed == [
        "status: blocked\r\n",
        "blocked_reason: >-\r\n",
        "  Global recovery limit reached (10/10): implementation_retry 6, rework 3,\r\n",
        "  api_retry 1\r\n",
        "blocked_at: 2026-02-03T17:45:12.5+01:00\r\n",
    ]
    assert added == ["status: ready\r\n"]


def test_setting_none_writes_null(store: StoryStore) -> None:
    with store.edit("S-0032") as story:
        story.frontmatter["blocked_reason"] = None
    assert b"\r\nblocked_reason: null\r\nblocked_at:" in read(store, "S-0032")
    assert store.get("S-0032").frontmatter["blocked_reason"] is None


def test_body_change_keeps_frontmatter_bytes_and_file_line_endings(store: StoryStore) -> None:
    old = read(store, "S-0020")
    with store.edit("S-0020") as story:
        story.body = "# Refined\n\nNew text.\n"
    new = read(store, "S-0020")
    head = old[: old.index(b"---\r\n# Windows") + 5]
    assert new == head + b"# Refined\r\n\r\nNew text.\r\n"
    assert store.get("S-0020").body == "# Refined\r\n\r\nNew text.\r\n"


def test_an_exception_inside_edit_writes_nothing(store: StoryStore) -> None:
    old = read(store, "S-0012")
    with pytest.raises(KeyError), store.edit("S-0012") as story:
        story.increment("retry_count")
        story.body = "lost"
        raise KeyError("boom")
    assert read(store, "S-0012") == old
    assert sorted(p.name for p in (store.stories_dir / "S-0012").iterdir()) == ["story.md"]


def test_reordering_keys_moves_only_the_moved_keys_lines(store: StoryStore) -> None:
    old = read(store, "S-0030")
    original = store.get("S-0030")
    before = to_plain(original.frontmatter)
    with store.edit("S-0030") as story:
        story.frontmatter.move_to_end("id")
    new = read(store, "S-0030")
    reread = store.get("S-0030")
    after = to_plain(reread.frontmatter)
    assert list(after) == [*[k for k in before if k != "id"], "id"]
    assert after == before
    assert reread.body == original.body
    removed, added = diff(old, new)
    assert (removed, added) == (["id: S-0030\n"], ["id: S-0030\n"])
    assert (
        b"# total_recovery_attempts is maintained by the runner\ntotal_recovery_attempts: 4\n"
        b"id: S-0030\n---\n" in new
    )


def test_deleting_and_setting_a_key_again_rewrites_only_that_key(store: StoryStore) -> None:
    """Regression: the re-set key used to force a full re-dump, which rewrote the untouched
    `blocked_at: 2026-02-03T17:45:12.5+01:00` as `...12.500000+01:00`."""
    old = read(store, "S-0032")
    with store.edit("S-0032") as story:
        del story.frontmatter["blocked_reason"]
        story.frontmatter["blocked_reason"] = "Stopped by hand"
    new = read(store, "S-0032")
    removed, added = diff(old, new)
    assert removed == [
        "blocked_reason: >-\r\n",
        "  Global recovery limit reached (10/10): implementation_retry 6, rework 3,\r\n",
        "  api_retry 1\r\n",
    ]
    assert added == ["blocked_reason: Stopped by hand\r\n"]
    assert b"\r\nblocked_at: 2026-02-03T17:45:12.5+01:00\r\n" in new
    assert new.endswith(
        b"  api_retry: 1\r\nblocked_reason: Stopped by hand\r\n---\r\n"
        + old[old.index(b"# Blocked") :]
    )
    assert list(store.get("S-0032").frontmatter)[-1] == "blocked_reason"


@pytest.mark.parametrize(
    "value", ["a\x85b", "\x85", "line\u2028sep\u2029", "bom\ufeff", "x\x85" * 50]
)
@pytest.mark.parametrize("moved", [False, True])
def test_text_with_unicode_line_separators_round_trips(
    store: StoryStore, value: str, moved: bool
) -> None:
    """Regression: a value holding U+0085 (NEL) raised `SpliceError: could not write the new
    frontmatter values faithfully` (the full re-dump wrote it raw)."""
    old = read(store, "S-0032")
    with store.edit("S-0032") as story:
        if moved:
            del story.frontmatter["blocked_reason"]
        story.frontmatter["blocked_reason"] = value
        story.frontmatter["x_nested"] = {"items": [value, "plain"]}
    reread = store.get("S-0032").frontmatter
    assert reread["blocked_reason"] == value
    assert to_plain(reread["x_nested"]) == {"items": [value, "plain"]}
    removed, _ = diff(old, read(store, "S-0032"))
    assert removed == [
        "blocked_reason: >-\r\n",
        "  Global recovery limit reached (10/10): implementation_retry 6, rework 3,\r\n",
        "  api_retry 1\r\n",
    ]
    assert b"\xc2\x85" not in read(store, "S-0032")  # written as the escape \N, never raw


def test_file_mode_is_kept(store: StoryStore) -> None:
    path = store.stories_dir / "S-0003" / "story.md"
    os.chmod(path, 0o640)
    with store.edit("S-0003") as story:
        story.increment("retry_count")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_new_keys_are_appended_after_the_last_line(store: StoryStore) -> None:
    old = read(store, "S-0030")
    with store.edit("S-0030") as story:
        story.frontmatter["last_error"] = {"kind": "timeout", "at": ["a: b", "yes", "0777"]}
    new = read(store, "S-0030")
    removed, added = diff(old, new)
    assert removed == []
    assert added == [
        "last_error:\n",
        "  kind: timeout\n",
        "  at:\n",
        "    - 'a: b'\n",
        "    - 'yes'\n",
        "    - '0777'\n",
    ]
    assert new.index(b"total_recovery_attempts: 4\nlast_error:\n") > 0


@pytest.mark.parametrize("story_id", FIXTURE_IDS)
def test_an_edit_parses_the_file_once_with_the_c_loader_unless_only_ruamel_can_read_it(
    store: StoryStore, story_id: str
) -> None:
    """The fast path (one libyaml parse for values and line map) is what makes an edit cheap;
    files with anchors/aliases (S-0033) take ruamel's path, and both write exactly."""
    path = store.stories_dir / story_id / "story.md"
    loaded = editing.load(path, story_id, path.read_bytes())
    assert loaded.fast == (story_id != "S-0033")
    assert to_plain(loaded.data) == to_plain(store.get(story_id).frontmatter)


def test_deleting_the_key_after_a_keep_chomping_block_keeps_that_blocks_value(
    store: StoryStore,
) -> None:
    """`|+` owns the blank lines after it: the deleted key's blank line must not join it."""
    path = write_story(
        store,
        "S-0040",
        "---\nid: S-0040\ntitle: Keep\nstatus: ready\nnotes: |+\n  text\n\n"
        "branch: main\n\n# about labels\nlabels: [a]\n---\n",
    )
    with store.edit("S-0040") as story:
        del story.frontmatter["branch"]
    assert path.read_text() == (
        "---\nid: S-0040\ntitle: Keep\nstatus: ready\nnotes: |+\n  text\n\n"
        "# about labels\nlabels: [a]\n---\n"
    )
    assert store.get("S-0040").frontmatter["notes"] == "text\n\n"


def test_a_body_that_cannot_be_stored_is_refused_and_nothing_is_written(
    store: StoryStore,
) -> None:
    old = read(store, "S-0003")
    with pytest.raises(InvalidInputError, match=r"U\+DCE9") as refused, store.edit("S-0003") as s:
        s.increment("retry_count")
        s.body = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert refused.value.hint
    assert read(store, "S-0003") == old


def test_long_and_awkward_values_round_trip_and_touch_one_line(store: StoryStore) -> None:
    values = {
        "blocked_reason": "key: value # not a comment, 'quoted' \"double\" " * 200,
        "branch": "  spaced  ",
        "slug": "",
    }
    old = read(store, "S-0012")
    with store.edit("S-0012") as story:
        story.frontmatter.update(values)
    reread = store.get("S-0012").frontmatter
    assert {k: reread[k] for k in values} == values
    removed, added = diff(old, read(store, "S-0012"))
    assert removed == [
        "slug: retry-honour-server-hint\n",
        "branch: ai-sdlc/retry-honour-server-hint\n",
    ]
    assert len(added) == 3 and added[-1].startswith("blocked_reason: 'key: value")
