"""Project layout, init, add, references, artifacts, the Story helpers, and the units under them:
how values are rendered as YAML (render), their plain forms (values) and YAML errors (roundtrip)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import InvalidInputError, UsageError
from ai_sdlc.store import StoryStore, render, roundtrip, values
from ai_sdlc.store.ids import slugify
from ai_sdlc.store.values import UnsupportedValueError, strict_equal, to_plain
from tests.support.store_support import bump_recovery, make_project, minimal, write_story


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
        (1e16, "1e+16"),
        (123456.0, "123456.0"),
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
        ("Xylophone X", "Xylophone X"),
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
        ("\uffff", '"\\uFFFF"'),
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
    assert render.plain_ok("a,b") is True and render.plain_ok("a]b{c}") is True
    assert render.scalar("a b", flow=True) == "a b"


def test_a_value_of_an_unknown_type_is_refused() -> None:
    with pytest.raises(render.UnrenderableError, match=r"^cannot write a set value$"):
        render.scalar({1})
    with pytest.raises(render.UnrenderableError, match=r"^cannot write a bytes value$"):
        render.inline(b"x")


def test_keys_are_scalars_of_at_most_1000_characters() -> None:
    assert render.key("status") == "status"
    assert render.key("a: b") == "'a: b'"
    assert render.key(3) == "3"
    assert render.key(None) == "null"
    assert render.key("k" * 1000) == "k" * 1000
    with pytest.raises(render.UnrenderableError, match=r"^key too long for the `key: value` form$"):
        render.key("k" * 1001)
    with pytest.raises(render.UnrenderableError, match=r"^key too long"):
        render.key("k" * 999 + ":")  # quoted, that is 1002 characters
    for complex_key in ({}, [], {"a": 1}, [1]):
        with pytest.raises(render.UnrenderableError, match=r"^complex keys need a full re-dump$"):
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
    assert render.flow({"to": "x,y", "at": "[1]"}) == "{to: 'x,y', at: '[1]'}"
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
        dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(minutes=331))),
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


# -- values: one plain shape for every loader, strict comparison, JSON and cache forms ----------

_HOLDS = "a story holds text, numbers, true/false, dates, lists and mappings"


def _rt(text: str) -> Any:
    return roundtrip.load(text, "story.md")


def test_to_plain_turns_ruamel_types_into_builtins() -> None:
    data = _rt(
        "a: &x true\nb: *x\nc: &y 5\nd: &z 1.5\ne: 2026-01-02T03:04:05.5\nf: &s txt\n"
        "g: {1: a, 2026-01-01: b, null: c, false: d, 1.5: e}\nh: [0o17, 'q', !!str 5, !!value v]\n"
        "i: 2026-01-02 03:04:05+01:00\nj: 2026-01-02\n"
    )
    plain = to_plain(data)
    assert strict_equal(
        plain,
        {
            "a": True,
            "b": True,
            "c": 5,
            "d": 1.5,
            "e": dt.datetime(2026, 1, 2, 3, 4, 5, 500000),
            "f": "txt",
            "g": {1: "a", dt.date(2026, 1, 1): "b", None: "c", False: "d", 1.5: "e"},
            "h": [15, "q", "5", "v"],
            "i": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            "j": dt.date(2026, 1, 2),
        },
    )
    assert type(plain) is dict and type(plain["h"]) is list
    kinds = [type(v) for v in plain.values()]
    assert kinds[:6] == [bool, bool, int, float, dt.datetime, str]
    assert [type(k) for k in plain["g"]] == [int, dt.date, type(None), bool, float]
    assert [type(v) for v in plain["h"]] == [int, str, str, str]


def test_to_plain_keeps_builtins_and_strips_subclasses() -> None:
    class Num(int):
        pass

    class Real(float):
        pass

    class Text(str):
        pass

    class Day(dt.date):
        pass

    class Moment(dt.datetime):
        pass

    assert to_plain(None) is None
    for same in ("t", 3, 2.5, True, dt.date(2026, 1, 1)):
        assert to_plain(same) is same
    assert type(to_plain(Num(3))) is int and to_plain(Num(3)) == 3
    assert type(to_plain(Real(2.5))) is float and to_plain(Real(2.5)) == 2.5
    assert type(to_plain(Text("t"))) is str and to_plain(Text("t")) == "t"
    day = to_plain(Day(2026, 2, 3))
    assert type(day) is dt.date and day == dt.date(2026, 2, 3)
    zone = dt.timezone(dt.timedelta(hours=-5))
    moment = to_plain(Moment(2026, 2, 3, 4, 5, 6, 7, zone, fold=1))
    assert type(moment) is dt.datetime
    assert moment == dt.datetime(2026, 2, 3, 4, 5, 6, 7, zone)
    assert moment.fold == 1 and moment.tzinfo is zone
    folded = to_plain(dt.datetime(2026, 11, 1, 1, 30, fold=1))
    assert folded.fold == 1 and folded == dt.datetime(2026, 11, 1, 1, 30)
    assert to_plain((1, 2) and [Num(1), {"k": Text("v")}]) == [1, {"k": "v"}]


@pytest.mark.parametrize(
    ("value", "label"),
    [(b"x", "bytes"), ({1, 2}, "set"), ((1, 2), "tuple"), (object(), "object")],
)
def test_unsupported_values_are_named_by_type(value: object, label: str) -> None:
    with pytest.raises(UnsupportedValueError) as caught:
        to_plain(value)
    assert str(caught.value) == f"unsupported value ({label}); {_HOLDS}"
    assert isinstance(caught.value, ValueError)


def test_unsupported_tags_are_named_by_tag() -> None:
    for text, tag in (("!custom 3", "!custom"), ("!foo bar", "!foo"), ("!!int 3", None)):
        data = _rt(f"v: {text}\n")
        if tag is None:
            assert to_plain(data) == {"v": 3}
            continue
        with pytest.raises(UnsupportedValueError) as caught:
            to_plain(data)
        assert str(caught.value) == f"unsupported value (tag {tag}); {_HOLDS}"
    with pytest.raises(UnsupportedValueError, match=r"^unsupported value \(bytes\)"):
        to_plain(_rt("v: !!binary aGk=\n"))

    class Tagged:
        tag = "!plain-string-tag"

    class ClaimsText:
        """Not a ruamel tagged scalar, though it carries the text tag: still not a story value."""

        tag = "tag:yaml.org,2002:str"
        value = "text"

    with pytest.raises(UnsupportedValueError, match=r"^unsupported value \(tag tag:yaml"):
        to_plain(ClaimsText())

    assert str(UnsupportedValueError(Tagged())) == (
        f"unsupported value (tag !plain-string-tag); {_HOLDS}"
    )


def test_a_mapping_or_list_key_or_a_set_is_unsupported_and_named_by_type() -> None:
    for text, label in (
        ("? {a: 1}\n: v\n", "CommentedKeyMap"),
        ("? [1]\n: v\n", "CommentedKeySeq"),
        ("v: !!set {a, b}\n", "CommentedSet"),
    ):
        with pytest.raises(UnsupportedValueError) as caught:
            to_plain(_rt(text))
        assert str(caught.value) == f"unsupported value ({label}); {_HOLDS}"
    with pytest.raises(UnsupportedValueError, match=r"^unsupported value \(_FrozenMap\)"):
        to_plain([{"k": 1}, {"a": {_FrozenMap(): 1}}])
    with pytest.raises(UnsupportedValueError, match=r"^unsupported value \(_FrozenList\)"):
        to_plain({_FrozenList([1]): 1})
    assert to_plain({3: "x"}) == {3: "x"}


class _FrozenMap(Mapping[str, int]):
    """A hashable mapping, the shape of a `? {a: 1}` key."""

    def __getitem__(self, key: str) -> int:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 1


class _FrozenList(list[int]):
    """A hashable list, the shape of a `? [1]` key."""

    def __hash__(self) -> int:  # type: ignore[override]
        return 1


def test_ruamel_types_are_looked_up_only_when_ruamel_is_loaded() -> None:
    from ruamel.yaml.comments import TaggedScalar

    assert values._ruamel_type("ruamel.yaml.comments", "TaggedScalar") is TaggedScalar
    assert values._ruamel_type("ruamel.yaml.comments", "no_such_name") is None
    assert values._ruamel_type("math", "pi") is None
    assert values._ruamel_type("a_module_never_imported", "TaggedScalar") is None
    assert values._ruamel_type("a_module_never_imported", "__class__") is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1),
        ("x", "x"),
        (None, None),
        (1.5, 1.5),
        (0.0, 0.0),
        (math.nan, math.nan),
        ({"a": 1, "b": [1, {"c": 2}]}, {"a": 1, "b": [1, {"c": 2}]}),
        ([], []),
        ({}, {}),
        (dt.datetime(2026, 1, 1, 12), dt.datetime(2026, 1, 1, 12)),
        (
            dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=1), "CET")),
        ),
        (dt.date(2026, 1, 1), dt.date(2026, 1, 1)),
    ],
)
def test_strict_equal_holds_for_the_same_value(a: Any, b: Any) -> None:
    assert strict_equal(a, b) is True
    assert strict_equal(b, a) is True


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (True, 1),
        (1, 1.0),
        (0, False),
        ("1", 1),
        (0.0, -0.0),
        (1.0, 2.0),
        (math.nan, 1.0),
        (1.0, math.nan),
        ([1, 2], [1, 2, 3]),
        ([1, 2], [2, 1]),
        ([1], [True]),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({"a": 1}, {"a": 1, "b": 2}),
        ({"a": 1}, {"a": True}),
        ({1: "a"}, {True: "a"}),
        ({"a": 1}, {"b": 1}),
        ({"a": [1]}, {"a": [1.0]}),
        ({}, []),
        (dt.date(2026, 1, 1), dt.datetime(2026, 1, 1)),
        (dt.date(2026, 1, 1), dt.date(2026, 1, 2)),
        (dt.datetime(2026, 1, 1, 12), dt.datetime(2026, 1, 1, 13)),
        (
            dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC),
            dt.datetime(2026, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        ),
        (dt.datetime(2026, 1, 1, 12), dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)),
    ],
)
def test_strict_equal_tells_types_order_signs_and_offsets_apart(a: Any, b: Any) -> None:
    assert strict_equal(a, b) is False
    assert strict_equal(b, a) is False


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        (None, None),
        ("t", "t"),
        (3, 3),
        (True, True),
        (1.5, 1.5),
        (math.nan, ".nan"),
        ({True: 1}, {"true": 1}),
        (math.inf, ".inf"),
        (-math.inf, "-.inf"),
        (dt.date(2026, 1, 2), "2026-01-02"),
        (dt.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
        ([1, math.nan, [dt.date(2026, 1, 2)]], [1, ".nan", ["2026-01-02"]]),
        (
            {1: "a", dt.date(2026, 1, 1): "b", None: "c", False: "d", 1.5: "f"},
            {"1": "a", "2026-01-01": "b", "null": "c", "false": "d", "1.5": "f"},
        ),
        ({math.inf: 1, "k": {"n": math.nan}}, {".inf": 1, "k": {"n": ".nan"}}),
    ],
)
def test_json_safe_writes_what_json_can_hold(value: Any, safe: Any) -> None:
    result = values.json_safe(value)
    assert result == safe
    assert strict_equal(result, safe)
    assert json.loads(json.dumps(result, allow_nan=False)) == safe


def test_json_safe_prints_any_other_value_as_text() -> None:
    assert values.json_safe(b"x") == "b'x'"
    assert values.json_safe({(1, 2): {1}}) == {"(1, 2)": "{1}"}


@pytest.mark.parametrize(
    ("value", "form", "same"),
    [
        (None, None, True),
        ("t", "t", True),
        (3, 3, True),
        (False, False, True),
        (1.5, 1.5, True),
        (math.inf, {"$float": ".inf"}, False),
        (-math.inf, {"$float": "-.inf"}, False),
        (dt.date(2026, 1, 2), {"$date": "2026-01-02"}, False),
        (
            dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            {"$datetime": "2026-01-02T03:04:05+00:00"},
            False,
        ),
        ([1, "a"], [1, "a"], True),
        ([1, dt.date(2026, 1, 2)], [1, {"$date": "2026-01-02"}], False),
        ({"a": 1, "b": [2]}, {"a": 1, "b": [2]}, True),
        ({"a": 1, "b": math.inf}, {"a": 1, "b": {"$float": ".inf"}}, False),
        ({"$x": 1}, {"$map": [["$x", 1]]}, False),
        ({1: dt.date(2026, 1, 1)}, {"$map": [[1, {"$date": "2026-01-01"}]]}, False),
        ({"a": 1, 2: 3}, {"$map": [["a", 1], [2, 3]]}, False),
        ({}, {}, True),
        ([], [], True),
    ],
)
def test_cache_encoding_round_trips_dates_nan_and_odd_keys(
    value: Any, form: Any, same: bool
) -> None:
    assert values.encode(value) == (form, same)
    assert strict_equal(values.decode(json.loads(json.dumps(form))), value)


def test_cache_encoding_keeps_nan() -> None:
    assert values.encode(math.nan) == ({"$float": ".nan"}, False)
    assert math.isnan(values.decode({"$float": ".nan"}))
    assert values.decode({"$float": "-.inf"}) == -math.inf


def test_cache_encoding_refuses_what_a_story_cannot_hold() -> None:
    with pytest.raises(UnsupportedValueError, match=r"^unsupported value \(set\)"):
        values.encode({"a": {1}})
    with pytest.raises(UnsupportedValueError, match=r"^unsupported value \(tuple\)"):
        values.encode([(1,)])


def test_decoding_reads_plain_json_as_is() -> None:
    form = {"a": [1, 2.5, None, True, "s"], "b": {"c": {}}, "d": []}
    assert values.decode(form) == form and values.decode(form) is not form
    assert strict_equal(values.decode({"a": 1, "b": 2}), {"a": 1, "b": 2})
    assert strict_equal(values.decode({"x": {"y": "2026-01-01"}}), {"x": {"y": "2026-01-01"}})
    assert values.decode({"only": [1]}) == {"only": [1]}


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ((1, 2), "unexpected tuple in cache"),
        ({"a": (1,)}, "unexpected tuple in cache"),
        ([{1, 2}], "unexpected set in cache"),
        ({"$date": "x", "a": 1}, "malformed tagged value in cache"),
        ({"a": 1, "$map": []}, "malformed tagged value in cache"),
        ({"$float": 1, "$datetime": 2}, "malformed tagged value in cache"),
        ({"$date": "not a date"}, "Invalid isoformat string: 'not a date'"),
        ({"$datetime": "nope"}, "Invalid isoformat string: 'nope'"),
    ],
)
def test_a_malformed_cache_form_is_an_error(form: Any, error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=f"^{re.escape(error)}$"):
        values.decode(form)


def test_a_cache_float_tag_with_an_unknown_name_is_an_error() -> None:
    with pytest.raises(KeyError):
        values.decode({"$float": "nan"})
    with pytest.raises(TypeError):
        values.decode({"$map": 5})


def test_usage_of_reads_counts_and_cost() -> None:
    assert values.usage_of(
        {"input_tokens": 1200, "output_tokens": 300, "calls": 4, "cost_usd": 0.25}
    ) == {"input_tokens": 1200, "output_tokens": 300, "calls": 4, "cost_usd": 0.25}
    whole = values.usage_of({"cost_usd": 2})
    assert whole == {"input_tokens": 0, "output_tokens": 0, "calls": 0, "cost_usd": 2.0}
    assert type(whole["cost_usd"]) is float


@pytest.mark.parametrize("raw", [None, "usage", [1, 2], 5, {}, {"other": 1}])
def test_usage_of_a_missing_or_odd_record_is_all_zero(raw: Any) -> None:
    assert values.usage_of(raw) == {
        "input_tokens": 0,
        "output_tokens": 0,
        "calls": 0,
        "cost_usd": None,
    }


def test_usage_of_ignores_figures_that_are_not_numbers() -> None:
    usage = values.usage_of(
        {"input_tokens": True, "output_tokens": "300", "calls": 2.0, "cost_usd": True}
    )
    assert usage == {"input_tokens": 0, "output_tokens": 0, "calls": 0, "cost_usd": None}
    assert values.usage_of({"calls": 3, "cost_usd": "0.5"})["cost_usd"] is None
    assert values.usage_of({"input_tokens": 7})["input_tokens"] == 7
    assert values.usage_of({"output_tokens": 8})["output_tokens"] == 8


# -- roundtrip: the reference reader, the full re-dump, and YAML errors a person can act on ------


def test_dump_rewrites_a_loaded_frontmatter_keeping_its_quotes_and_flow_lists() -> None:
    text = (
        "id: S-1\n"
        "title: 'Quoted: yes'\n"
        'other: "dq"\n'
        "labels: [a, b]\n"
        "nested:\n"
        "- x: 1\n"
        "  y: [1, 2]\n"
        "- plain\n"
        "when: 2026-01-02\n"
    )
    assert roundtrip.dump(roundtrip.load(text, "f")) == (
        "id: S-1\n"
        "title: 'Quoted: yes'\n"
        'other: "dq"\n'
        "labels: [a, b]\n"
        "nested:\n"
        "  - x: 1\n"
        "    y: [1, 2]\n"
        "  - plain\n"
        "when: 2026-01-02\n"
    )


def test_dump_writes_plain_data_as_block_yaml_without_wrapping_or_escaping() -> None:
    long = "word " * 700 + "end"
    data = {"a": ["é", long], "b": {"c": [{"d": 1, "e": [2]}]}, "f": "日本"}
    text = roundtrip.dump(data)
    assert text == (
        f"a:\n  - é\n  - {long}\nb:\n  c:\n    - d: 1\n      e:\n        - 2\nf: 日本\n"
    )
    assert to_plain(roundtrip.load(text, "f")) == data


def test_dump_folds_only_lines_wider_than_4096_columns() -> None:
    fits = "x" * 4088 + " tail"  # `k: ` + 4093 characters: 4096 columns
    assert roundtrip.dump({"k": fits}) == f"k: {fits}\n"
    wide = "x" * 4089 + " tail"  # 4097 columns: folded at the space, and still the same text
    text = roundtrip.dump({"k": wide})
    assert text == f"k: {'x' * 4089} \n  tail\n"
    assert roundtrip.load(text, "f")["k"] == wide


def test_compose_gives_the_node_tree_with_positions() -> None:
    node = roundtrip.compose("a: [1, x]\nb: c\n")
    assert node is not None
    assert (node.start_mark.line, node.end_mark.line) == (0, 2)
    assert node.value[0][1].value[1].value == "x"
    assert roundtrip.compose("") is None


def _load_error(text: str) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as caught:
        roundtrip.load(text, "S-0001/story.md")
    return caught.value


_BAD_CHAR_HINT = "remove it, or write it as an escape inside a double-quoted value"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("\x01", 2, 1),
        ("x: 1\n\x01", 3, 1),
        ("x: 1\r\x01", 3, 1),
        ("x: 1\r\ny: ab\x01", 3, 6),
        ('x: "a\x85b"\ny: \x01', 4, 4),
        ("x: 1\u2028y: \x01", 3, 4),
        ("x: 1\u2028\x01", 3, 1),
        ("x: 1\u2029\x01", 3, 1),
        ("x: a\x85\x01", 3, 1),
        ("x: \x02", 2, 4),
    ],
)
def test_a_character_yaml_forbids_is_reported_at_its_file_position(
    text: str, line: int, column: int
) -> None:
    error = _load_error(text)
    code = ord(text[-1])
    assert str(error) == (
        f"S-0001/story.md:{line}:{column}: character U+{code:04X} is not allowed in YAML\n"
        f"  hint: {_BAD_CHAR_HINT}"
    )
    assert (error.path, error.line, error.column) == ("S-0001/story.md", line, column)


def test_a_reader_error_without_a_character_code_reports_u0000() -> None:
    from ruamel.yaml.reader import ReaderError

    exc = ReaderError("f", 5, "\x01", "utf-8", "bad")
    error = roundtrip.yaml_error(exc, "x: 1\ny: \x01\n", "f.md")
    assert str(error).startswith("f.md:3:1: character U+0000 is not allowed in YAML")


@pytest.mark.parametrize(
    ("text", "where", "message", "hint"),
    [
        (
            "a: b: c\n",
            (2, 5),
            "a value contains ': ' (colon and space), which YAML reads as a nested key",
            "quote the value: a: 'b: c'",
        ),
        (
            "a: 1\nb: it's: here\n",
            (3, 8),
            "a value contains ': ' (colon and space), which YAML reads as a nested key",
            "quote the value: b: 'it''s: here'",
        ),
        (
            "a: 1\n\n  b: - c\n",
            (4, 4),
            "a value contains ': ' (colon and space), which YAML reads as a nested key",
            "quote the value:   b: '- c'",
        ),
        (
            "a: 1\r\nb: c: d\r\n",
            (3, 5),
            "a value contains ': ' (colon and space), which YAML reads as a nested key",
            "quote the value: b: 'c: d'",
        ),
        (
            "a: b: X\r\n",
            (2, 5),
            "a value contains ': ' (colon and space), which YAML reads as a nested key",
            "quote the value: a: 'b: X'",
        ),
        ("a: 1\na: 2\n", (3, 1), "duplicate key `a` (first on line 2)", "keep only one `a:` line"),
        (
            "x: 0\n'a': 1\n\"a\": 2\n",
            (4, 1),
            "duplicate key `a` (first on line 3)",
            "keep only one `a:` line",
        ),
        (
            "a: 1\nb:\n  c: 1\n  c: 2\n",
            (5, 3),
            "duplicate key `c` (first on line 4)",
            "keep only one `c:` line",
        ),
        ("{a: 1, a: 2}\n", (2, 8), "duplicate key `a`", "keep only one `a:` line"),
        (
            "a:\n\t- x\n",
            (3, 1),
            "a tab character where YAML needs spaces",
            "indent with spaces, not tabs",
        ),
        (
            "a: 1\nb: 'open\n",
            (3, 4),
            "a quoted value starting here is never closed",
            "close the quote, or remove the opening one",
        ),
        (
            'a: "open\nmore\n',
            (2, 4),
            "a quoted value starting here is never closed",
            "close the quote, or remove the opening one",
        ),
        (
            "a: *nope\n",
            (2, 4),
            "invalid YAML: found undefined alias 'nope'",
            "a leading `*` refers to an anchor; quote the value if you meant the text",
        ),
    ],
)
def test_a_yaml_mistake_is_explained_with_a_fix(
    text: str, where: tuple[int, int], message: str, hint: str
) -> None:
    error = _load_error(text)
    assert (error.line, error.column) == where
    assert str(error) == f"S-0001/story.md:{where[0]}:{where[1]}: {message}\n  hint: {hint}"


_GENERIC_HINT = (
    "check this line; quote values that contain ': ', ' #' or start with a special character "
    "such as [ { * & ! | > ' \" % @ `"
)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("a: [1\n", (3, 1), "invalid YAML: expected ',' or ']', but got '<stream end>'"),
        ('a: "\\q"\n', (2, 6), "invalid YAML: found unknown escape character 'q'"),
        ("a: 'x\n---\n'\n", (3, 1), "invalid YAML: found unexpected document separator"),
        ("a: b\n- c\n", (3, 1), "invalid YAML: expected <block end>, but found '-'"),
        ('a: "x" y\n', (2, 8), "invalid YAML: expected <block end>, but found '<scalar>'"),
        (
            "a: 1\n<<: 5\n",
            (3, 5),
            "invalid YAML: expected a mapping or list of mappings for merging, but found scalar",
        ),
    ],
)
def test_other_yaml_mistakes_point_at_the_line_with_a_general_hint(
    text: str, where: tuple[int, int], message: str
) -> None:
    error = _load_error(text)
    assert (error.line, error.column) == where
    assert str(error) == (
        f"S-0001/story.md:{where[0]}:{where[1]}: {message}\n  hint: {_GENERIC_HINT}"
    )


@pytest.mark.parametrize(
    ("text", "where", "value", "why"),
    [
        ("created: 2026-13-45\n", (2, 10), "2026-13-45", "month must be in 1..12"),
        ("a: 'x: y'\ncreated: 2026-13-45\n", (3, 10), "2026-13-45", "month must be in 1..12"),
        ("d: [1, '2026-13-45', 2026-13-45]\n", (2, 22), "2026-13-45", "month must be in 1..12"),
        ("m:\n  k: 2026-02-30\n", (3, 6), "2026-02-30", "day is out of range for month"),
        (
            "m: {'a b': [c], k: 2026-02-30}\n",
            (2, 20),
            "2026-02-30",
            "day is out of range for month",
        ),
        ("a: 1\n2026-13-45: x\n", (3, 1), "2026-13-45", "month must be in 1..12"),
        ("created: 2026-13-45\ntitle: x\n", (2, 10), "2026-13-45", "month must be in 1..12"),
        ("d: [2026-13-45, 1]\n", (2, 5), "2026-13-45", "month must be in 1..12"),
    ],
)
def test_a_value_that_cannot_be_built_is_found_and_named(
    text: str, where: tuple[int, int], value: str, why: str
) -> None:
    error = _load_error(text)
    assert (error.line, error.column) == where
    assert str(error) == (
        f"S-0001/story.md:{where[0]}:{where[1]}: cannot read the value {value!r}: {why}\n"
        f"  hint: fix the value, or quote it to keep it as text: '{value}'"
    )


def test_an_error_no_single_value_explains_points_at_the_first_line() -> None:
    error = roundtrip.yaml_error(RuntimeError("boom"), "a: 1\nb: [x]\n", "f.md")
    assert str(error) == "f.md:2:1: cannot read the frontmatter: boom"
    assert (error.line, error.column, error.hint) == (2, 1, None)
    broken = roundtrip.yaml_error(RuntimeError("boom"), "a: [\n", "f.md")
    assert str(broken) == "f.md:2:1: cannot read the frontmatter: boom"


def test_a_yaml_error_without_a_position_points_at_the_first_line() -> None:
    from ruamel.yaml.error import MarkedYAMLError

    cases = [
        (MarkedYAMLError(), "invalid YAML: invalid YAML"),
        (MarkedYAMLError(context="while parsing a thing"), "invalid YAML: while parsing a thing"),
        (
            MarkedYAMLError(
                context="while scanning a quoted scalar", problem="found unexpected end of stream"
            ),
            "invalid YAML: found unexpected end of stream",
        ),
    ]
    for exc, message in cases:
        error = roundtrip.yaml_error(exc, "a: 1\n", "f.md")
        assert str(error) == f"f.md:2:1: {message}\n  hint: {_GENERIC_HINT}"
        assert (error.line, error.column) == (2, 1)
