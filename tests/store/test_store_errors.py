"""Bad story files: a clear InvalidInputError (file, line, column, hint), the file untouched."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc import untrusted
from ai_sdlc.errors import ExitCode, InvalidInputError, StoryNotFoundError, UsageError
from ai_sdlc.store import StoryStore, fastload, loading, roundtrip, scanning, schema
from ai_sdlc.store import cache as cache_mod
from ai_sdlc.store.story import Story
from tests.support.store_support import OLD_NS, make_project, minimal, write_story

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


# --- schema: what each field may hold, and the exact words of each problem -----------------------

_KINDS_HINT = (
    "write e.g. recovery_breakdown: {rework: 1} with kinds from: "
    "implementation_retry, rework, api_retry, refinement, pr_rework"
)
_TYPE_HINT = (
    "write e.g. type: feature (known: feature, bug, chore, spike, refactor, documentation, "
    "enhancement; any lowercase word is accepted)"
)


def _counter_problem(field: str, shown: str) -> schema.Problem:
    return schema.Problem(
        field,
        f"`{field}` must be a whole number >= 0 and at most 1,000,000,000, not {shown}",
        f"write e.g. `{field}: 0` (a missing counter counts as 0)",
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retry_count", 0),
        ("total_recovery_attempts", 1_000_000_000),
        ("priority", 0),
        ("priority", 7),
        ("id", "S-0001"),
        ("slug", "it's"),
        ("title", "Fix it"),
        ("type", "feature"),
        ("type", "data-migration_2"),
        ("status", "in-progress"),
        ("created", "2026-01-31"),
        ("updated", " 2026-01-31T10:00:00.000+00:00 "),
        ("created", dt.date(2026, 1, 31)),
        ("blocked_at", None),
        ("blocked_at", dt.datetime(2026, 1, 31, 10, 0)),
        ("blocked_reason", None),
        ("labels", []),
        ("labels", ["a", "b"]),
        ("dependencies", ["S-0003", "S-12345"]),
        ("epic", "E-01"),
        ("epic", "epic-E.1_x"),
        ("recovery_breakdown", {}),
        ("recovery_breakdown", {"rework": 1, "api_retry": 0, "refinement": 1_000_000_000}),
        ("research_complete", False),
        ("allow_test_changes", True),
        ("anything_else", object()),
    ],
)
def test_a_usable_field_value_has_no_problem(key: str, value: object) -> None:
    assert schema.field_problem(key, value) is None


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("retry_count", -1, _counter_problem("retry_count", "-1")),
        ("retry_count", 1_000_000_001, _counter_problem("retry_count", "1000000001")),
        ("refinement_count", 2.5, _counter_problem("refinement_count", "2.5")),
        ("total_recovery_attempts", True, _counter_problem("total_recovery_attempts", "true")),
        ("total_recovery_attempts", False, _counter_problem("total_recovery_attempts", "false")),
        ("total_recovery_attempts", None, _counter_problem("total_recovery_attempts", "null")),
        ("implementation_retry_count", "3", _counter_problem("implementation_retry_count", "'3'")),
        ("retry_count", [1], _counter_problem("retry_count", "a list")),
        ("retry_count", {"a": 1}, _counter_problem("retry_count", "a mapping")),
        (
            "priority",
            -1,
            schema.Problem(
                "priority",
                "`priority` must be a whole number >= 0 and at most 1,000,000,000, not -1",
                "write e.g. priority: 10 (lower numbers come first)",
            ),
        ),
        (
            "slug",
            ["it's"],
            schema.Problem(
                "slug", "`slug` must be text, not a list", "quote it: slug: '[\"it''s\"]'"
            ),
        ),
        (
            "id",
            None,
            schema.Problem("id", "`id` must be text, not null", "quote it: id: 'None'"),
        ),
        (
            "blocked_reason",
            12,
            schema.Problem(
                "blocked_reason",
                "`blocked_reason` must be text, not 12",
                "quote it: blocked_reason: '12'",
            ),
        ),
        (
            "title",
            "",
            schema.Problem("title", "`title` is empty", "give the story a one-line title"),
        ),
        (
            "title",
            " \t",
            schema.Problem("title", "`title` is empty", "give the story a one-line title"),
        ),
        (
            "title",
            5,
            schema.Problem("title", "`title` must be text, not 5", "quote it: title: '5'"),
        ),
        (
            "type",
            "Feature",
            schema.Problem(
                "type", "`type` 'Feature' is not a story type (one lowercase word)", _TYPE_HINT
            ),
        ),
        (
            "type",
            3,
            schema.Problem("type", "`type` 3 is not a story type (one lowercase word)", _TYPE_HINT),
        ),
        (
            "status",
            "doing",
            schema.Problem(
                "status",
                "`status` 'doing' is not a known status",
                "use one of: backlog, ready, in-progress, in-review, done, blocked",
            ),
        ),
        (
            "status",
            None,
            schema.Problem(
                "status",
                "`status` null is not a known status",
                "use one of: backlog, ready, in-progress, in-review, done, blocked",
            ),
        ),
        (
            "created",
            "soon",
            schema.Problem(
                "created",
                "`created` must be a date or timestamp, not 'soon'",
                "write e.g. created: '2026-01-31'",
            ),
        ),
        (
            "updated",
            12,
            schema.Problem(
                "updated",
                "`updated` must be a date or timestamp, not 12",
                "write e.g. updated: '2026-01-31'",
            ),
        ),
        (
            "created",
            None,
            schema.Problem(
                "created",
                "`created` must be a date or timestamp, not null",
                "write e.g. created: '2026-01-31'",
            ),
        ),
        (
            "research_complete",
            "yes",
            schema.Problem(
                "research_complete",
                "`research_complete` must be true or false, not 'yes'",
                "write research_complete: false",
            ),
        ),
        (
            "allow_test_changes",
            1,
            schema.Problem(
                "allow_test_changes",
                "`allow_test_changes` must be true or false, not 1",
                "write allow_test_changes: false",
            ),
        ),
        (
            "labels",
            "ab",
            schema.Problem(
                "labels",
                "`labels` must be a list of text items, not 'ab'",
                "write e.g. labels: [one, two]",
            ),
        ),
        (
            "labels",
            ["a", 1],
            schema.Problem(
                "labels",
                "`labels` must be a list of text items, not a list",
                "write e.g. labels: [one, two]",
            ),
        ),
        (
            "dependencies",
            "S-0003",
            schema.Problem(
                "dependencies",
                "`dependencies` must be a list of story ids, not 'S-0003'",
                "write e.g. dependencies: [S-0003, S-0004]",
            ),
        ),
        (
            "dependencies",
            ["S-0003", "S-3"],
            schema.Problem(
                "dependencies",
                "`dependencies` has 'S-3', which is not a story id",
                "write e.g. dependencies: [S-0003, S-0004]",
            ),
        ),
        (
            "dependencies",
            [5],
            schema.Problem(
                "dependencies",
                "`dependencies` has 5, which is not a story id",
                "write e.g. dependencies: [S-0003, S-0004]",
            ),
        ),
        (
            "epic",
            "-E",
            schema.Problem(
                "epic",
                "`epic` must be an epic id (letters, digits, '.', '_', '-'), not '-E'",
                "write e.g. epic: E-01",
            ),
        ),
        (
            "epic",
            7,
            schema.Problem(
                "epic",
                "`epic` must be an epic id (letters, digits, '.', '_', '-'), not 7",
                "write e.g. epic: E-01",
            ),
        ),
        (
            "recovery_breakdown",
            [1],
            schema.Problem(
                "recovery_breakdown",
                "`recovery_breakdown` must be a mapping of kind: count",
                _KINDS_HINT,
            ),
        ),
        (
            "recovery_breakdown",
            {"rework": 1, "reworks": 1},
            schema.Problem(
                "recovery_breakdown",
                "`recovery_breakdown` has an unknown kind 'reworks'",
                _KINDS_HINT,
            ),
        ),
        (
            "recovery_breakdown",
            {"api_retry": 1, "rework": -1},
            schema.Problem(
                "recovery_breakdown",
                "`recovery_breakdown.rework` must be a whole number >= 0 and at most "
                "1,000,000,000, not -1",
                _KINDS_HINT,
            ),
        ),
        (
            "recovery_breakdown",
            {"rework": None},
            schema.Problem(
                "recovery_breakdown",
                "`recovery_breakdown.rework` must be a whole number >= 0 and at most "
                "1,000,000,000, not null",
                _KINDS_HINT,
            ),
        ),
    ],
)
def test_each_bad_field_value_gets_its_own_words_and_hint(
    key: str, value: object, problem: schema.Problem
) -> None:
    assert schema.field_problem(key, value) == problem


def test_a_long_value_is_shown_cut_to_sixty_characters() -> None:
    fits = "x" * 58  # repr adds two quotes: exactly 60 characters, shown whole
    assert schema.field_problem("status", fits) == schema.Problem(
        "status",
        f"`status` '{fits}' is not a known status",
        "use one of: backlog, ready, in-progress, in-review, done, blocked",
    )
    too_long = "y" * 59  # 61 characters: cut to 57 and marked
    message = schema.field_problem("status", too_long)
    assert message is not None
    assert message.message == f"`status` '{'y' * 56}... is not a known status"


@pytest.mark.parametrize(
    ("frontmatter", "problem"),
    [
        (
            None,
            schema.Problem(None, "the frontmatter is empty", "add at least `title:` and `status:`"),
        ),
        (
            ["a"],
            schema.Problem(
                None,
                "the frontmatter must be `key: value` lines, found a list",
                "write one `key: value` per line, e.g. `title: My story`",
            ),
        ),
        (
            "words",
            schema.Problem(
                None,
                "the frontmatter must be `key: value` lines, found a single value",
                "write one `key: value` per line, e.g. `title: My story`",
            ),
        ),
        (
            {"title": "t", 1: "x"},
            schema.Problem(None, "field name 1 must be text", "quote it: '1':"),
        ),
        (
            {True: "x"},
            schema.Problem(None, "field name true must be text", "quote it: 'true':"),
        ),
        (
            {None: "x"},
            schema.Problem(None, "field name null must be text", "quote it: 'null':"),
        ),
        (
            {"title": "t", "status": "doing", "priority": -1},
            schema.field_problem("status", "doing"),
        ),
        (
            {"id": "S-0002", "title": "t", "status": "ready"},
            schema.Problem(
                "id",
                "`id` is 'S-0002' but the story lives in folder S-0001",
                "set id: S-0001 (the folder name is the story id)",
            ),
        ),
        (
            {"status": "ready"},
            schema.Problem(None, "the frontmatter has no `title`", "add `title: A one-line title`"),
        ),
        (
            {"id": "S-0001", "title": "t"},
            schema.Problem(None, "the frontmatter has no `status`", "add `status: backlog`"),
        ),
    ],
)
def test_the_first_problem_of_a_frontmatter_is_reported(
    frontmatter: object, problem: schema.Problem
) -> None:
    assert schema.find_problem(frontmatter, "S-0001") == problem


def test_a_frontmatter_without_id_or_with_its_own_id_is_usable() -> None:
    assert schema.find_problem({"title": "t", "status": "ready", "x": [1]}, "S-0001") is None
    assert schema.find_problem({"id": "S-0001", "title": "t", "status": "done"}, "S-0001") is None


@pytest.mark.parametrize(
    ("total", "breakdown", "text"),
    [
        (0, {}, "none recorded"),
        (0, {"rework": 0, "zeta": 0}, "none recorded"),
        (
            6,
            {"rework": 1, "implementation_retry": 3, "refinement": 2},
            "3 implementation retries, 1 rework cycle, 2 refinement iterations",
        ),
        (1, {"api_retry": 1}, "1 API retry"),
        (2, {"api_retry": 2}, "2 API retries"),
        (
            5,
            {"zeta": 2, "alpha": 1, "rework": 1},
            "1 rework cycle, 1 alpha, 2 zeta, 1 unattributed",
        ),
        (2, {"rework": 1}, "1 rework cycle, 1 unattributed"),
        (3, {}, "3 unattributed"),
        (1, {"rework": 1, "api_retry": -1}, "1 rework cycle, -1 API retries"),
    ],
)
def test_recovery_counts_read_as_words(total: int, breakdown: dict[str, int], text: str) -> None:
    assert schema.breakdown_text(total, breakdown) == text


# --- fastload: libyaml's parse with ruamel's YAML 1.2 values, or NotFast -------------------------


def _reference_value(text: str) -> object:
    """What the round-trip loader (the reference) makes of `v: <text>`."""
    return loading.plain_frontmatter(roundtrip.load(f"v: {text}\n", "ref"), "ref")["v"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", "yes"),
        ("nope", "nope"),
        ("tRue", "tRue"),
        ("Falsey", "Falsey"),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("~", None),
        ("null", None),
        ("Null", None),
        ("NULL", None),
        ("12", 12),
        ("0777", 777),
        ("+5", 5),
        ("-3", -3),
        ("1.5", 1.5),
        ("-1.5e3", -1500.0),
        ("1e3", 1000.0),
        (".5", 0.5),
        (".inf", math.inf),
        ("+.INF", math.inf),
        ("-.inf", -math.inf),
        ("-.Inf", -math.inf),
        ("x1", "x1"),
        ("=x", "=x"),
        ("2026-01-31", dt.date(2026, 1, 31)),
        ("2026-1-2 3:04:05", dt.datetime(2026, 1, 2, 3, 4, 5)),
        ("2026-01-31t10:20:30.5", dt.datetime(2026, 1, 31, 10, 20, 30, 500000)),
        ("2026-01-31 10:20:30.1234565", dt.datetime(2026, 1, 31, 10, 20, 30, 123457)),
        ("2026-01-31 10:20:30.1234564", dt.datetime(2026, 1, 31, 10, 20, 30, 123456)),
        ("2026-01-31 10:20:30.9999995", dt.datetime(2026, 1, 31, 10, 20, 31)),
        ("2026-01-31 10:20:30.999999", dt.datetime(2026, 1, 31, 10, 20, 30, 999999)),
        (
            "2026-01-31 10:20:30Z",
            dt.datetime(2026, 1, 31, 10, 20, 30, tzinfo=dt.timezone(dt.timedelta(0), "Z")),
        ),
        (
            "2026-01-31 10:20:30 +05:30",
            dt.datetime(
                2026,
                1,
                31,
                10,
                20,
                30,
                tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30), "+05:30"),
            ),
        ),
        (
            "2026-01-31 10:20:30-5",
            dt.datetime(2026, 1, 31, 10, 20, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5), "-5")),
        ),
        (
            "2026-01-31T10:20:30.12 -03:15",
            dt.datetime(
                2026,
                1,
                31,
                10,
                20,
                30,
                120000,
                tzinfo=dt.timezone(-dt.timedelta(hours=3, minutes=15), "-03:15"),
            ),
        ),
    ],
)
def test_a_plain_scalar_gets_the_value_ruamel_gives_it(text: str, value: object) -> None:
    fast = fastload.plain_value(text)
    assert repr(fast) == repr(value) == repr(_reference_value(text))  # type, tz name included
    assert fastload.resolves_to_text(text) is isinstance(value, str)


def test_nan_is_read_as_nan() -> None:
    for text in (".nan", ".NaN", ".NAN"):
        value = fastload.plain_value(text)
        assert isinstance(value, float) and math.isnan(value)


@pytest.mark.parametrize(
    "text",
    [
        "1_000",
        "0x1F",
        "0o17",
        "0b101",
        "1_0.5",
        "1__0.5",
        "<<",
        "=",
        "2026-13-45",
        "2026-01-31 25:00:00",
        "12\n",
    ],
)
def test_forms_only_ruamel_builds_are_handed_over(text: str) -> None:
    with pytest.raises(fastload.NotFast):
        fastload.plain_value(text)


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("true\n", fastload.BOOL),  # `$` matches before a final newline, as in ruamel
        ("null\n", fastload.NULL),
        ("", fastload.NULL),
        ("1.5", fastload.FLOAT),
        ("12", fastload.INT),
        ("2026-01-31", fastload.TIMESTAMP),
        ("hello", fastload.STR),
    ],
)
def test_plain_scalars_resolve_by_ruamels_rules(text: str, tag: str) -> None:
    assert fastload.resolve_plain(text) == tag


def test_a_frontmatter_loads_to_plain_values() -> None:
    text = (
        "id: S-0001\ntitle: 'yes'\nstatus: ready\ncount: 3\nempty:\nquoted: '12'\n"
        "labels: [a, b]\nnested:\n  - x: 1\n    y: [true, ~]\nwhen: 2026-01-31\n"
    )
    assert fastload.load(text) == {
        "id": "S-0001",
        "title": "yes",
        "status": "ready",
        "count": 3,
        "empty": None,
        "quoted": "12",
        "labels": ["a", "b"],
        "nested": [{"x": 1, "y": [True, None]}],
        "when": dt.date(2026, 1, 31),
    }
    value, node = fastload.load_with_node("a: 1\nb: two\n")
    assert value == {"a": 1, "b": "two"}
    assert node is not None and [k.start_mark.line for k, _ in node.value] == [0, 1]
    assert fastload.load_with_node("") == (None, None)
    assert fastload.load("# only a comment\n") is None
    assert fastload.load("note: '**bold** and *stars*'\nother: a - b\n") == {
        "note": "**bold** and *stars*",
        "other": "a - b",
    }


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n\tb: 2\n",
        "a: x\ty\n",  # libyaml takes the tab as text; the reference refuses it
        "a: b\t\nc: d\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 12\n",
        "? a\n: 1\n",
        "a: |#x\n  text\n",
        "a: 1\na: 2\n",
        "a: {[b, c]: 1}\n",
        "a: [unclosed\n",
        "a: 0x1F\n",
    ],
)
def test_what_the_fast_loader_might_misread_goes_to_ruamel(text: str) -> None:
    with pytest.raises(fastload.NotFast):
        fastload.load(text)


# --- loading: the fast and round-trip loads agree; every problem names its file line -------------

_STORY = "---\nid: S-0001\ntitle: A story\nstatus: ready\npriority: 3\n---\n# Body\n\ntext\n"


def test_the_fast_load_gives_the_plain_frontmatter_and_says_it_was_fast(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    assert loading.load_fast(path, "S-0001", _STORY.encode()) == (
        {"id": "S-0001", "title": "A story", "status": "ready", "priority": 3},
        True,
    )
    assert loading.load_fast(str(path), "S-0001", _STORY.encode())[1] is True


def test_a_form_only_ruamel_builds_loads_the_same_values_the_slow_way(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    path.write_text(minimal(mask="0x1F", big="1_000"))
    data = path.read_bytes()
    plain, fast = loading.load_fast(path, "S-0001", data)
    assert fast is False
    assert plain == {
        "id": "S-0001",
        "title": "A small story",
        "status": "ready",
        "mask": 31,
        "big": 1000,
    }
    assert plain == loading.load_roundtrip(path, "S-0001", data).plain


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_bad_value_is_reported_at_its_line_by_both_loads(tmp_path: Path, fast_path: bool) -> None:
    path = tmp_path / "S-0001" / "story.md"
    extra = {} if fast_path else {"mask": "0x1F"}
    text = minimal(**extra, status="doing")
    with pytest.raises(InvalidInputError) as got:
        loading.load_fast(path, "S-0001", text.encode())
    line = 1 + text.splitlines().index("status: doing")
    assert got.value.message == f"{path}:{line}:1: `status` 'doing' is not a known status"
    assert got.value.hint == "use one of: backlog, ready, in-progress, in-review, done, blocked"
    with pytest.raises(InvalidInputError) as slow:
        loading.load_roundtrip(path, "S-0001", text.encode())
    assert slow.value.message == got.value.message


def test_a_story_in_another_folder_is_reported_at_its_id_line(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    with pytest.raises(InvalidInputError) as got:
        loading.load_fast(path, "S-0009", _STORY.encode())
    assert got.value.message == (
        f"{path}:2:1: `id` is 'S-0001' but the story lives in folder S-0009"
    )
    assert got.value.hint == "set id: S-0009 (the folder name is the story id)"


def test_the_round_trip_load_keeps_text_data_and_plain_values(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    loaded = loading.load_roundtrip(path, "S-0001", _STORY.encode())
    assert loaded.plain == {"id": "S-0001", "title": "A story", "status": "ready", "priority": 3}
    assert loaded.text.body == "# Body\n\ntext\n"
    assert loaded.text.frontmatter == "id: S-0001\ntitle: A story\nstatus: ready\npriority: 3\n"
    assert dict(loaded.data) == loaded.plain
    assert loaded.data.lc.key("priority") == (3, 0)  # ruamel's own data: it keeps positions


def test_limits_and_encoding_are_checked_with_file_lines(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    deep = "---\nid: S-0001\ntitle: t\nstatus: ready\nx: " + "[" * 70 + "]" * 70 + "\n---\n"
    for load in (loading.load_fast, loading.load_roundtrip):
        with pytest.raises(InvalidInputError) as got:
            load(path, "S-0001", deep.encode())
        assert got.value.message == f"{path}:5:67: nested more than 64 levels deep (the limit)"
        with pytest.raises(InvalidInputError) as bad:
            load(path, "S-0001", b"---\ntitle: caf\xe9\n---\n")
        assert (bad.value.path, bad.value.line) == (str(path), 2)
        assert "not valid UTF-8" in bad.value.message
        with pytest.raises(InvalidInputError) as unclosed:
            load(path, "S-0001", b"---\ntitle: t\n")
        assert (unclosed.value.path, unclosed.value.line) == (str(path), 1)
        assert "never closed" in unclosed.value.message
        with pytest.raises(InvalidInputError) as syntax:
            load(path, "S-0001", b"---\ntitle: 'Fix it\nstatus: ready\n---\n")
        assert (syntax.value.path, syntax.value.line, syntax.value.column) == (str(path), 2, 8)


def test_a_value_a_story_cannot_hold_is_reported_at_its_key(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    text = "---\nid: S-0001\ntitle: t\nstatus: ready\nblob: !!set {a, b}\n---\n"
    with pytest.raises(InvalidInputError) as got:
        loading.load_roundtrip(path, "S-0001", text.encode())
    assert got.value.path == str(path)
    assert (got.value.line, got.value.column) == (5, 1)
    assert got.value.message.startswith(f"{path}:5:1: `blob`: unsupported value (")
    assert got.value.hint == (
        "write the value as plain text, numbers, lists or mappings (no `!tags`, "
        "no alias that contains itself)"
    )


def test_plain_frontmatter_of_values_without_positions() -> None:
    with pytest.raises(InvalidInputError) as got:
        loading.plain_frontmatter({"title": "t", "tags": {1, 2}}, "story.md")
    assert got.value.message == (
        "story.md:2:1: `tags`: unsupported value (set); a story holds text, numbers, "
        "true/false, dates, lists and mappings"
    )
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(InvalidInputError) as loop:
        loading.plain_frontmatter(cyclic, "story.md")
    assert loop.value.message == (
        "story.md:2:1: the value contains itself through an alias (`*name` inside `&name`)"
    )
    assert loop.value.hint is None
    with pytest.raises(InvalidInputError) as single:
        loading.plain_frontmatter(["a", {1, 2}], "story.md")
    assert single.value.message == (
        "story.md:2:1: unsupported value (set); a story holds text, numbers, true/false, "
        "dates, lists and mappings"
    )
    assert loading.plain_frontmatter(["a", 1], "story.md") == ["a", 1]
    assert loading.plain_frontmatter(None, "story.md") is None


def test_a_self_containing_value_names_its_key() -> None:
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidInputError) as got:
        loading.plain_frontmatter({"title": "t", "loop": cyclic}, "story.md")
    assert got.value.message == (
        "story.md:2:1: `loop`: the value contains itself through an alias (`*name` inside `&name`)"
    )


def test_a_problem_points_at_its_field_or_at_the_frontmatter(tmp_path: Path) -> None:
    loaded = roundtrip.load("id: S-0001\ntitle: t\n  # note\nstatus: doing\n", "p")
    status = schema.field_problem("status", "doing")
    assert status is not None
    got = loading.problem_error(status, "p", loaded)
    assert (got.message, got.hint) == ("p:5:1: `status` 'doing' is not a known status", status.hint)
    elsewhere = schema.Problem("priority", "`priority` is wrong", "fix it")
    got = loading.problem_error(elsewhere, "p", loaded)
    assert (got.message, got.hint) == ("p:2:1: `priority` is wrong", "fix it")
    missing = schema.Problem(None, "the frontmatter has no `title`", "add it")
    assert (
        loading.problem_error(missing, "p", loaded).message
        == "p:1:1: the frontmatter has no `title`"
    )
    for not_a_mapping in ("just words", ["a"], None):
        got = loading.problem_error(missing, "p", not_a_mapping)
        assert (got.path, got.line, got.column) == ("p", 2, 1)


def test_the_body_is_read_from_the_file_as_it_is_now(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    path.write_bytes(_STORY.encode())
    assert loading.body_of(path) == "# Body\n\ntext\n"
    path.write_bytes(b"---\ntitle: t\nstatus: ready\n---\r\nnew\r\n")
    assert loading.body_of(path) == "new\r\n"
    path.write_bytes(b"no frontmatter here\n")
    with pytest.raises(InvalidInputError) as plain_text:
        loading.body_of(path)
    assert (plain_text.value.path, plain_text.value.line) == (str(path), 1)
    path.write_bytes(b"---\ntitle: caf\xe9\n---\n")
    with pytest.raises(InvalidInputError) as not_utf8:
        loading.body_of(path)
    assert (not_utf8.value.path, not_utf8.value.line) == (str(path), 2)
    path.unlink()
    path.mkdir()
    with pytest.raises(InvalidInputError) as got:
        loading.body_of(path)
    assert got.value.message == f"{path}: refused: it is a directory, not a regular file"


# --- scanning: a cache payload per story file, and the error for each file that is no story -------

_LATER = OLD_NS + 10 * 10**9  # well past the racy window of an aged file


def _cache(tmp_path: Path) -> cache_mod.StoryCache:
    return cache_mod.StoryCache(tmp_path / ".cache", tmp_path / "stories")


def _saved_payload(tmp_path: Path, name: str, path: Path) -> object:
    """The payload a fresh cache (loaded from disk) holds for `name` at `path`'s stamp."""
    fresh = _cache(tmp_path)
    fresh.load()
    return fresh.get(name, cache_mod.stamp_of(os.stat(path)))


def test_a_story_file_is_parsed_into_a_cached_payload(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", [])
    path = write_story(store, "S-0001", minimal(created="2026-01-31"))
    cache = _cache(tmp_path)
    payload = scanning.read_for_cache(str(path), "S-0001", _LATER, cache)
    assert payload == {
        "fm": {
            "id": "S-0001",
            "title": "A small story",
            "status": "ready",
            "created": {"$date": "2026-01-31"},
        },
        "plain": False,
    }
    cache.save()
    assert _saved_payload(tmp_path, "S-0001", path) == payload
    story = scanning.from_payload("S-0001", str(path), payload)
    assert isinstance(story, Story)
    assert (story.id, story.path, story.frontmatter["created"]) == (
        "S-0001",
        path,
        dt.date(2026, 1, 31),
    )
    assert story.body == "# Body\n"


def test_a_broken_story_file_is_cached_as_its_error(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", [])
    path = write_story(store, "S-0001", minimal(status="doing"))
    cache = _cache(tmp_path)
    payload = scanning.read_for_cache(str(path), "S-0001", _LATER, cache)
    assert payload == {
        "error": [
            "`status` 'doing' is not a known status",
            4,
            1,
            "use one of: backlog, ready, in-progress, in-review, done, blocked",
        ]
    }
    cache.save()
    assert _saved_payload(tmp_path, "S-0001", path) == payload
    error = scanning.error_from(str(path), payload)
    assert error.message == f"{path}:4:1: `status` 'doing' is not a known status"
    assert error.hint == "use one of: backlog, ready, in-progress, in-review, done, blocked"
    assert (error.path, error.line, error.column) == (str(path), 4, 1)
    again = scanning.from_payload("S-0001", str(path), payload)
    assert isinstance(again, InvalidInputError)
    assert (again.message, again.hint, again.line, again.column) == (
        error.message,
        error.hint,
        4,
        1,
    )


def test_a_vanished_story_file_has_no_payload(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    assert scanning.read_for_cache(str(tmp_path / "gone.md"), "S-0001", _LATER, cache) is None
    cache.save()
    assert not cache.path.exists()


def test_a_symlinked_story_file_is_an_uncached_error_payload(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", [])
    target = write_story(store, "S-0002", minimal("S-0001"))
    link = store.stories_dir / "S-0001" / "story.md"
    link.parent.mkdir()
    link.symlink_to(target)
    cache = _cache(tmp_path)
    payload = scanning.read_for_cache(str(link), "S-0001", _LATER, cache)
    assert payload == {
        "error": [
            f"refused: it is a symbolic link (to {target}), not a regular file",
            None,
            None,
            untrusted.REGULAR_HINT,
        ]
    }
    cache.save()
    assert not cache.path.exists()


def test_a_fifo_or_folder_in_place_of_the_story_file_is_an_error_payload(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.md"
    folder.mkdir()
    cache = _cache(tmp_path)
    assert scanning.read_for_cache(str(fifo), "S-0001", _LATER, cache) == {
        "error": [
            "refused: it is a FIFO (named pipe), not a regular file",
            None,
            None,
            untrusted.REGULAR_HINT,
        ]
    }
    assert scanning.read_for_cache(str(folder), "S-0002", _LATER, cache) == {
        "error": [
            "refused: it is a directory, not a regular file",
            None,
            None,
            untrusted.REGULAR_HINT,
        ]
    }
    cache.save()
    assert not cache.path.exists()


def test_an_unreadable_file_that_reads_fine_now_asks_to_run_again(tmp_path: Path) -> None:
    path = tmp_path / "story.md"
    path.write_text(minimal())
    assert scanning.unreadable_payload(str(path)) == {
        "error": ["changed while it was being read; run the command again", None, None, None]
    }
    long_name = str(tmp_path / ("x" * 300))
    assert scanning.unreadable_payload(long_name) == {
        "error": ["cannot be read: File name too long", None, None, untrusted.REGULAR_HINT]
    }
    assert scanning.unreadable_payload(str(tmp_path / "gone.md")) == {
        "error": ["cannot be read: No such file or directory", None, None, None]
    }


def test_a_symlinked_story_folder_is_refused_naming_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "S-0001"
    link.symlink_to(real)
    error = scanning.refused_folder(str(link))
    assert error.message == (
        f"{link}: refused: the story folder is a symbolic link (to {real}); "
        ".ai-sdlc/ must be a real folder tree"
    )
    assert error.hint == "replace the link with a real folder (or remove it)"
    plain = scanning.refused_folder(str(tmp_path / "gone"))
    assert plain.message == (
        f"{tmp_path / 'gone'}: refused: the story folder is a symbolic link; "
        ".ai-sdlc/ must be a real folder tree"
    )
    got = scanning.not_a_story(str(link), str(link / "story.md"))
    assert isinstance(got, InvalidInputError) and got.message == error.message


def test_what_makes_a_folder_no_story(tmp_path: Path) -> None:
    folder = tmp_path / "S-0001"
    story = folder / "story.md"
    assert scanning.not_a_story(str(folder), str(story)) is True  # no folder
    folder.write_text("stray")
    assert scanning.not_a_story(str(folder), str(story)) is True  # a file, not a folder
    folder.unlink()
    folder.mkdir()
    assert scanning.not_a_story(str(folder), str(story)) is True  # no story.md
    story.write_text(minimal())
    assert scanning.not_a_story(str(folder), str(story)) is None
    story.unlink()
    story.mkdir()
    got = scanning.not_a_story(str(folder), str(story))
    assert isinstance(got, InvalidInputError)
    assert got.message == f"{story}: refused: it is a directory, not a regular file"
    assert got.hint == untrusted.REGULAR_HINT
    story.rmdir()
    story.symlink_to(tmp_path / "elsewhere.md")
    got = scanning.not_a_story(str(folder), str(story))
    assert isinstance(got, InvalidInputError)
    assert got.message == (
        f"{story}: refused: it is a symbolic link (to {tmp_path / 'elsewhere.md'}), "
        "not a regular file"
    )
    too_long = str(folder / ("x" * 300))
    got = scanning.not_a_story(str(folder), too_long)
    assert isinstance(got, InvalidInputError)
    assert (got.message, got.hint) == (
        f"{too_long}: cannot be read: File name too long",
        untrusted.REGULAR_HINT,
    )


def test_an_error_message_is_stored_without_its_location() -> None:
    full = InvalidInputError("bad", path="a/story.md", line=3, column=7)
    assert scanning.bare_message(full) == "bad"
    assert scanning.bare_message(InvalidInputError("bad", path="a/story.md", line=3)) == "bad"
    assert scanning.bare_message(InvalidInputError("bad", path="a/story.md")) == "bad"
    assert scanning.bare_message(InvalidInputError("bad")) == "bad"


@pytest.mark.parametrize(
    "payload",
    [
        {"error": ["bad", "3", 1, None]},
        {"error": ["bad", 3, 1.5, None]},
        {"error": ["bad", True, None, None]},
        {"fm": ["not", "a", "mapping"], "plain": True},
        {"fm": {"$date": "not a date"}},
        {"other": 1},
    ],
)
def test_a_damaged_cache_entry_is_parsed_again(tmp_path: Path, payload: dict[str, Any]) -> None:
    cache = _cache(tmp_path)
    cache.put("S-0001", (1, 2, 3), payload, _LATER)
    cache.save()
    fresh = _cache(tmp_path)
    fresh.load()
    assert scanning.from_cache(fresh, "S-0001", "p", (1, 2, 3)) is None


def test_malformed_payloads_say_what_is_wrong() -> None:
    with pytest.raises(TypeError, match=r"^malformed error entry$"):
        scanning.from_payload("S-0001", "p", {"error": ["bad", "3", None, None]})
    with pytest.raises(TypeError, match=r"^malformed frontmatter entry$"):
        scanning.from_payload("S-0001", "p", {"fm": [1], "plain": True})


def test_a_cached_story_or_error_is_rebuilt_from_its_payload(tmp_path: Path) -> None:
    story_file = tmp_path / "story.md"
    story_file.write_text(minimal())
    cache = _cache(tmp_path)
    fm = {"id": "S-0001", "title": "t", "status": "ready"}
    cache.put("S-0001", (1, 2, 3), {"fm": fm, "plain": True}, _LATER)
    cache.put("S-0002", (4, 5, 6), {"error": ["bad", None, None, 5]}, _LATER)
    cache.put("S-0003", (7, 8, 9), {"fm": {"n": {"$float": ".inf"}}, "plain": False}, _LATER)
    cache.save()
    fresh = _cache(tmp_path)
    fresh.load()
    assert scanning.from_cache(fresh, "S-0001", str(story_file), (1, 2, 4)) is None
    story = scanning.from_cache(fresh, "S-0001", str(story_file), (1, 2, 3))
    assert isinstance(story, Story)
    assert (story.id, story.path, story.frontmatter, story.body) == (
        "S-0001",
        story_file,
        fm,
        "# Body\n",
    )
    error = scanning.from_cache(fresh, "S-0002", "x/story.md", (4, 5, 6))
    assert isinstance(error, InvalidInputError)
    assert (error.message, error.hint) == ("x/story.md: bad", None)
    decoded = scanning.from_cache(fresh, "S-0003", "y", (7, 8, 9))
    assert isinstance(decoded, Story) and decoded.frontmatter == {"n": math.inf}


# --- cache: an entry is used only while its file's stamp is unchanged; bad files are ignored ----


def _saved(cache: cache_mod.StoryCache) -> Any:
    return json.loads(cache.path.read_bytes())


def test_the_cache_file_holds_the_entries_used_in_this_run(tmp_path: Path) -> None:
    folder = tmp_path / "deep" / ".cache"
    cache = cache_mod.StoryCache(folder, tmp_path / "stories")
    assert cache.path == folder / "stories.json"
    cache.put("S-0002", (3 * 10**9, 10, 7), {"fm": {"title": "café"}, "plain": True}, 5 * 10**9)
    cache.put("S-0001", (1, 2, 3), {"error": ["bad", 2, 1, None]}, 10**10)
    calls: list[bool] = []
    cache.save(lambda: calls.append(cache.path.exists()))
    assert calls == [False]  # runs before the write
    assert cache.path.read_bytes() == (
        '{"format":"ai-sdlc/story-cache","version":2,"stories_dir":"'
        + str(tmp_path / "stories")
        + '","entries":{"S-0001":[1,2,3,{"error":["bad",2,1,null]}],'
        '"S-0002":[3000000000,10,7,{"fm":{"title":"café"},"plain":true}]}}'
    ).encode("utf-8")
    again = cache_mod.StoryCache(folder, tmp_path / "stories")
    again.load()
    assert again.get("S-0002", (3 * 10**9, 10, 7)) == {"fm": {"title": "café"}, "plain": True}
    assert again.get("S-0002", (3 * 10**9, 10, 8)) is None  # another inode: a new file


def test_a_file_changed_within_two_seconds_is_not_cached(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    mtime = 10**12
    cache.put("S-0001", (mtime, 5, 1), {"fm": {}}, mtime + 2 * 10**9 - 1)
    cache.put("S-0002", (mtime, 5, 2), {"fm": {}}, mtime)
    cache.put("S-0003", (mtime, 5, 3), {"fm": {}}, mtime + 2 * 10**9)
    cache.put("S-0004", (mtime, 10**13, 4), {"fm": {}}, mtime + 2 * 10**9 + 1)
    cache.save()
    assert sorted(_saved(cache)["entries"]) == ["S-0003", "S-0004"]


def test_nothing_is_written_when_nothing_changed(tmp_path: Path) -> None:
    calls: list[int] = []
    empty = _cache(tmp_path)
    empty.save(lambda: calls.append(1))
    assert calls == [] and not empty.path.exists()
    first = _cache(tmp_path)
    first.put("S-0001", (1, 2, 3), {"fm": {}}, _LATER)
    first.save()
    hits = _cache(tmp_path)
    hits.load()
    assert hits.get("S-0001", (1, 2, 3)) == {"fm": {}}
    hits.save(lambda: calls.append(2))
    assert calls == []


def test_a_miss_or_a_dropped_story_rewrites_the_file(tmp_path: Path) -> None:
    first = _cache(tmp_path)
    first.put("S-0001", (1, 2, 3), {"fm": {"n": 1}}, _LATER)
    first.put("S-0002", (1, 2, 4), {"fm": {"n": 2}}, _LATER)
    first.save()
    calls: list[str] = []
    miss = _cache(tmp_path)
    miss.load()
    assert miss.get("S-0001", (1, 2, 3)) == {"fm": {"n": 1}}
    assert miss.get("S-0002", (1, 2, 4)) == {"fm": {"n": 2}}
    assert miss.get("S-0009", (1, 2, 5)) is None
    miss.save(lambda: calls.append("miss"))
    assert calls == ["miss"]
    edited = _cache(tmp_path)
    edited.load()
    assert edited.get("S-0001", (1, 2, 3)) == {"fm": {"n": 1}}
    assert edited.get("S-0002", (9, 2, 4)) is None  # edited: parsed again and put
    edited.put("S-0002", (9, 2, 4), {"fm": {"n": 3}}, _LATER)
    edited.save(lambda: calls.append("edited"))
    assert _saved(edited)["entries"] == {
        "S-0001": [1, 2, 3, {"fm": {"n": 1}}],
        "S-0002": [9, 2, 4, {"fm": {"n": 3}}],
    }
    dropped = _cache(tmp_path)
    dropped.load()
    assert dropped.get("S-0001", (1, 2, 3)) == {"fm": {"n": 1}}
    dropped.save(lambda: calls.append("dropped"))
    assert _saved(dropped)["entries"] == {"S-0001": [1, 2, 3, {"fm": {"n": 1}}]}
    assert calls == ["miss", "edited", "dropped"]


def test_a_cache_folder_that_exists_or_cannot_be_made(tmp_path: Path) -> None:
    folder = tmp_path / ".cache"
    folder.mkdir()
    cache = cache_mod.StoryCache(folder, tmp_path)
    cache.put("S-0001", (1, 2, 3), {"fm": {}}, _LATER)
    cache.save()
    assert _saved(cache)["entries"] == {"S-0001": [1, 2, 3, {"fm": {}}]}
    blocked = tmp_path / "file"
    blocked.write_text("x")
    stuck = cache_mod.StoryCache(blocked / ".cache", tmp_path)
    stuck.put("S-0001", (1, 2, 3), {"fm": {}}, _LATER)
    stuck.save()  # a read-only or blocked project: skipped, no error
    assert blocked.read_text() == "x"


_GOOD_ENTRY = [1, 2, 3, {"fm": {"title": "t"}, "plain": True}]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("format", "other"),
        ("version", 1),
        ("stories_dir", "/elsewhere"),
        ("entries", [_GOOD_ENTRY]),
    ],
)
def test_an_old_or_foreign_cache_file_is_ignored(tmp_path: Path, key: str, value: object) -> None:
    body = {
        "format": "ai-sdlc/story-cache",
        "version": 2,
        "stories_dir": str(tmp_path / "stories"),
        "entries": {"S-0001": _GOOD_ENTRY},
    }
    cache = _cache(tmp_path)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_text(json.dumps(body))
    cache.load()
    assert cache.get("S-0001", (1, 2, 3)) == _GOOD_ENTRY[3]
    cache.path.write_text(json.dumps({**body, key: value}))
    spoilt = _cache(tmp_path)
    spoilt.load()
    assert spoilt.get("S-0001", (1, 2, 3)) is None


@pytest.mark.parametrize("raw", [b"not json", b"\xff\xfe", b"[1]", b'"text"'])
def test_a_corrupt_cache_file_is_ignored(tmp_path: Path, raw: bytes) -> None:
    cache = _cache(tmp_path)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_bytes(raw)
    cache.load()
    assert cache.get("S-0001", (1, 2, 3)) is None


def _cache_file(tmp_path: Path, entries: dict[str, object]) -> cache_mod.StoryCache:
    cache = _cache(tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "format": "ai-sdlc/story-cache",
        "version": 2,
        "stories_dir": str(tmp_path / "stories"),
        "entries": entries,
    }
    cache.path.write_text(json.dumps(body))
    cache.load()
    return cache


def test_a_cache_file_of_another_stories_folder_is_ignored(tmp_path: Path) -> None:
    assert _cache_file(tmp_path, {"S-0001": _GOOD_ENTRY}).get("S-0001", (1, 2, 3)) is not None
    other = cache_mod.StoryCache(tmp_path / ".cache", tmp_path / "elsewhere")
    other.load()
    assert other.get("S-0001", (1, 2, 3)) is None


@pytest.mark.parametrize(
    ("entry", "kept"),
    [
        (_GOOD_ENTRY, True),
        ([1, 2, 3, {"error": ["bad", None, None, None]}], True),
        ([1, 2, 3, {"error": ["bad", 4, 1, "hint"], "fm": "x"}], True),
        ([1, 2, 3], False),
        ([1, 2, 3, {"fm": {}}, 5], False),
        ({"fm": {}}, False),
        ("1234", False),
        ([True, 2, 3, {"fm": {}}], False),
        ([1, 2.0, 3, {"fm": {}}], False),
        ([1, 2, "3", {"fm": {}}], False),
        ([1, 2, 3, ["fm"]], False),
        ([1, 2, 3, {"fm": "text"}], False),
        ([1, 2, 3, {}], False),
        ([1, 2, 3, {"error": "bad"}], False),
        ([1, 2, 3, {"error": None}], False),
        ([1, 2, 3, {"error": ["bad", None, None]}], False),
        ([1, 2, 3, {"error": ["bad", None, None, None, None]}], False),
        ([1, 2, 3, {"error": [1, None, None, None]}], False),
    ],
)
def test_only_well_formed_cache_entries_are_used(tmp_path: Path, entry: object, kept: bool) -> None:
    cache = _cache_file(tmp_path, {"S-0001": entry, "S-0002": _GOOD_ENTRY})
    got = cache.get("S-0001", (1, 2, 3))
    assert got == (entry[3] if kept else None)  # type: ignore[index]
    assert cache.get("S-0002", (1, 2, 3)) == _GOOD_ENTRY[3]


def test_nesting_past_libyamls_own_limit_is_refused_where_libyaml_stopped(tmp_path: Path) -> None:
    """10,000 levels: libyaml refuses them at its own limit (1,000), and that refusal is the
    depth error, placed on the line and column where libyaml stopped; the fallback parser
    (ruamel) is not asked, which took 0.2–0.5 s of CPU per command on such a file."""
    path = tmp_path / "story.md"
    deep = "---\nid: S-0001\ntitle: t\nstatus: ready\nx: " + "[" * 10_000 + "]" * 10_000
    for load in (loading.load_fast, loading.load_roundtrip):
        with pytest.raises(InvalidInputError) as got:
            load(path, "S-0001", (deep + "\n---\n").encode())
        assert got.value.message == f"{path}:5:1003: nested more than 64 levels deep (the limit)"
        assert got.value.hint.startswith("flatten the structure")
