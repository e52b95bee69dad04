"""Project layout, init, add, references, artifacts and the Story helpers."""

from __future__ import annotations

import datetime as dt
import math
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import UsageError
from ai_sdlc.store import StoryStore
from ai_sdlc.store import render, roundtrip
from ai_sdlc.store.ids import slugify
from ai_sdlc.store.values import to_plain
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


# -- render: how new values are written into frontmatter ----------------------------------------
# Every text below must also load back to the very value it was rendered from (ruamel and PyYAML).


def _loads_back(text: str) -> Any:
    return to_plain(roundtrip.load(f"v: {text}\n", "story.md")["v"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-5, "-5"),
        (2**70, "1180591620717411303424"),
        (1.5, "1.5"),
        (3.0, "3.0"),
        (-0.0, "-0.0"),
        (1e20, "1e+20"),
        (1e-7, "1e-07"),
        (math.inf, ".inf"),
        (-math.inf, "-.inf"),
        (dt.date(2026, 1, 31), "2026-01-31"),
        (dt.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
        (
            dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2026-01-02T03:04:05+02:00",
        ),
        ("plain", "plain"),
        ("café", "café"),
        ("it's", "it's"),
        ('x"y', 'x"y'),
        ("b\\s", "b\\s"),
        ("a#b", "a#b"),
        ("a:b", "a:b"),
        ("a,b", "a,b"),
        ("x-y", "x-y"),
    ],
)
def test_a_scalar_is_written_as_its_shortest_exact_yaml(value: Any, text: str) -> None:
    assert render.scalar(value) == text
    assert render.inline(value) == text
    back = _loads_back(text)
    assert render.scalar(back) == text


def test_nan_is_written_as_yaml_nan() -> None:
    assert render.scalar(math.nan) == ".nan"
    assert math.isnan(_loads_back(".nan"))


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("", "''"),
        ("yes", "'yes'"),
        ("No", "'No'"),
        ("on", "'on'"),
        ("y", "'y'"),
        ("Y", "'Y'"),
        ("n", "'n'"),
        ("N", "'N'"),
        ("null", "'null'"),
        ("~", "'~'"),
        ("1.5", "'1.5'"),
        ("12", "'12'"),
        ("0777", "'0777'"),
        ("0x1F", "'0x1F'"),
        ("1:20", "'1:20'"),
        ("2026-01-31", "'2026-01-31'"),
        (".inf", "'.inf'"),
        (" x", "' x'"),
        ("x ", "'x '"),
        ("- a", "'- a'"),
        ("-", "'-'"),
        ("?x", "'?x'"),
        (":x", "':x'"),
        ("[x", "'[x'"),
        ("{x", "'{x'"),
        ("#x", "'#x'"),
        ("&x", "'&x'"),
        ("*x", "'*x'"),
        ("!x", "'!x'"),
        ("|x", "'|x'"),
        (">x", "'>x'"),
        ("'x", "'''x'"),
        ('"x', "'\"x'"),
        ("%x", "'%x'"),
        ("@x", "'@x'"),
        ("`x", "'`x'"),
        (",x", "',x'"),
        ("]x", "']x'"),
        ("}x", "'}x'"),
        ("---x", "'---x'"),
        ("...x", "'...x'"),
        ("a: b", "'a: b'"),
        ("a #b", "'a #b'"),
        ("a:", "'a:'"),
        ("don't: stop", "'don''t: stop'"),
    ],
)
def test_text_yaml_would_misread_is_single_quoted(text: str, written: str) -> None:
    assert render.plain_ok(text) is False
    assert render.scalar(text) == written
    assert _loads_back(written) == text


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("tab\there", '"tab\\there"'),
        ("two\nlines", '"two\\nlines"'),
        ("\r", '"\\r"'),
        ("\0", '"\\0"'),
        ("\x07", '"\\a"'),
        ("\b", '"\\b"'),
        ("\x0b", '"\\v"'),
        ("\x0c", '"\\f"'),
        ("\x1b", '"\\e"'),
        ("\x85", '"\\N"'),
        ("\xa0", '"\\_"'),
        ("\u2028", '"\\L"'),
        ("\u2029", '"\\P"'),
        ("\x01", '"\\x01"'),
        ("\x7f", '"\\x7F"'),
        ("\u0378", '"\\u0378"'),
        ("\U000e0001", '"\\U000E0001"'),
        ('say "hi"\n', '"say \\"hi\\"\\n"'),
        ("back\\slash\n", '"back\\\\slash\\n"'),
        ("it's\n", '"it\'s\\n"'),
        ("é\n", '"é\\n"'),
    ],
)
def test_text_with_unprintable_characters_is_double_quoted_with_escapes(
    text: str, written: str
) -> None:
    assert render.plain_ok(text) is False
    assert render.quote(text) == written
    assert render.scalar(text) == written
    assert _loads_back(written) == text


def test_single_quotes_double_an_inner_quote() -> None:
    assert render.quote("it's") == "'it''s'"
    assert render.quote("plain") == "'plain'"
    assert render.quote("") == "''"


def test_flow_context_also_quotes_flow_indicators() -> None:
    for text in ("a,b", "a]", "a[b", "{a", "a}", "a:b", "a#b"):
        assert render.plain_ok(text, flow=True) is False
        assert render.scalar(text, flow=True) == f"'{text}'"
    assert render.plain_ok("a-b.c_d", flow=True) is True
    assert render.scalar("a b", flow=True) == "a b"


def test_a_value_of_an_unknown_type_is_refused() -> None:
    with pytest.raises(render.UnrenderableError, match="^cannot write a set value$"):
        render.scalar({1})
    with pytest.raises(render.UnrenderableError, match="^cannot write a bytes value$"):
        render.inline(b"x")


def test_keys_are_scalars_of_at_most_1000_characters() -> None:
    assert render.key("status") == "status"
    assert render.key("a: b") == "'a: b'"
    assert render.key(3) == "3"
    assert render.key(None) == "null"
    assert render.key("k" * 1000) == "k" * 1000
    with pytest.raises(render.UnrenderableError, match="^key too long for the `key: value` form$"):
        render.key("k" * 1001)
    with pytest.raises(render.UnrenderableError, match="^key too long"):
        render.key("k" * 999 + ":")  # quoted, that is 1002 characters
    for complex_key in ({}, [], {"a": 1}, [1]):
        with pytest.raises(render.UnrenderableError, match="^complex keys need a full re-dump$"):
            render.key(complex_key)


def test_inline_writes_empty_containers_and_defers_others_to_blocks() -> None:
    assert render.inline({}) == "{}"
    assert render.inline([]) == "[]"
    assert render.inline({"a": 1}) is None
    assert render.inline([1]) is None
    assert render.inline("a: b") == "'a: b'"


def test_flow_writes_one_line_lists_and_maps_of_scalars() -> None:
    assert render.flow([]) == "[]"
    assert render.flow({}) == "{}"
    assert render.flow([1, "a,b", None, "x y"]) == "[1, 'a,b', null, x y]"
    assert render.flow(["one"]) == "[one]"
    assert render.flow({"a": "x: y", 1: 2.0, "k,": True}) == "{a: 'x: y', 1: 2.0, 'k,': true}"
    assert render.flow({"k" * 1000: 1}) == "{" + "k" * 1000 + ": 1}"
    assert roundtrip.load("v: [1, 'a,b', null, x y]\n", "f")["v"] == [1, "a,b", None, "x y"]


@pytest.mark.parametrize(
    "value",
    [
        [[1]],
        [1, {}],
        [1, []],
        {"a": {}},
        {"a": [1]},
        {"b": 1, "a": {"c": 1}},
        {"k" * 1001: 1},
        {"a": 1, "k" * 999 + ",": 1},
        "text",
        3,
        None,
    ],
)
def test_flow_declines_nested_values_long_keys_and_scalars(value: Any) -> None:
    assert render.flow(value) is None


def test_block_writes_nested_values_with_two_space_indentation() -> None:
    value = {
        "a": 1,
        "b": {"c": [1, {"d": 2, "e": []}], "f": {}},
        "g": [[1, 2], [], {}],
        "h": "x: y",
    }
    lines = render.block(value, 0)
    assert lines == [
        "a: 1",
        "b:",
        "  c:",
        "    - 1",
        "    - d: 2",
        "      e: []",
        "  f: {}",
        "g:",
        "  - - 1",
        "    - 2",
        "  - []",
        "  - {}",
        "h: 'x: y'",
    ]
    assert to_plain(roundtrip.load("".join(f"{line}\n" for line in lines), "f")) == value


def test_block_at_an_indent_pads_every_line() -> None:
    lines = render.block([{"a": 1, "b": 2}, [3, [4]], "x"], 2)
    assert lines == ["  - a: 1", "    b: 2", "  - - 3", "    - - 4", "  - x"]
    text = "v:\n" + "".join(f"{line}\n" for line in lines)
    assert to_plain(roundtrip.load(text, "f")) == {"v": [{"a": 1, "b": 2}, [3, [4]], "x"]}
    assert render.block({"k": {"m": [1]}}, 4) == ["    k:", "      m:", "        - 1"]


def test_block_refuses_a_key_it_cannot_write() -> None:
    with pytest.raises(render.UnrenderableError, match="key too long"):
        render.block({"a": {"k" * 1001: 1}}, 0)
    with pytest.raises(render.UnrenderableError, match="key too long"):
        render.block([{"k" * 1001: 1}], 0)


_SURROGATE_PROBLEM = (
    "the text holds U+{:04X}, half of a UTF-16 surrogate pair, which is not a character and "
    "cannot be stored in a UTF-8 file",
    "decode the text properly (e.g. errors='replace'), or remove that character",
)


def test_problem_names_the_first_lone_surrogate_anywhere_in_a_value() -> None:
    lone = (_SURROGATE_PROBLEM[0].format(0xD800), _SURROGATE_PROBLEM[1])
    assert render.problem("ok\ud800x\udfff") == lone
    assert render.problem(["a", "\udfff"]) == (_SURROGATE_PROBLEM[0].format(0xDFFF), lone[1])
    assert render.problem(["a", "\ud800", "\udc00"]) == lone
    assert render.problem({"a": {"b": "\ud801"}}) == (
        _SURROGATE_PROBLEM[0].format(0xD801),
        lone[1],
    )
    assert render.problem({"\ud800": 1}) == lone
    assert render.problem({"a": 1, "b": ["\ud800"]}) == lone


@pytest.mark.parametrize(
    "value",
    [
        None,
        "text\ud7ff\ue000",
        "",
        2**14000 - 1,
        -(2**14000) + 1,
        True,
        1.5,
        math.nan,
        dt.date(2026, 1, 1),
        dt.datetime(2026, 1, 1),
        dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(minutes=-330))),
        ["a", 1, {"b": [None]}],
        {"k" * 1000: "v" * 5000, 1: 2},
        {},
        [],
    ],
)
def test_problem_is_none_for_every_writable_value(value: Any) -> None:
    assert render.problem(value) is None


def test_problem_refuses_whole_numbers_python_cannot_print() -> None:
    expected = ("a whole number with more than 4,200 digits", "store it as text")
    assert render.problem(2**14000) == expected
    assert render.problem(-(2**14000)) == expected
    assert render.problem([1, {"n": 2**14001}]) == expected


def test_problem_refuses_a_utc_offset_of_seconds() -> None:
    odd = dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(seconds=30)))
    expected = (
        "a timestamp whose UTC offset is not whole minutes (YAML cannot write it)",
        "round the offset to minutes, or store the time in UTC",
    )
    assert render.problem(odd) == expected
    assert render.problem({"at": odd}) == expected


def test_problem_refuses_a_key_longer_than_yaml_allows() -> None:
    assert render.problem({"k" * 1001: 1}) == (
        "a key is 1001 characters long as YAML; a key holds at most 1000",
        "use a short key and put the long text in the value",
    )
    assert render.problem({"ok": 1, "k" * 999 + ":": 1}) == (
        "a key is 1002 characters long as YAML; a key holds at most 1000",
        "use a short key and put the long text in the value",
    )
    assert render.problem({"a": {"k" * 1001: 1}})[0].startswith("a key is 1001 characters")  # type: ignore[index]
