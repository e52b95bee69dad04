"""Bad story files: a clear InvalidInputError (file, line, column, hint), the file untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_sdlc.errors import ExitCode, InvalidInputError, StoryNotFoundError, UsageError
from ai_sdlc.store import StoryStore, loading
from tests.store_support import make_project, minimal, write_story

# (name, file text, expected line, expected column, words the message must contain, hint words)
BAD: list[tuple[str, str, int, int | None, str, str]] = [
    (
        "unquoted colon",
        "---\nid: S-0001\ntitle: Fix: crash\nstatus: ready\n---\n",
        3,
        11,
        "colon",
        "quote the value: title: 'Fix: crash'",
    ),
    (
        "duplicate key",
        "---\nid: S-0001\ntitle: a\nstatus: ready\ntitle: b\n---\n",
        5,
        1,
        "duplicate key `title` (first on line 3)",
        "keep only one",
    ),
    ("list", "---\n- a\n- b\n---\nbody\n", 2, 1, "found a list", "key: value"),
    ("scalar", "---\njust words\n---\n", 2, 1, "found a single value", "key: value"),
    ("no frontmatter", "# Just a heading\n\ntext\n", 1, 1, "no frontmatter", "---"),
    ("empty file", "", 1, 1, "no frontmatter", "---"),
    (
        "unterminated",
        "---\nid: S-0001\ntitle: t\nstatus: ready\n# Body\n",
        1,
        1,
        "never closed",
        "add a line `---`",
    ),
    ("empty frontmatter", "---\n---\nbody\n", 2, 1, "empty", "title"),
    (
        "unclosed quote",
        "---\nid: S-0001\ntitle: 'Fix it\nstatus: ready\n---\n",
        3,
        8,
        "never closed",
        "close the quote",
    ),
    ("tab indent", "---\nid: S-0001\n\ttitle: x\n---\n", 3, 1, "tab", "spaces"),
    (
        "bad date",
        "---\nid: S-0001\ntitle: t\nstatus: ready\ncreated: 2026-13-45\n---\n",
        5,
        10,
        "2026-13-45",
        "quote it",
    ),
    (
        "binary tag",
        "---\nid: S-0001\ntitle: t\nstatus: ready\nblob: !!binary aGk=\n---\n",
        5,
        1,
        "unsupported",
        "tag",
    ),
    (
        "control char",
        "---\nid: S-0001\ntitle: a\x0bb\nstatus: ready\n---\n",
        3,
        9,
        "U+000B",
        "escape",
    ),
]

COUNTER_VALUES = ['"abc"', "-3", "2.5", "true", "null", "[1]"]


def assert_reported(
    exc: InvalidInputError, path: Path, line: int, column: int | None, words: str
) -> None:
    assert exc.exit_code == ExitCode.INVALID_INPUT
    assert exc.path == str(path)
    assert exc.line == line
    if column is not None:
        assert exc.column == column
        assert str(exc).startswith(f"{path}:{line}:{column}: ")
    assert words in exc.message


@pytest.mark.parametrize(("name", "text", "line", "column", "words", "hint"), BAD)
def test_bad_file_is_reported_with_its_position_and_left_untouched(
    tmp_path: Path, name: str, text: str, line: int, column: int, words: str, hint: str
) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", text)
    data = path.read_bytes()
    with pytest.raises(InvalidInputError) as got:
        store.get("S-0001")
    assert_reported(got.value, path, line, column, words)
    assert got.value.hint is not None and hint in got.value.hint
    with pytest.raises(InvalidInputError) as edited, store.edit("S-0001") as story:
        story.increment("retry_count")
    assert str(edited.value) == str(got.value)
    scanned = store.scan()
    assert scanned.stories == []
    assert [str(e) for e in scanned.errors] == [str(got.value)]
    assert [str(e) for e in store.scan().errors] == [str(got.value)]  # again, from the cache
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ["story.md"]


@pytest.mark.parametrize("value", COUNTER_VALUES)
def test_wrong_typed_counter_names_field_file_and_line(tmp_path: Path, value: str) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", minimal(total_recovery_attempts=value))
    with pytest.raises(InvalidInputError) as got:
        store.get("S-0001")
    assert_reported(got.value, path, 5, 1, "`total_recovery_attempts` must be a whole number")
    assert [str(e) for e in store.scan().errors] == [str(got.value)]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("status", "doing", "not a known status"),
        ("priority", "high", "`priority` must be a whole number"),
        ("research_complete", "'yes'", "must be true or false"),
        ("labels", "a, b", "list of text items"),
        ("recovery_breakdown", "{reworks: 1}", "unknown kind"),
        ("recovery_breakdown", "{rework: -1}", "whole number >= 0"),
        ("id", "S-0002", "lives in folder S-0001"),
        ("created", "12", "date or timestamp"),
        ("blocked_reason", "[x]", "must be text"),
    ],
)
def test_wrong_typed_fields(tmp_path: Path, field: str, value: str, words: str) -> None:
    store = make_project(tmp_path, [])
    text = minimal(**{field: value})
    path = write_story(store, "S-0001", text)
    with pytest.raises(InvalidInputError) as got:
        store.get("S-0001")
    assert words in got.value.message
    assert got.value.path == str(path)
    expected_line = 1 + text.splitlines().index(f"{field}: {value}")
    assert got.value.line == expected_line


def test_missing_title_points_at_the_frontmatter(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", "---\nstatus: ready\n---\n")
    with pytest.raises(InvalidInputError) as got:
        store.get("S-0001")
    assert got.value.line == 1 and "no `title`" in got.value.message


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", b"---\nid: S-0001\ntitle: caf\xe9\nstatus: ready\n---\n")
    with pytest.raises(InvalidInputError) as got:
        store.get("S-0001")
    assert_reported(got.value, path, 3, 11, "not valid UTF-8")


def test_missing_counter_counts_as_zero(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal())
    story = store.get("S-0001")
    assert [story.counter(name) for name in ("retry_count", "total_recovery_attempts")] == [0, 0]
    assert story.recovery_breakdown == {}


def test_code_cannot_write_an_invalid_value(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", minimal())
    data = path.read_bytes()
    with pytest.raises(InvalidInputError, match="not a known status"), store.edit("S-0001") as s:
        s.frontmatter["status"] = "doing"
    with pytest.raises(TypeError, match="unsupported"), store.edit("S-0001") as s:
        s.frontmatter["tags"] = {1, 2}
    with pytest.raises(ValueError, match="not a counter"), store.edit("S-0001") as s:
        s.increment("max_retries")
    with pytest.raises(InvalidInputError, match="unknown kind"), store.edit("S-0001") as s:
        s.frontmatter["recovery_breakdown"] = {"oops": 1}
    assert path.read_bytes() == data


def test_changes_outside_edit_are_refused(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal())
    story = store.get("S-0001")
    with pytest.raises(RuntimeError, match=r"store\.edit"):
        story.increment("retry_count")
    with pytest.raises(RuntimeError, match=r"store\.edit"):
        story.body = "x"
    with store.edit("S-0001") as editing:
        pass
    with pytest.raises(RuntimeError, match=r"store\.edit"):
        editing.increment("retry_count")


@pytest.mark.parametrize(
    "ref", ["../S-0001", "S-0001/../../etc", "/etc/passwd", "..", "a\\b", "S-0001\0", "~root", ""]
)
def test_references_that_could_escape_are_usage_errors(tmp_path: Path, ref: str) -> None:
    store = make_project(tmp_path, [])
    with pytest.raises(UsageError) as got:
        store.resolve(ref)
    assert got.value.exit_code == ExitCode.USAGE
    with pytest.raises(UsageError):
        store.get(ref)


@pytest.mark.parametrize("name", ["../x", "a/b", "a\\b", ".hidden", "..", "", "x" * 200])
def test_artifact_names_are_confined_to_the_story_folder(tmp_path: Path, name: str) -> None:
    store = make_project(tmp_path, ["S-0003"])
    with pytest.raises(UsageError):
        store.artifact_path("S-0003", name)
    with pytest.raises(UsageError):
        store.write_artifact("S-0003", name, "x")


def test_unknown_story_and_uninitialised_project(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", ["S-0003"])
    with pytest.raises(StoryNotFoundError):
        store.resolve("S-0099")
    with pytest.raises(StoryNotFoundError):
        store.resolve("no-such-slug")
    with pytest.raises(StoryNotFoundError):
        store.get("S-0099")
    empty = StoryStore(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="ai-sdlc init"):
        empty.list()
    with pytest.raises(UsageError, match="ai-sdlc init"):
        empty.get("S-0001")


def test_a_value_that_contains_itself_is_reported_not_a_crash() -> None:
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidInputError, match="contains itself") as got:
        loading.plain_frontmatter({"title": "t", "loop": cyclic}, "story.md")
    assert got.value.path == "story.md"
