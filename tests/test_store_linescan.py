"""The line scanner (`store/linescan.py`) reads simple frontmatter exactly as the YAML readers do.

Differential tests: whenever the scanner accepts a text, its values equal libyaml's (`fastload`)
and ruamel's, and its line map equals the one `splice.layout` builds from libyaml's node marks;
a text it does not understand falls back and never reads differently. Deterministic in
`make test` (tests/hypothesis_profiles.py).
"""

from __future__ import annotations

import datetime as dt
import re
import tempfile
from pathlib import Path
from random import Random
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode as RuamelScalar
from ruamel.yaml.resolver import VersionedResolver

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import STATUSES, StoryStore, fastload, linescan, render, schema, splice
from ai_sdlc.store.values import strict_equal, to_plain
from ai_sdlc.store.yaml11 import reads_as_text
from ai_sdlc.store.yaml12 import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    STR,
    TIMESTAMP,
    UNSURE,
    resolve_plain,
)
from ai_sdlc.untrusted import MAX_DEPTH, MAX_NODES, check_yaml
from tests.hypothesis_profiles import examples
from tests.store_support import write_story

#: Plain words with every YAML 1.2 type and the look-alikes that stay text.
PLAIN = [
    "yes", "No", "on", "OFF", "y", "n", "true", "False", "TRUE", "null", "Null", "NULL", "~",
    "0", "7", "-3", "+12", "0777", "007", "1e3", "1E3", "-1e-3", "1.5", "-0.0", "+.5", "-.5",
    ".inf", "-.inf", "+.Inf", ".NaN", ".nan", "1.", "2026-01-31", "2026-01-31T10:00:00Z",
    "2001-12-14 21:59:43.10 -5", "2001-12-14t21:59:43.1234567+05:30", "2026-01-31 10:00:00",
    "1:20", "a:b", "http://example.com/a?b=c#d", "a#b", "it's", 'say "hi"', "é ☃ 🛑 naïve",
    "1.2.3", "v1.2", "a - b", "x]", "x}", "a, b", "~x", "<x", "=x", "a  b", "S-0001",
    "ai-sdlc/S-0001-fix", ".ai-sdlc/worktrees/S-1", "100%", "a'b'c", "key :x", "😀 emoji",
    "ab#", "a\\b", "x" * 300,
]  # fmt: skip
#: Words allowed as plain items of a one-line flow list.
FLOW_PLAIN = [
    "a", "b c", "yes", "0777", "1e3", ".inf", "~", "null", "2026-01-31", "-1", "+2", "x.y/z",
    "a-b", "S-0001", "1.2.3",
]  # fmt: skip
KEYS = ["id", "title", "status", "usage", "input_tokens", "a.b", "x-y", "p/q", "_", "k9", "yes"]
#: Characters of quoted text: YAML's indicators, escapes' letters, Unicode beyond the BMP.
CHARS = " '\"#:-[]{},&*!|>%@`?\\abnNtuxLP0/_é☃🛑\u200d\xa0\x00\x07\t\n\x85\u2028\ufeff"
DOUBLE_ESCAPES = {
    "\0": "\\0", "\x07": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\x0b": "\\v",
    "\x0c": "\\f", "\r": "\\r", "\x1b": "\\e", '"': '\\"', "\\": "\\\\", "\x85": "\\N",
    "\xa0": "\\_", "\u2028": "\\L", "\u2029": "\\P", "/": "\\/", " ": "\\ ",
}  # fmt: skip
COMMENTS = ["", "", "", " # note", "  #", " # a: b 'q' #x", "   # [x]"]


def random_text(rnd: Random) -> str:
    return "".join(rnd.choice(CHARS) for _ in range(rnd.randrange(12)))


def double_quoted(rnd: Random, text: str) -> str:
    """Text as a double-quoted scalar, each character escaped one of the ways YAML allows."""
    out = []
    for char in text:
        form = rnd.randrange(4)
        if char in DOUBLE_ESCAPES and (form or char in '"\\'):
            out.append(DOUBLE_ESCAPES[char])
        elif form == 1 or not char.isprintable():
            code = ord(char)
            out.append(
                f"\\x{code:02x}"
                if code <= 0xFF
                else f"\\u{code:04X}"
                if code <= 0xFFFF
                else f"\\U{code:08x}"
            )
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def scalar(rnd: Random, *, flow: bool = False) -> str:
    kind = rnd.choice(["plain", "plain", "single", "double"])
    if kind == "plain":
        return rnd.choice(FLOW_PLAIN if flow else PLAIN)
    text = random_text(rnd)
    if kind == "single" and text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    return double_quoted(rnd, text)


def mapping_lines(rnd: Random, indent: int, depth: int, keys: list[str] = KEYS) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for key in rnd.sample(keys, rnd.randint(1, min(6, len(keys)))):
        if rnd.random() < 0.3:  # comment and blank lines anywhere
            lines.append(rnd.choice(["", "  ", "# c", pad + "# c", "    # deep c"]))
        kind = rnd.choice(["scalar", "scalar", "empty", "flow", "map", "list"])
        if kind == "map" and depth < 4:
            lines.append(f"{pad}{key}:{rnd.choice(COMMENTS)}")
            lines += mapping_lines(rnd, indent + rnd.choice([1, 2, 4]), depth + 1)
        elif kind == "list":
            inner = pad + " " * rnd.choice([0, 2, 3])
            lines.append(f"{pad}{key}:{rnd.choice(COMMENTS)}")
            for _ in range(rnd.randint(1, 4)):
                item = rnd.choice(["[]", "{}"]) if rnd.random() < 0.1 else scalar(rnd)
                lines.append(f"{inner}-{' ' * rnd.randint(1, 2)}{item}{rnd.choice(COMMENTS)}")
        elif kind == "flow":
            items = [scalar(rnd, flow=True) for _ in range(rnd.randrange(4))]
            text = "[" + ", ".join(items) + "]" if items else rnd.choice(["[]", "{}", "[ ]"])
            lines.append(f"{pad}{key}: {text}{rnd.choice(COMMENTS)}")
        elif kind == "empty":
            lines.append(f"{pad}{key}:{rnd.choice(COMMENTS)}")
        else:
            gap = " " * rnd.randint(1, 2)
            lines.append(f"{pad}{key}:{gap}{scalar(rnd)}{rnd.choice(COMMENTS)}")
    return lines


def document(rnd: Random) -> str:
    lines = mapping_lines(rnd, rnd.choice([0, 0, 2]), 1)
    newline = rnd.choice(["\n", "\n", "\r\n"])
    text = newline.join(lines)
    return text + newline if rnd.random() < 0.7 else text


#: Random simple documents (generated from one random source: fast to draw, still derandomized).
documents = st.randoms(use_true_random=False).map(document)


def reference_view(text: str) -> tuple[Any, splice.Layout | None]:
    """Values (the fast loader's; ruamel's when its coarser syntax pre-check refuses the text)
    and the line map `splice.layout` builds from libyaml's node tree."""
    try:
        values = fastload.load(text)
    except fastload.NotFast:
        values = ruamel_values(text)
    root = yaml.compose(text, Loader=yaml.CSafeLoader)
    return values, splice.layout(text, root, list(values))


def ruamel_values(text: str) -> Any:
    return to_plain(YAML(typ="rt").load(text))


def assert_same_as_the_yaml_readers(text: str) -> bool:
    """True when the scanner accepted `text` (and then agrees); False when it fell back."""
    try:
        values, layout = linescan.load_for_edit(text)
    except linescan.NotSimple:
        return False
    fast_values, fast_layout = reference_view(text)
    assert strict_equal(values, fast_values), (text, values, fast_values)
    assert layout == fast_layout, text
    assert strict_equal(values, ruamel_values(text)), text
    return True


def test_a_simple_story_frontmatter_reads_with_every_value_kind() -> None:
    text = (
        "id: S-0001\n"
        "title: 'Fix: it''s # not a comment'\n"
        "status: in-progress   # trailing comment\n"
        "priority: 10\n"
        "created: '2026-01-31'\n"
        "updated: 2026-01-31\n"
        'emoji: "\\U0001F6D1 stop\\tnow \\"quoted\\""\n'
        "labels: []\n"
        "deps: [S-0002, 'S-0003']\n"
        "blocked_reason:\n"
        "\n"
        "# usage counters\n"
        "usage:\n"
        "  input_tokens: 962\n"
        "  ratio: .5\n"
        "list:\n"
        "- yes\n"
        "- 0777\n"
    )
    values, layout = linescan.load_for_edit(text)
    assert values == {
        "id": "S-0001",
        "title": "Fix: it's # not a comment",
        "status": "in-progress",
        "priority": 10,
        "created": "2026-01-31",
        "updated": dt.date(2026, 1, 31),
        "emoji": '\U0001f6d1 stop\tnow "quoted"',
        "labels": [],
        "deps": ["S-0002", "S-0003"],
        "blocked_reason": None,
        "usage": {"input_tokens": 962, "ratio": 0.5},
        "list": ["yes", 777],
    }
    assert [entry.key for entry in layout.entries] == list(values)
    assert assert_same_as_the_yaml_readers(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: |\n  block\n",
        "a: >-\n  folded\n",
        "a: b\n  continued\n",
        "a: 'not\n  closed'\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "? a\n: b\n",
        "a:\tb\n",
        "a: b\nb: c\na: d\n",
        "a: 0x1F\n",
        "a: 1_000\n",
        "a: 2026-13-45\n",
        "<<: {a: 1}\n",
        "true: 1\n",
        "'quoted key': 1\n",
        "a: {b: 1}\n",
        "a: [b, [c]]\n",
        "a: [b,c]\n",
        "a:\n- b: 1\n",
        "a:\n  - - b\n",
        "---\na: 1\n",
        "a: 1\n...\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: b: c\n",
        "a: b:\n",
        "a: 'x'y\n",
        'a: "\\q"\n',
        'a: "\\uD800"\n',
        "a: 1\rb: 2\n",
        "a: \x85b\n",
        "a: nbsp\xa0\n",
        "\ufeffa: 1\n",
        "- a\n- b\n",
        "just text\n",
        "",
        "# only a comment\n",
        "  a: 1\nb: 2\n",
        "a:\n    b: 1\n  c: 2\n",
        "a: -x\n",
        "a: @x\n",
        "k" * 200 + ": 1\n",
    ],
)
def test_anything_outside_the_subset_falls_back(text: str) -> None:
    with pytest.raises(linescan.NotSimple):
        linescan.scan(text)


@settings(max_examples=examples(150, fuzz_base=300))
@given(text=documents)
def test_generated_simple_documents_read_as_libyaml_and_ruamel_read_them(text: str) -> None:
    """Every generated document is in the subset: the scanner must accept it and agree."""
    assert assert_same_as_the_yaml_readers(text), f"fell back on a simple document: {text!r}"


#: Edits that make a simple document not simple (or still simple, differently).
NEAR_MISSES = [
    *" :#'\"\\-?&*!|>%@`{}[],=~.<",
    *["\t", "\n", "\r", "\r\n", "\x85", "\u2028", "\xa0", "\ufeff", "\x00"],
    *["- ", ": ", " #", "---", "...", "  ", "\n  ", "\n- ", "yes", "0x1", "1_0", "'", "''"],
]


def falls_back_or_reads_the_same(text: str) -> None:
    """The scanner refuses `text`, or reads it exactly as ruamel and libyaml do."""
    try:
        values = linescan.scan(text)[0]
    except linescan.NotSimple:
        return
    try:
        reference = ruamel_values(text)
    except Exception:
        raise AssertionError(f"scanner accepted what ruamel rejects: {text!r}") from None
    assert strict_equal(values, reference), text
    assert assert_same_as_the_yaml_readers(text)


@settings(max_examples=examples(200, fuzz_base=400))
@given(
    text=documents,
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.sampled_from(NEAR_MISSES)),
        min_size=1,
        max_size=3,
    ),
)
def test_near_misses_fall_back_or_read_the_same(
    text: str, edits: list[tuple[int, int, str]]
) -> None:
    for where, remove, insert in edits:
        at = where % (len(text) + 1)
        text = text[:at] + insert + text[at + remove :]
    falls_back_or_reads_the_same(text)


SYNTAX = " -+.:#'\"[]{},&*!|>%@`?~=<0123456789abeoxtTZnNuly\u00e9\\\t"
SHAPES = ["k: {}\n", "k:\n  - {}\n", "k: [{}]\n", "{}: v\n", "k:\n  a: {}\n  b: 1\n", "k: '{}'\n"]


@settings(max_examples=examples(200, fuzz_base=400))
@given(token=st.text(SYNTAX, max_size=16), shape=st.sampled_from(SHAPES))
def test_arbitrary_syntax_falls_back_or_reads_the_same(token: str, shape: str) -> None:
    text = shape.format(token)
    falls_back_or_reads_the_same(text)


def test_the_subset_is_held_to_the_hostile_file_limits() -> None:
    deep = "".join(f"{' ' * level}k{level}:\n" for level in range(MAX_DEPTH)) + " " * 70 + "x: 1\n"
    with pytest.raises(InvalidInputError, match="nested more than 64 levels"):
        check_yaml(deep, "deep.md")
    assert not linescan.bounded(deep)
    shallow = "".join(f"{' ' * level}k{level}:\n" for level in range(linescan.MAX_DEPTH - 1))
    shallow += " " * 40 + "x: 1\n"  # indented past the pre-scan's depth guess: no parser needed
    assert linescan.bounded(shallow)
    check_yaml(shallow, "shallow.md")
    many = "k:\n" + "".join(f"- {i}\n" for i in range(MAX_NODES))
    assert not linescan.bounded(many)
    with pytest.raises(InvalidInputError, match="expands to more than 20,000 values"):
        check_yaml(many, "many.md")
    fewer = "k:\n" + "".join(f"- {i}\n" for i in range(MAX_NODES // 2))
    assert linescan.bounded(fewer)
    check_yaml(fewer, "fewer.md")


YAML11 = yaml.resolver.Resolver()
words = st.one_of(
    st.sampled_from(PLAIN),
    st.from_regex(r"[-+]?[0-9_.:eExobTtZ+ -]{0,14}", fullmatch=True),
    st.from_regex(
        r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{2}:[0-9]{2})?", fullmatch=True
    ),
    st.text(st.sampled_from("yYnNoOfFtTrueaslNUL~.<=0123456789infINFaN"), max_size=6),
)


@settings(max_examples=examples(300, fuzz_base=600))
@given(word=words)
def test_yaml_1_1_typing_quotes_at_least_what_pyyaml_types(word: str) -> None:
    pyyaml = YAML11.resolve(yaml.ScalarNode, word, (True, False))
    if pyyaml != "tag:yaml.org,2002:str":
        assert not reads_as_text(word), (word, pyyaml)
    elif not reads_as_text(word):
        # Only the YAML 1.1 spec's wider forms PyYAML leaves out: y/n, `.`-only floats like
        # 1.2.3, one-digit timestamps, 0-led decimals.
        extra = r"[yYnN]|[-+]?[0-9_]*\.[0-9._]*([eE][-+][0-9]+)?|[-+]?[0-9_-]+|.*:.*"
        assert re.fullmatch(extra, word), word


RUAMEL_TAGS = {"str": STR, "null": NULL, "bool": BOOL, "int": INT, "float": FLOAT}
RUAMEL_TAGS.update({"timestamp": TIMESTAMP, "merge": UNSURE, "value": UNSURE})
YAML12 = VersionedResolver(version=(1, 2))


@settings(max_examples=examples(300, fuzz_base=600))
@given(word=words | st.text(max_size=6) | st.sampled_from(["1\n", "true\n", "", "<<", "="]))
def test_yaml_1_2_typing_is_ruamels(word: str) -> None:
    """The shortcuts in `resolve_plain` (word sets, digit strings) keep ruamel's answer."""
    assume(word[:1] not in "!&*")  # a tag, anchor or alias there: never a plain scalar
    tag = str(YAML12.resolve(RuamelScalar, word, (True, False))).rsplit(":", 1)[1]
    assert resolve_plain(word) == RUAMEL_TAGS[tag], word


def test_plain_ok_quotes_words_either_yaml_version_types() -> None:
    assert render.plain_ok("in-progress")
    for word in ["yes", "y", "0777", "1:20", "2026-01-31", "null", "1e3", ".inf", "1.2.3"]:
        assert not render.plain_ok(word), word


#: Keys of the generated part of a story (none the schema checks).
STORY_KEYS = ["x_a", "x.b", "x-c", "notes", "usage", "p/q", "yes"]
NEW_VALUES = st.one_of(
    st.integers(-(10**6), 10**6),
    st.sampled_from([*PLAIN[:40], "", "a: b", "x #y", "line\nbreak", "- item", "'q'", " pad "]),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.sampled_from(["a", "yes", "1", "b c"]), max_size=3),
    st.dictionaries(st.sampled_from(["input_tokens", "calls", "k"]), st.integers(0, 99)),
)
EDITS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from([*STORY_KEYS, "new_key"]), NEW_VALUES),
        st.tuples(st.just("delete"), st.sampled_from(STORY_KEYS), st.none()),
        st.tuples(st.just("status"), st.just("status"), st.sampled_from(STATUSES)),
    ),
    min_size=1,
    max_size=4,
)


def read(text: str) -> Any:
    try:
        return fastload.load(text)
    except fastload.NotFast:
        return ruamel_values(text)


def apply(frontmatter: Any, edits: list[tuple[str, str, Any]]) -> None:
    for kind, key, value in edits:
        if kind == "delete":
            frontmatter.pop(key, None)
        else:
            frontmatter[key] = value


@settings(max_examples=examples(60, fuzz_base=300))
@given(rnd=st.randoms(use_true_random=False), edits=EDITS)
def test_edits_through_the_scanner_write_the_bytes_the_libyaml_path_writes(
    rnd: Random, edits: list[tuple[str, str, Any]]
) -> None:
    newline = rnd.choice(["\n", "\r\n"])
    lines = ["id: S-0001", "title: 'A story: simple'", "status: ready"]
    lines += mapping_lines(rnd, 0, 1, STORY_KEYS)
    frontmatter = "".join(line + newline for line in lines)
    before, layout = linescan.load_for_edit(frontmatter)  # in the subset by construction
    assert schema.find_problem(before, "S-0001") is None  # so `edit` takes the scanner's path
    after = to_plain(before)
    apply(after, edits)
    # What the libyaml path (the fast path before the scanner) writes for the same edit: its
    # values (ruamel's where its syntax pre-check is coarser) and libyaml's line map.
    values, reference_layout = reference_view(frontmatter)
    assert strict_equal(values, before)
    assert reference_layout == layout
    expected = splice.rewrite(
        frontmatter, newline, values, after, reference_layout, read=read, lines_only=True
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = StoryStore(Path(tmp))
        store.init()
        body = f"# Body{newline}"
        path = write_story(store, "S-0001", f"---{newline}{frontmatter}---{newline}{body}")
        with store.edit("S-0001") as story:
            apply(story.frontmatter, edits)
        assert path.read_bytes() == f"---{newline}{expected}---{newline}{body}".encode()
        assert strict_equal(to_plain(store.get("S-0001").frontmatter), after)
