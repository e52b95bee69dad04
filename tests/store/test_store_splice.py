"""Edits through StoryStore.edit change only the lines of changed keys; every other byte stays."""

from __future__ import annotations

import copy
import datetime as dt
import difflib
import os
import stat
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ruamel.yaml import YAML

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import StoryStore, editing, fastload, roundtrip, splice, storyfile
from ai_sdlc.store.schema import COUNTER_FIELDS, STATUSES
from ai_sdlc.store.story import Story
from ai_sdlc.store.values import to_plain
from tests.support.store_support import FIXTURE_IDS, bump_recovery, make_project, write_story


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


# -- storyfile: the exact parts of a story file ---------------------------------------------------


def test_a_story_file_splits_into_parts_that_join_back_byte_for_byte() -> None:
    text = "\ufeff---  \r\nid: S-0001\r\ntitle: T\r\n--- \r\n# Body\r\n\r\nmore\r\n"
    parts = storyfile.split(text, "x.md")
    assert parts == storyfile.StoryText(
        bom="\ufeff",
        open_line="---  \r\n",
        frontmatter="id: S-0001\r\ntitle: T\r\n",
        close_line="--- \r\n",
        body="# Body\r\n\r\nmore\r\n",
    )
    assert parts.text() == text
    assert parts.newline == "\r\n"


def test_a_file_without_a_bom_keeps_none_and_a_closing_line_may_end_the_file() -> None:
    parts = storyfile.split("---\nid: S-0001\n---", "x.md")
    assert (parts.bom, parts.open_line, parts.frontmatter, parts.close_line, parts.body) == (
        "",
        "---\n",
        "id: S-0001\n",
        "---",
        "",
    )
    assert parts.newline == "\n"
    assert parts.text() == "---\nid: S-0001\n---"


def test_with_parts_replaces_only_the_parts_given() -> None:
    parts = storyfile.split("---\na: 1\n---\nbody\n", "x.md")
    assert parts.with_parts(frontmatter="a: 2\n").text() == "---\na: 2\n---\nbody\n"
    assert parts.with_parts(body="new\n").text() == "---\na: 1\n---\nnew\n"
    assert parts.with_parts(frontmatter="b: 3\n", body="").text() == "---\nb: 3\n---\n"
    assert parts.with_parts() == parts


@pytest.mark.parametrize("text", ["title: T\n---\n", "\ufeff# just markdown\n", "--- x\na: 1\n"])
def test_a_file_without_frontmatter_is_refused_with_where_and_what_to_do(text: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        storyfile.split(text, "stories/S-0001/story.md")
    assert refused.value.message == (
        "stories/S-0001/story.md:1:1: no frontmatter: a story starts with a line `---`, then "
        "`key: value` lines, then a closing `---`"
    )
    assert refused.value.hint == (
        "start the file with: ---, title: My story, status: backlog, --- (one per line)"
    )
    assert (refused.value.path, refused.value.line, refused.value.column) == (
        "stories/S-0001/story.md",
        1,
        1,
    )


def test_an_unclosed_frontmatter_is_refused_with_where_and_what_to_do() -> None:
    with pytest.raises(InvalidInputError) as refused:
        storyfile.split("\ufeff---\ntitle: T\n----\n", "s.md")
    assert refused.value.message == "s.md:1:1: the frontmatter opened on line 1 is never closed"
    assert refused.value.hint == "add a line `---` after the last `key: value` line"
    assert (refused.value.path, refused.value.line, refused.value.column) == ("s.md", 1, 1)


@pytest.mark.parametrize(
    ("data", "line", "column"),
    [
        (b"\xe9---\n", 1, 1),
        (b"---\ntitle: caf\xe9\nnext: line\n", 2, 11),
        (b"\n\xe9", 2, 1),
        (b"ab\ncd\nef\xff\ngh\n", 3, 3),
    ],
)
def test_a_bad_utf8_byte_is_reported_at_its_line_and_column(
    data: bytes, line: int, column: int
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        storyfile.decode(data, "s.md")
    byte = data[data.index(b"\xe9") if b"\xe9" in data else data.index(b"\xff")]
    assert refused.value.message == f"s.md:{line}:{column}: not valid UTF-8 (byte 0x{byte:02x})"
    assert refused.value.hint == "save the file as UTF-8"
    assert (refused.value.path, refused.value.line, refused.value.column) == ("s.md", line, column)


def test_valid_utf8_decodes_as_is() -> None:
    assert storyfile.decode("---\ntitle: café ✓\r\n".encode(), "s.md") == "---\ntitle: café ✓\r\n"


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\nb\n", ["a\n", "b\n"]),
        ("a\r\nb\rc\x85d\u2028e\u2029f", ["a\r\n", "b\r", "c\x85", "d\u2028", "e\u2029", "f"]),
        ("\n\nx", ["\n", "\n", "x"]),
    ],
)
def test_lines_are_split_where_yaml_counts_a_line_break(text: str, lines: list[str]) -> None:
    assert storyfile.split_lines(text) == lines


@pytest.mark.parametrize(
    ("text", "newline", "expected"),
    [
        ("a\nb\r\nc", "\r\n", "a\r\nb\r\nc"),
        ("a\nb\r\nc\n", "\n", "a\nb\nc\n"),
        ("a\rb", "\n", "a\rb"),
        ("a\rb\n", "\r\n", "a\rb\r\n"),
    ],
)
def test_code_set_bodies_take_the_files_line_ending(text: str, newline: str, expected: str) -> None:
    assert storyfile.normalise_newlines(text, newline) == expected


# -- story: counters, the edit-only setters, the JSON form ----------------------------------------


def editable(frontmatter: dict[str, Any], story_id: str = "S-0001") -> Story:
    story = Story(story_id, f"/p/{story_id}/story.md", frontmatter)
    story._editable = True  # what StoryStore.edit does before handing the story out
    return story


def test_a_new_story_is_read_only_with_nothing_written_and_no_hooks() -> None:
    story = Story("S-0001", "/p/S-0001/story.md", {"title": "T", "status": "ready"})
    assert (story.id, story.path, story.folder) == (
        "S-0001",
        Path("/p/S-0001/story.md"),
        Path("/p/S-0001"),
    )
    assert (story.title, story.status, story.body) == ("T", "ready", "")
    assert story.written is None
    assert story.after_write == []
    assert story._body_changed is False
    for change, action in [
        (lambda: story.increment("retry_count"), "increment retry_count"),
        (lambda: setattr(story, "status", "done"), "set the status"),
        (lambda: setattr(story, "body", "x"), "set the body"),
    ]:
        with pytest.raises(RuntimeError) as refused:
            change()
        assert str(refused.value) == f"cannot {action} outside `with store.edit('S-0001')`"
    assert story.frontmatter == {"title": "T", "status": "ready"}
    assert repr(story) == "Story('S-0001', status='ready', title='T')"


def test_a_missing_counter_is_zero_and_a_present_one_is_its_value() -> None:
    story = Story("S-0001", "p", {"retry_count": 3, "refinement_count": "2", "x": None})
    assert story.counter("retry_count") == 3
    assert story.counter("refinement_count") == 2
    assert story.counter("implementation_retry_count") == 0
    assert story.counter("x") == 0


def test_increment_adds_to_the_counter_and_returns_the_new_value() -> None:
    story = editable({"retry_count": 4})
    assert story.increment("retry_count") == 5
    assert story.increment("retry_count", by=3) == 8
    assert story.increment("refinement_count", 2) == 2
    assert story.frontmatter == {"retry_count": 8, "refinement_count": 2}


def test_increment_refuses_a_field_that_is_not_a_counter() -> None:
    story = editable({"title": "T"})
    with pytest.raises(ValueError) as refused:
        story.increment("title")
    assert str(refused.value) == f"'title' is not a counter; counters: {', '.join(COUNTER_FIELDS)}"
    assert story.frontmatter == {"title": "T"}


@pytest.mark.parametrize("by", [0, -1, True, 1.0, "1"])
def test_increment_refuses_anything_but_a_whole_number_from_one(by: Any) -> None:
    story = editable({"retry_count": 1})
    with pytest.raises(ValueError, match=r"^increment by a whole number >= 1$"):
        story.increment("retry_count", by)
    assert story.frontmatter == {"retry_count": 1}


def test_status_is_checked_against_the_known_statuses() -> None:
    story = editable({"status": "ready"})
    story.status = "done"
    assert story.frontmatter == {"status": "done"}
    with pytest.raises(ValueError) as refused:
        story.status = "finished"
    assert str(refused.value) == f"unknown status 'finished'; use one of {', '.join(STATUSES)}"


def test_to_json_puts_the_folder_id_first_and_makes_dates_text() -> None:
    story = Story(
        "S-0002",
        "p",
        {"title": "T", "id": "S-0002-in-file", "at": dt.date(2026, 1, 31), "n": [1]},
    )
    data = story.to_json()
    assert data == {"id": "S-0002", "title": "T", "at": "2026-01-31", "n": [1]}
    assert list(data) == ["id", "title", "at", "n"]
    assert Story("S-0003", "p", {"title": "no id"}).to_json() == {"id": "S-0003", "title": "no id"}


def test_to_json_hands_json_ready_values_out_without_converting_them() -> None:
    """Listing thousands of stories skips the per-value conversion for cached values."""
    labels = ["a", "b"]
    story = Story("S-0002", "p", {"id": "S-0002", "labels": labels}, json_ready=True)
    assert story.to_json() == {"id": "S-0002", "labels": ["a", "b"]}
    assert story.to_json()["labels"] is labels
    converted = Story("S-0002", "p", {"labels": labels}).to_json()
    assert converted["labels"] == labels and converted["labels"] is not labels


def test_the_recovery_breakdown_is_a_copy_with_whole_numbers() -> None:
    story = Story("S-0001", "p", {"recovery_breakdown": {"rework": "2", "api_retry": 1}})
    assert story.recovery_breakdown == {"rework": 2, "api_retry": 1}
    assert Story("S-0001", "p", {"recovery_breakdown": "x"}).recovery_breakdown == {}
    assert Story("S-0001", "p", {}).recovery_breakdown == {}


def test_the_body_is_read_once_lazily() -> None:
    reads: list[int] = []

    def read_body() -> str:
        reads.append(1)
        return "# Body\r\n"

    story = Story("S-0001", "p", {}, read_body=read_body)
    assert reads == []
    assert story.body == "# Body\r\n"
    assert story.body == "# Body\r\n"
    assert reads == [1]
    assert Story("S-0001", "p", {}, body="given").body == "given"


# -- splice.layout: the line map of a block-mapping frontmatter -----------------------------------


def layout_of(text: str, *, ruamel: bool = False) -> tuple[int, list[tuple[Any, ...]]] | None:
    """(key column, one tuple of KeyPlace fields per key) from libyaml's or ruamel's nodes."""
    if ruamel:
        values, root = roundtrip.load(text, "x.md"), roundtrip.compose(text)
    else:
        values, root = fastload.load_with_node(text)
    shape = splice.layout(text, root, list(values) if isinstance(values, dict) else [])
    if shape is None:
        return None
    assert shape.lines == storyfile.split_lines(text)
    return shape.column, [msgspec.structs.astuple(entry) for entry in shape.entries]


LAYOUTS = [
    pytest.param(
        "a: 1\n# about b\nb: [x, y]   # flow\n\nc: |+\n  keep\n\nd: >-\n  folded\n  text\n# end\n",
        (
            0,
            [
                ("a", 0, 1, 2, 1, (0, 3), (0, 4), False, False),
                ("b", 2, 3, 4, 1, (2, 3), (2, 9), True, False),
                ("c", 4, 6, 7, 1, (4, 3), (7, 0), False, True),
                ("d", 7, 10, 11, 1, (7, 3), (10, 0), False, False),
            ],
        ),
        id="comments-flow-and-block-scalars",
    ),
    pytest.param(
        "  a: 1\n  b:\n    - x\n    # inner\n  # outer\n\n  c: {k: v}\n",
        (
            2,
            [
                ("a", 0, 1, 1, 3, (0, 5), (0, 6), False, False),
                ("b", 1, 4, 6, 3, (2, 4), (6, 2), False, False),
                ("c", 6, 7, 7, 3, (6, 5), (6, 11), True, False),
            ],
        ),
        id="indented-keys-and-a-comment-inside-a-value",
    ),
    pytest.param(
        "a: >+2 # c\n   x\n\nb: |-\n  y\n",
        (
            0,
            [
                ("a", 0, 2, 3, 1, (0, 3), (3, 0), False, True),
                ("b", 3, 5, 5, 1, (3, 3), (5, 0), False, False),
            ],
        ),
        id="keep-chomping-header-with-indent-and-comment",
    ),
    pytest.param(
        "title: T\nlist:\n- a\n- b\n  # deep comment\n#top\n",
        (
            0,
            [
                ("title", 0, 1, 1, 5, (0, 7), (0, 8), False, False),
                ("list", 1, 5, 6, 4, (2, 0), (6, 0), False, False),
            ],
        ),
        id="unindented-list",
    ),
    pytest.param(
        "a: 1\n  # c\nb: 2\n",
        (
            0,
            [
                ("a", 0, 2, 2, 1, (0, 3), (0, 4), False, False),
                ("b", 2, 3, 3, 1, (2, 3), (2, 4), False, False),
            ],
        ),
        id="a-comment-indented-past-the-keys-belongs-to-the-value",
    ),
]


@pytest.mark.parametrize(("text", "expected"), LAYOUTS)
def test_the_layout_tells_each_keys_lines_and_value_columns(
    text: str, expected: tuple[int, list[tuple[Any, ...]]]
) -> None:
    assert layout_of(text) == expected
    assert layout_of(text, ruamel=True) == expected


@pytest.mark.parametrize(
    "text",
    [
        "{a: 1}\n",
        "[1]\n",
        "x\n",
        "1: a\nb: 2\n",
        "a: 1\n<<: {x: 1}\n",
        "? [a]\n: 1\nb: 2\n",
        '? "a\n  b"\n: 1\n',
    ],
)
def test_layouts_splicing_does_not_handle_have_no_line_map(text: str) -> None:
    assert layout_of(text, ruamel=True) is None


def test_a_missing_root_has_no_line_map() -> None:
    assert splice.layout("", None, []) is None


def test_keys_that_differ_from_the_values_keys_have_no_line_map() -> None:
    """Merge keys or keys that are not text: the nodes' keys are not the values' keys."""
    _, root = fastload.load_with_node("a: 1\n")
    assert splice.layout("a: 1\n", root, ["b"]) is None
    assert splice.layout("a: 1\n", root, ["a"]) == splice.Layout(
        ["a: 1\n"], [splice.KeyPlace("a", 0, 1, 1, 1, (0, 3), (0, 4), False, False)], 0
    )


# -- splice.in_place: which keys keep their lines when the order changes --------------------------


@pytest.mark.parametrize(
    ("before", "after", "kept"),
    [
        ("abcdef", "abcdef", "abcdef"),
        ("abcdef", "bcdefa", "bcdef"),
        ("abcdef", "fabcde", "abcde"),
        ("abcd", "cadb", "cd"),
        ("ab", "ba", "b"),
        ("abcd", "bcad", "bc"),
        ("abcde", "bcade", "bcde"),
        ("abcd", "dcba", "d"),
        ("abc", "axbc", "abc"),
        ("abcdef", "edcbaf", "ef"),
        ("abcdef", "baedcf", "bef"),
        ("abcd", "cdab", "cd"),
        ("abcdef", "acebdf", "ace"),
        ("abcdef", "fedcab", "ab"),
        ("abcdef", "bdface", "bdf"),
        ("abcdef", "b", "b"),
        ("abcdef", "", ""),
        ("abcdef", "zy", ""),
    ],
)
def test_keys_still_in_their_old_order_keep_their_place(before: str, after: str, kept: str) -> None:
    assert splice.in_place(list(before), list(after)) == set(kept)


# -- splice.rewrite: the exact text after an edit --------------------------------------------------

FRONT = (
    "# head\nid: S-1\ntitle: T   # the title\nlabels: [a, b]\n\nnotes: |+\n  kept\n\nnext: 1\n"
    "# tail\n"
)


def edited(text: str, change: Callable[[dict[str, Any]], object], newline: str = "\n") -> str:
    """`text` after `change` to its values, through the fast path as StoryStore.edit does."""
    values, root = fastload.load_with_node(text)
    shape = splice.layout(text, root, list(values))
    before = to_plain(values)
    after = copy.deepcopy(before)
    change(after)
    return splice.rewrite(text, newline, before, after, shape, read=fastload.load, lines_only=True)


def moved(key: str, *, front: bool = False) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        value = data.pop(key)
        if front:
            rest = dict(data)
            data.clear()
            data[key] = value
            data.update(rest)
        else:
            data[key] = value

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            lambda d: d.update(title="New"),
            FRONT.replace("title: T   #", "title: New   #"),
            id="a-value-keeps-its-end-of-line-comment",
        ),
        pytest.param(
            lambda d: d.update(labels=["c"]),
            FRONT.replace("[a, b]", "[c]"),
            id="a-flow-list-stays-flow",
        ),
        pytest.param(
            lambda d: d.update(labels=[]), FRONT.replace("[a, b]", "[]"), id="an-empty-list"
        ),
        pytest.param(
            lambda d: d.update(labels={"k": "v"}),
            FRONT.replace("[a, b]", "{k: v}"),
            id="a-flow-value-becomes-a-flow-mapping",
        ),
        pytest.param(
            lambda d: d.update(notes="x"),
            FRONT.replace("notes: |+\n  kept\n", "notes: x\n"),
            id="a-block-scalar-becomes-one-line",
        ),
        pytest.param(
            lambda d: d.pop("next"),
            FRONT.replace("next: 1\n", ""),
            id="a-deleted-key-leaves-its-trailing-comment",
        ),
        pytest.param(
            lambda d: d.pop("id"), FRONT.replace("id: S-1\n", ""), id="deleting-the-first-key"
        ),
        pytest.param(
            lambda d: d.pop("notes"),
            FRONT.replace("notes: |+\n  kept\n", ""),
            id="a-deleted-block-keeps-its-blank-lines",
        ),
        pytest.param(
            lambda d: d.update(extra={"a": [1, "yes"]}),
            FRONT + "extra:\n  a:\n    - 1\n    - 'yes'\n",
            id="a-new-key-goes-after-the-last",
        ),
        pytest.param(
            lambda d: d.update(extra="x", more=2),
            FRONT + "extra: x\nmore: 2\n",
            id="new-keys-in-their-order",
        ),
        pytest.param(
            moved("id"), FRONT.replace("id: S-1\n", "") + "id: S-1\n", id="a-key-moved-to-the-end"
        ),
        pytest.param(
            moved("next", front=True),
            FRONT.replace("next: 1\n", "").replace("# head\n", "# head\nnext: 1\n"),
            id="a-key-moved-to-the-front",
        ),
        pytest.param(
            lambda d: d.update(title=None),
            FRONT.replace("title: T ", "title: null "),
            id="none-is-null",
        ),
        pytest.param(
            lambda d: d.update(next=True), FRONT.replace("next: 1", "next: true"), id="a-bool"
        ),
    ],
)
def test_an_edit_rewrites_only_the_changed_keys_lines(
    change: Callable[[dict[str, Any]], object], expected: str
) -> None:
    assert edited(FRONT, change) == expected


def test_a_crlf_frontmatter_gets_crlf_in_every_written_line() -> None:
    text = FRONT.replace("\n", "\r\n")

    def change(data: dict[str, Any]) -> None:
        data.update(title="N", extra={"k": [1]})
        del data["next"]

    assert edited(text, change, "\r\n") == (
        "# head\r\nid: S-1\r\ntitle: 'N'   # the title\r\nlabels: [a, b]\r\n\r\nnotes: |+\r\n"
        "  kept\r\n\r\nextra:\r\n  k:\r\n    - 1\r\n# tail\r\n"
    )


@pytest.mark.parametrize(
    ("text", "change", "expected"),
    [
        ("a: 1\nb:\n  - x\n", {"b": ["y", "z"]}, "a: 1\nb:\n  - 'y'\n  - z\n"),
        ("a: 1\nb: >-\n  x\n  y\nc: 3\n", {"b": "one"}, "a: 1\nb: one\nc: 3\n"),
        (
            "a: 1\nb: >-\n  x\n  y\nc: 3\n",
            {"b": {"k": {"j": 1}}},
            "a: 1\nb:\n  k:\n    j: 1\nc: 3\n",
        ),
        ("a: 1\nb:   # note\n  k: 1\nc: 3\n", {"b": {"k": 2}}, "a: 1\nb:   # note\n  k: 2\nc: 3\n"),
        ("a: 1\nb:   # note\n  k: 1\nc: 3\n", {"b": 7}, "a: 1\nb: 7   # note\nc: 3\n"),
        ("a: 1\nb: 2 #x\nc: 3\n", {"b": 7}, "a: 1\nb: 7 #x\nc: 3\n"),
        ("a: 1\nb: 2#x\n", {"b": 7}, "a: 1\nb: 7\n"),
        ("a:  1\n", {"a": 2}, "a:  2\n"),
        ("  a: 1\n  b: 2\n", {"c": {"d": 1}}, "  a: 1\n  b: 2\n  c:\n    d: 1\n"),
        ("  a: 1\n  b: x\n", {"b": [1]}, "  a: 1\n  b:\n    - 1\n"),
        ("a: x\n  X\nb: 2\n", {"a": "new"}, "a: new\nb: 2\n"),
        ("a: 1   \nb: 2\n", {"a": 5}, "a: 5   \nb: 2\n"),
        ("a:   \n  - 1\nb: 2\n", {"a": 5}, "a: 5\nb: 2\n"),
        ("# c\na: >\nb: 1\n", {"a": "x"}, "# c\na: x\nb: 1\n"),
        ("'a:b':\n  - 1\nc: 2\n", {"a:b": [2]}, "'a:b':\n  - 2\nc: 2\n"),
        ("a:   # note: x\n  - 1\nb: 2\n", {"a": [2]}, "a:   # note: x\n  - 2\nb: 2\n"),
        ("a: x\n  \u3000\nb: 2\n", {"a": "new"}, "a: new\nb: 2\n"),
    ],
)
def test_values_are_rewritten_in_the_form_they_need(
    text: str, change: dict[str, Any], expected: str
) -> None:
    assert edited(text, lambda d: d.update(change)) == expected


def test_a_deleted_key_leaves_its_blank_lines() -> None:
    assert edited("a: 1\n\nb: 2\n", lambda d: d.pop("a")) == "\nb: 2\n"
    assert edited("a: 1\nb: 2\n\nc: 3\n", lambda d: (d.update(a=5), d.pop("b"))) == (
        "a: 5\n\nc: 3\n"
    )


def test_deleting_every_key_leaves_only_the_comments() -> None:
    assert edited("a: 1\nb: [x]\n", lambda d: d.clear()) == ""
    assert edited("a: 1\n# c\nb: 2\n", lambda d: d.clear()) == "# c\n"


def test_an_edit_that_changes_nothing_returns_the_text_as_it_was() -> None:
    assert edited(FRONT, lambda d: d.update(next=1)) is FRONT


# -- splice.rewrite: the full re-render when splicing is impossible -------------------------------

COMMENTED = "# c\nb: 1   # about b\na: [x]\n"


def ruamel_read(text: str) -> Any:
    return roundtrip.load(text, "x.md")


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_without_a_line_map_the_live_documents_own_dump_keeps_its_comments(newline: str) -> None:
    live = ruamel_read(COMMENTED)
    live["b"] = 2
    result = splice.rewrite(
        COMMENTED,
        newline,
        {"b": 1, "a": ["x"]},
        {"b": 2, "a": ["x"]},
        None,
        read=ruamel_read,
        lines_only=False,
        live=live,
    )
    assert result == "# c\nb: 2   # about b\na: [x]\n".replace("\n", newline)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_without_a_live_document_the_values_are_rendered_whole(newline: str) -> None:
    result = splice.rewrite(
        COMMENTED,
        newline,
        {"b": 1, "a": ["x"]},
        {"b": "yes", "a": ["x"]},
        None,
        read=ruamel_read,
        lines_only=False,
    )
    assert result == "b: 'yes'\na:\n  - x\n".replace("\n", newline)


def test_an_empty_mapping_is_written_as_braces() -> None:
    assert (
        splice.rewrite("a: 1\n", "\n", {"a": 1}, {}, None, read=ruamel_read, lines_only=False)
        == "{}\n"
    )


def test_when_our_renderer_cannot_write_a_value_ruamels_dump_is_used() -> None:
    """A key longer than YAML's implicit-key limit needs the explicit `? key` form."""
    key = "k" * 1200
    result = splice.rewrite(
        "a: 1\n", "\n", {"a": 1}, {"a": 1, key: 2}, None, read=ruamel_read, lines_only=False
    )
    assert result == f"a: 1\n? {key}\n: 2\n"


def test_when_our_renderers_text_does_not_read_back_ruamels_dump_is_tried() -> None:
    def no_quotes(text: str) -> Any:
        if "'" in text:
            raise ValueError("this reader refuses quotes")
        return ruamel_read(text)

    result = splice.rewrite(
        "a: 1\n", "\n", {"a": 1}, {"a": "yes"}, None, read=no_quotes, lines_only=False
    )
    assert result == "a: yes\n"


def edited_by_ruamel(text: str, change: Callable[[dict[str, Any]], object]) -> str:
    """`text` after `change`, through the reference path (ruamel's node marks, whole check)."""
    live = ruamel_read(text)
    shape = splice.layout(text, roundtrip.compose(text), list(live))
    before = to_plain(live)
    after = copy.deepcopy(before)
    change(after)
    return splice.rewrite(text, "\n", before, after, shape, read=ruamel_read, lines_only=False)


def test_a_comment_glued_to_a_quoted_value_gets_a_space_before_it() -> None:
    """ruamel reads `'x'#c` as a value and a comment; the new value is set apart from it."""
    assert edited_by_ruamel("# top\na: 'x'#c\nb: 1\n", lambda d: d.update(a="z")) == (
        "# top\na: z #c\nb: 1\n"
    )


def test_a_spliced_text_that_does_not_read_back_is_not_written() -> None:
    """The splice is checked: an alias whose anchor the edit removed fails, so the live
    document's dump (which moves the anchor) is written instead."""
    text = "title: &t T\nalso: *t\n"
    live = ruamel_read(text)
    live["title"] = "New"
    shape = splice.layout(text, roundtrip.compose(text), ["title", "also"])
    assert shape is not None
    result = splice.rewrite(
        text,
        "\n",
        {"title": "T", "also": "T"},
        {"title": "New", "also": "T"},
        shape,
        read=ruamel_read,
        lines_only=False,
        live=live,
    )
    assert result == "title: New\nalso: &t T\n"


def test_nothing_that_reads_back_is_a_splice_error_naming_the_file() -> None:
    def refuse(text: str) -> Any:
        raise ValueError("unreadable")

    with pytest.raises(splice.SpliceError) as refused:
        splice.rewrite(
            COMMENTED,
            "\n",
            {"b": 1, "a": ["x"]},
            {"b": 2, "a": ["x"]},
            None,
            read=refuse,
            lines_only=False,
            path="s/S-0001/story.md",
        )
    assert str(refused.value) == (
        "s/S-0001/story.md: could not write the new frontmatter values faithfully"
    )


def test_only_the_written_lines_are_read_back_on_the_fast_path() -> None:
    text = "a: 1\nb: 2\n"
    values, root = fastload.load_with_node(text)
    shape = splice.layout(text, root, list(values))
    seen: list[str] = []

    def read(part: str) -> Any:
        seen.append(part)
        return fastload.load(part)

    result = splice.rewrite(
        text, "\n", {"a": 1, "b": 2}, {"a": 1, "b": 3}, shape, read=read, lines_only=True
    )
    assert (result, seen) == ("a: 1\nb: 3\n", ["b: 3\n"])
    seen.clear()
    splice.rewrite(
        text, "\n", {"a": 1, "b": 2}, {"a": 1, "b": 3}, shape, read=read, lines_only=False
    )
    assert seen == ["a: 1\nb: 3\n"]


def test_a_keep_chomping_block_makes_the_fast_path_read_the_whole_text() -> None:
    text = "a: |+\n  x\n\nb: 2\n"
    values, root = fastload.load_with_node(text)
    shape = splice.layout(text, root, list(values))
    seen: list[str] = []

    def read(part: str) -> Any:
        seen.append(part)
        return fastload.load(part)

    before = to_plain(values)
    result = splice.rewrite(
        text, "\n", before, {**before, "b": 3}, shape, read=read, lines_only=True
    )
    assert (result, seen) == ("a: |+\n  x\n\nb: 3\n", ["a: |+\n  x\n\nb: 3\n"])


def test_a_deleted_key_after_a_kept_block_gives_its_blank_lines_to_nobody() -> None:
    text = "a: |+\n  x\n\nb: 1\n\nc: 2\n"
    assert edited(text, lambda d: d.pop("b")) == "a: |+\n  x\n\nc: 2\n"
    assert edited(text, lambda d: (d.pop("b"), d.update(c=3))) == "a: |+\n  x\n\nc: 3\n"
    text = "a: |+\n  x\nb: 1\n\n# note\n\nc: 2\n"
    assert edited(text, lambda d: d.pop("b")) == "a: |+\n  x\n# note\n\nc: 2\n"
    text = "a: |+\n  x\n\nb: 1\n\n"
    assert edited(text, lambda d: (d.pop("b"), d.update(m=1))) == "a: |+\n  x\n\nm: 1\n\n"


# -- editing: one parse for an edit, the right reader for the check --------------------------------


def loaded(text: str, folder: str = "S-0001") -> editing.Editable:
    return editing.load(Path(f"/p/{folder}/story.md"), folder, text.encode())


def test_a_plain_story_is_read_for_editing_on_the_fast_path() -> None:
    story = loaded("---\nid: S-0001\ntitle: T  # c\nstatus: ready\nn: [1]\n---\nbody\n")
    assert story.fast is True
    assert type(story.data) is OrderedDict
    assert story.data == {"id": "S-0001", "title": "T", "status": "ready", "n": [1]}
    assert story.before == {"id": "S-0001", "title": "T", "status": "ready", "n": [1]}
    assert story.data["n"] is not story.before["n"]
    assert story.text == storyfile.StoryText(
        "", "---\n", "id: S-0001\ntitle: T  # c\nstatus: ready\nn: [1]\n", "---\n", "body\n"
    )
    assert story.shape is not None
    assert [entry.key for entry in story.shape.entries] == ["id", "title", "status", "n"]
    story.data["title"] = "New"
    story.data["n"].append(2)
    assert story.frontmatter_for(dict(story.data), "p.md") == (
        "id: S-0001\ntitle: New  # c\nstatus: ready\nn: [1, 2]\n"
    )


@pytest.mark.parametrize(
    ("text", "has_shape"),
    [
        ("---\n{id: S-0001, title: T, status: ready}   # flow\n---\n", False),
        ("---\nid: S-0001\ntitle: &t T\nstatus: ready\nalso: *t\n---\n", True),
        ('---\nid: S-0001\ntitle: "a\x85b"\nstatus: ready\n---\n', True),
    ],
)
def test_a_story_only_ruamel_reads_exactly_takes_the_reference_path(
    text: str, has_shape: bool
) -> None:
    story = loaded(text)
    assert story.fast is False
    assert type(story.data) is not OrderedDict and hasattr(story.data, "ca")  # ruamel's map
    assert story.before == to_plain(story.data)
    assert story.before["id"] == "S-0001"
    assert (story.shape is not None) == has_shape
    assert story.text.text() == text


def test_the_reference_path_keeps_a_flow_roots_comment_through_an_edit() -> None:
    story = loaded("---\n{id: S-0001, title: T, status: ready}   # flow\n---\n")
    story.data["title"] = "New"
    assert story.frontmatter_for(to_plain(story.data), "p.md") == (
        "{id: S-0001, title: New, status: ready} # flow\n"
    )


def test_the_reference_path_moves_an_anchor_the_edit_would_break() -> None:
    story = loaded("---\nid: S-0001\ntitle: &t T\nstatus: ready\nalso: *t\n---\n")
    story.data["title"] = "New"
    assert story.frontmatter_for(to_plain(story.data), "p.md") == (
        "id: S-0001\ntitle: New\nstatus: ready\nalso: &t T\n"
    )


def test_an_edit_on_the_fast_path_can_write_what_only_ruamel_reads() -> None:
    """A key past YAML's implicit-key limit is written `? key`, which the fast reader hands on
    to ruamel."""
    story = loaded("---\nid: S-0001\ntitle: T\nstatus: ready\n---\n")
    key = "k" * 1200
    assert story.frontmatter_for({**story.before, key: 1}, "p.md") == (
        f"id: S-0001\ntitle: T\nstatus: ready\n? {key}\n: 1\n"
    )


def test_a_value_nothing_can_write_is_a_splice_error_naming_the_file() -> None:
    """(The store checks values before an edit is written; this is the last guard.)"""
    story = loaded("---\nid: S-0001\ntitle: T\nstatus: ready\n---\n")
    with pytest.raises(splice.SpliceError) as refused:
        story.frontmatter_for({**story.before, "title": {1, 2}}, "p/S-0001/story.md")
    assert str(refused.value) == (
        "p/S-0001/story.md: could not write the new frontmatter values faithfully"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "---\nid: S-0002\ntitle: T\nstatus: ready\n---\n",
            "/p/S-0001/story.md:2:1: `id` is 'S-0002' but the story lives in folder S-0001",
        ),
        (
            "---\nid: S-0001\ntitle: T\nstatus: nope\n---\n",
            "/p/S-0001/story.md:4:1: `status` 'nope' is not a known status",
        ),
        (
            "---\n- a\n---\n",
            "/p/S-0001/story.md:2:1: the frontmatter must be `key: value` lines, found a list",
        ),
        (
            "---\nid: S-0001\ntitle: [\n---\n",
            "/p/S-0001/story.md:4:1: invalid YAML: expected the node content, but found",
        ),
    ],
)
def test_an_invalid_story_is_refused_with_the_file_and_place(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        loaded(text)
    assert refused.value.message.startswith(message)


# -- splice.set_path: one value at a nested key (config files) ------------------------------------

CONFIG = (
    "# top\nrun:   # runs\n  jobs: 2  # two\n  ray:\n    address: a\n\n  # about ray\ngit:\n"
    "  remote: o\n"
)


def set_at(text: str, path: list[str], value: Any, **options: Any) -> str:
    return splice.set_path(text, path, value, read=ruamel_read, **options)


@pytest.mark.parametrize(
    ("path", "value", "options", "expected"),
    [
        (["run", "jobs"], 3, {}, CONFIG.replace("jobs: 2  #", "jobs: 3  #")),
        (["run", "jobs"], [1, 2], {}, CONFIG.replace("jobs: 2  #", "jobs: [1, 2] #")),
        (
            ["run", "jobs"],
            [1, 2],
            {"flow": False},
            CONFIG.replace("jobs: 2  # two\n", "jobs:  # two\n    - 1\n    - 2\n"),
        ),
        (["run", "jobs"], {"a": 1}, {}, CONFIG.replace("jobs: 2  #", "jobs: {a: 1} #")),
        (["run", "jobs"], {}, {}, CONFIG.replace("jobs: 2  #", "jobs: {} #")),
        (["run", "jobs"], [], {}, CONFIG.replace("jobs: 2  #", "jobs: [] #")),
        (["run", "ray", "address"], "b", {}, CONFIG.replace("address: a", "address: b")),
        (
            ["run", "ray", "port"],
            1,
            {},
            CONFIG.replace("address: a\n", "address: a\n    port: 1\n"),
        ),
        (
            ["run", "new", "x"],
            1,
            {},
            CONFIG.replace("address: a\n", "address: a\n  new:\n    x: 1\n"),
        ),
        (["top2"], 1, {}, CONFIG + "top2: 1\n"),
        (["top2", "a", "b"], [1], {}, CONFIG + "top2:\n  a:\n    b: [1]\n"),
        (
            ["git", "remote", "deep"],
            1,
            {},
            CONFIG.replace("remote: o\n", "remote:\n    deep: 1\n"),
        ),
        (["run"], 5, {}, "# top\nrun: 5   # runs\ngit:\n  remote: o\n"),
        (["git"], {"remote": "p"}, {}, CONFIG.replace("git:\n  remote: o\n", "git: {remote: p}\n")),
    ],
)
def test_set_path_replaces_or_adds_exactly_the_lines_of_that_key(
    path: list[str], value: Any, options: dict[str, Any], expected: str
) -> None:
    assert set_at(CONFIG, path, value, **options) == expected


@pytest.mark.parametrize(
    ("text", "path", "value", "expected"),
    [
        ("", ["a", "b"], 1, "a:\n  b: 1\n"),
        ("  \n", ["a"], 1, "  \na: 1\n"),
        ("# only\n", ["a"], 1, "# only\na: 1\n"),
        ("# only", ["a", "b"], [1, 2], "# only\na:\n  b: [1, 2]\n"),
        ("# only", ["a"], [{"k": 1}], "# only\na:\n  - k: 1\n"),
        ("# c\r\n", ["a", "b"], 1, "# c\r\na:\r\n  b: 1\r\n"),
        ("# c\r\n# d", ["a"], 1, "# c\r\n# d\r\na: 1\r\n"),
        ("a: 1\r\nb: 2\r\n", ["c", "d"], 1, "a: 1\r\nb: 2\r\nc:\r\n  d: 1\r\n"),
        ("a: 1\r\nb: 2\r\n", ["b"], "x", "a: 1\r\nb: x\r\n"),
        ("a: [1, 2]\n", ["a"], [3], "a: [3]\n"),
        ("a: {x: 1}\n", ["a", "x"], 2, "a: {x: 2}\n"),
        ("a: {x: 1}\n", ["a", "y"], 2, "a: {x: 1, 'y': 2}\n"),
        ("a:\n  b: 1\n", ["c"], 2, "a:\n  b: 1\nc: 2\n"),
        ("a: x\n", ["a", "b"], 1, "a:\n  b: 1\n"),
        ("a: x\nb: 1\n", ["a", "c"], 1, "a:\n  c: 1\nb: 1\n"),
        ("a:\n", ["a", "b"], 1, "a:\n  b: 1\n"),
        ("a: {}\n", ["a", "b"], 1, "a: {b: 1}\n"),
        ("a:  1   # c\n", ["a"], 12345, "a:  12345 # c\n"),
        ("a: 1   \nb: 2\n", ["a"], 12, "a: 12   \nb: 2\n"),
        ("a: 12345   # c\n", ["a"], 1, "a: 1       # c\n"),
        ("a: 12345 # c\n", ["a"], 123456789, "a: 123456789 # c\n"),
        ("a: 1  # c\n", ["a"], [{"k": 1}], "a:  # c\n  - k: 1\n"),
        ("a: 1  # c\n", ["a", "b"], [{"k": 1}], "a:  # c\n  b:\n    - k: 1\n"),
        ("a: 1\n", ["a"], "x\ny", 'a: "x\\ny"\n'),
        ("a:\n  - 1\n  - 2\nb: 1\n", ["a"], [3], "a: [3]\nb: 1\n"),
        ("a: 1 # c\nb:\n- x\n", ["b"], ["y"], "a: 1 # c\nb: ['y']\n"),
        ("a:   # c\n  - 1\nb: 1\n", ["a"], 3, "a: 3   # c\nb: 1\n"),
        ("k:\n  a: 1\n  # c\n\nz: 1\n", ["k", "b"], 2, "k:\n  a: 1\n  b: 2\n  # c\n\nz: 1\n"),
        ("a:   # c\n  b: 1   # d\nz: 2\n", ["a", "b"], 5, "a:   # c\n  b: 5   # d\nz: 2\n"),
        ("a:\n  b: 1 # c\n  c:\n   d: 1\n", ["a", "b"], 2, "a:\n  b: 2 # c\n  c:\n   d: 1\n"),
        ("x:\n  a:\n    b: 1\n  c: 2\n", ["x", "a", "b"], 3, "x:\n  a:\n    b: 3\n  c: 2\n"),
        (
            "x:\n  a:\n    b: 1  # k\n  c: 2\n",
            ["x", "a", "z"],
            3,
            "x:\n  a:\n    b: 1  # k\n    z: 3\n  c: 2\n",
        ),
        ("a:\n  b: 1\n", ["a", "b", "c"], 1, "a:\n  b:\n    c: 1\n"),
        ("a:  # c\n  b: 1\n", ["a", "b", "c"], [1], "a:  # c\n  b:\n    c:\n      - 1\n"),
        ("a:\n  b:\n  c: 1\n", ["a", "b", "x"], 1, "a:\n  b:\n    x: 1\n  c: 1\n"),
    ],
)
def test_set_path_on_small_documents(text: str, path: list[str], value: Any, expected: str) -> None:
    assert set_at(text, path, value) == expected


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        pytest.param("a: &x {b: 1}\nc: *x\n", ["a", "b"], "a:\n  b: 5\nc:\n  b: 1\n", id="anchor"),
        pytest.param("a: &x {b: 1}\nc: *x\n", ["c", "b"], "a:\n  b: 1\nc:\n  b: 5\n", id="alias"),
        pytest.param(
            "a: &x\n  b: 1\nc: *x\n", ["c", "b"], "a:\n  b: 1\nc:\n  b: 5\n", id="block-alias"
        ),
        pytest.param("a: !!map {b: 1}\n", ["a", "b"], "a:\n  b: 5\n", id="tagged-section"),
        pytest.param("{a: {b: 1}}\n", ["a", "b"], "a:\n  b: 5\n", id="flow-root"),
        pytest.param("a:\n  b: &x 1\nc: *x\n", ["a", "b"], "a:\n  b: 5\nc: 1\n", id="anchored"),
        pytest.param("a:   # c\n  b: !!int 1   # d\n", ["a", "b"], "a:\n  b: 5\n", id="tag"),
        pytest.param("a:   # c\n  b: &y 1   # d\n", ["a", "b"], "a:\n  b: 5\n", id="anchor-value"),
        pytest.param(
            'a:\n  ? "x\n    y"\n  : 1\n  b: 1 # c\n',
            ["a", "b"],
            "a:\n  x y: 1\n  b: 5\n",
            id="multi-line-key",
        ),
    ],
)
def test_set_path_re_renders_layouts_a_line_edit_cannot_keep(
    text: str, path: list[str], expected: str
) -> None:
    assert set_at(text, path, 5) == expected


def test_set_path_uses_the_live_documents_dump_to_keep_comments_when_it_re_renders() -> None:
    text = "# mine\n{a: {b: 1}}   # flow\n"
    live = ruamel_read(text)
    live["a"]["b"] = 5
    assert set_at(text, ["a", "b"], 5, live=live) == "{a: {b: 5}}   # flow\n"
    assert set_at(text.replace("\n", "\r\n"), ["a", "b"], 5, live=live) == (
        "{a: {b: 5}}   # flow\r\n"
    )


def test_set_path_refuses_an_empty_path() -> None:
    with pytest.raises(ValueError, match=r"^an empty key path$"):
        set_at("a: 1\n", [], 1)


def test_set_path_refuses_a_document_that_is_not_a_mapping() -> None:
    with pytest.raises(splice.SpliceError) as refused:
        set_at("- 1\n", ["a"], 1, where="cfg.yaml")
    assert str(refused.value) == "cfg.yaml: the document is not a mapping"


@pytest.mark.parametrize("path", [["a"], ["b", "c"]])
def test_a_value_set_path_cannot_write_is_a_splice_error_naming_the_key(path: list[str]) -> None:
    with pytest.raises(splice.SpliceError) as refused:
        set_at("a: 1\n", path, {1, 2}, where="cfg.yaml")
    assert str(refused.value) == f"cfg.yaml: could not write {'.'.join(path)} faithfully"


def test_set_path_checks_its_result_against_the_reader() -> None:
    """A reader that refuses the spliced text gets a re-rendered one."""

    def picky(text: str) -> Any:
        if "2  # x" in text:
            raise ValueError("not this one")
        return ruamel_read(text)

    assert splice.set_path("# c\na: 1  # x\n", ["a"], 2, read=picky) == "a: 2\n"


def test_new_sections_hold_block_values_at_their_depth() -> None:
    assert set_at("# only", ["a", "b"], [{"k": 1}]) == "# only\na:\n  b:\n    - k: 1\n"
    assert set_at("# c\n", ["a"], [1], flow=False) == "# c\na:\n  - 1\n"
    assert set_at("x: 1\n", ["a", "b"], {"k": 1}, flow=False) == "x: 1\na:\n  b:\n    k: 1\n"


def test_a_key_written_twice_is_never_spliced_whatever_the_reader_keeps() -> None:
    """ruamel with duplicate keys allowed keeps the first; splicing that one would leave the
    second in the file, so the document is re-rendered with the key once."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True

    def first_wins(text: str) -> Any:
        return to_plain(yaml.load(text))

    assert splice.set_path("# c\na: 1\nb: 2\na: 3\n", ["a"], 5, read=first_wins) == "a: 5\nb: 2\n"
