"""Property tests: random edits round-trip and leave other lines alone; both loaders agree
(libyaml's, with the YAML 1.2 rules, and ruamel's, the reference).

Deterministic in `make test` (tests/hypothesis_profiles.py); `make fuzz` runs the same tests as a
longer random search and prints what it tried.
"""

from __future__ import annotations

import datetime as dt
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode as RuamelScalar
from ruamel.yaml.resolver import VersionedResolver

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import COUNTER_FIELDS, RECOVERY_KINDS, STATUSES, render, splice
from ai_sdlc.store.fastload import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    STR,
    TIMESTAMP,
    UNSURE,
    NotFast,
    resolve_plain,
)
from ai_sdlc.store.fastload import load as fast_load
from ai_sdlc.store.values import strict_equal, to_plain
from ai_sdlc.untrusted import MAX_DEPTH, MAX_NODES, check_yaml
from tests.hypothesis_profiles import examples
from tests.store_support import FIXTURE_IDS, bump_recovery, make_project, write_story

TRICKY = [
    "Fix: crash",
    "yes",
    "No",
    "on",
    "0777",
    "1:20",
    "2026-01-31",
    "2026-01-31T10:00:00Z",
    "null",
    "~",
    "'single'",
    '"double"',
    "a #b",
    "a# b",
    "- item",
    "? key",
    "@mention",
    "`tick`",
    "%percent",
    "&anchor",
    "*alias",
    "!tag",
    "[flow]",
    "{flow}",
    "é ☃ 🛑 \U0001f6d1",
    "tab\there",
    "line\nbreak",
    "crlf\r\nbreak",
    " leading",
    "trailing ",
    "",
    "<<",
    "=",
    ".inf",
    "-.5",
    "1e3",
    "0x1F",
    "---",
    "...",
    "\u2028sep",
    "\x85nel",
    "nbsp\xa0here",
    "bom\ufeff",
    "back\\slash",
    "x" * 300,
    "key: value # not a comment",
    "#",
    ": ",
    "- ",
    "|",
    ">-",
    "  both sides  ",
    "\ufeffleading bom",
    "emoji 🛑 👩\u200d💻 flags 🇫🇷",
    "'",
    '"',
    "''",
    "nul\x00byte",
    "\x1b[31mred\x1b[0m",
    "del\x7f c1\x9b",
    "\r",
    "\n",
    "two\n\n",
    "trailing newline\n",
    "\u2029para",
    "y" * 5000,
]

#: Characters that mean something to YAML or to line splitting, and other hostile ones.
HOSTILE = [
    *" :#'\"\\-?&*!|>%@`{}[],=~.\t\n\r",
    *"\x00\x07\x1b\x7f\x85\x9b\xa0\u2028\u2029\ufeff\u200d\U0001f6d1é",
    *["a", "b", "yes", "0", "1:2", "---", "...", "<<", "null", "\r\n"],
]
hostile_text = st.lists(st.sampled_from(HOSTILE), max_size=12).map("".join)
text = st.one_of(
    st.sampled_from(TRICKY),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
    hostile_text,
    # very long lines
    st.builds(lambda part, times: (part or "x") * times, hostile_text, st.integers(50, 400)),
    # multi-line text
    st.lists(hostile_text, min_size=2, max_size=5).map("\n".join),
)
non_empty_title = text.filter(lambda s: bool(s.strip()))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False),
    text,
    st.dates(min_value=dt.date(1000, 1, 1)),
)
#: Fields the schema checks: a random new key must not be one of them.
CHECKED = {
    "id", "title", "slug", "type", "status", "priority", "created", "updated", "labels",
    "dependencies", "epic", "blocked_reason", "blocked_at", "recovery_breakdown",
    "research_complete", "plan_complete", "implementation_complete", "reviews_complete",
    *COUNTER_FIELDS,
}  # fmt: skip
keys = st.one_of(
    st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
    text.filter(lambda k: len(render.scalar(k)) <= render.MAX_PLAIN_KEY),
)
values = st.recursive(
    st.one_of(
        scalars,
        st.datetimes(
            min_value=dt.datetime(1000, 1, 1),
            timezones=st.sampled_from(
                [None, dt.UTC, dt.timezone(dt.timedelta(hours=1, minutes=30))]
            ),
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=8,
)
new_keys = st.one_of(
    st.from_regex(r"x_[a-z]{1,8}", fullmatch=True),
    keys.filter(lambda k: k not in CHECKED),
)
MOVABLE = ["id", "title", "status", "priority", "labels", "created", "slug", "branch"]
edit = st.one_of(
    st.tuples(st.just("counter"), st.sampled_from(COUNTER_FIELDS), st.integers(0, 10**6)),
    st.tuples(st.just("status"), st.sampled_from(STATUSES)),
    st.tuples(st.just("title"), non_empty_title),
    st.tuples(st.just("set"), st.sampled_from(["blocked_reason", "branch", "slug"]), text),
    st.tuples(st.just("reset"), st.sampled_from(["blocked_reason", "branch", "slug"]), text),
    st.tuples(st.just("move"), st.sampled_from(MOVABLE)),
    st.tuples(st.just("record"), st.sampled_from(RECOVERY_KINDS)),
    st.tuples(st.just("delete"), st.sampled_from(["blocked_reason", "labels", "branch", "type"])),
    st.tuples(st.just("new"), new_keys, values),
)
#: Keys whose edit would break an alias (S-0033 shares one mapping between two keys).
ALIASED = {"anchored", "reused"}

#: Hand-made layouts beyond the fixtures: keep-chomping block scalar with blank lines after
#: it, comments at column 0 inside and after values, an indented root, flow values.
EXTRA = {
    "S-0040": "---\n"
    "id: S-0040\n"
    "title: Keep chomping\n"
    "status: ready\n"
    "notes: |+\n"
    "  kept text\n"
    "\n"
    "\n"
    "branch: main   # trailing comment\n"
    "\n"
    "labels:\n"
    "- a\n"
    "# between items\n"
    "- b\n"
    "# after the list\n"
    "blocked_reason: 'x'\n"
    'extra: {a: [1, 2], b: "\\N"}\n'
    "---\n"
    "body\n",
    "S-0041": "---\n"
    "  # an indented root mapping\n"
    "  id: S-0041\n"
    '  title: "Indented \\u00e9"\n'
    "  status: backlog\n"
    "  # a comment\n"
    "  slug: s\n"
    "  labels: []\n"
    "  last: >\n"
    "    folded\n"
    "    text\n"
    "---\n",
}
STORY_IDS = [*FIXTURE_IDS, *EXTRA]


def apply(frontmatter: Any, op: tuple[Any, ...], story: Any = None) -> None:
    """Apply one edit to a story (when given) or to a plain dict (the expectation)."""
    kind = op[0]
    if kind == "counter":
        frontmatter[op[1]] = op[2]
    elif kind == "status":
        frontmatter["status"] = op[1]
    elif kind == "title":
        frontmatter["title"] = op[1]
    elif kind == "set":
        frontmatter[op[1]] = op[2]
    elif kind == "reset":  # delete, then set again: the key moves to the end
        frontmatter.pop(op[1], None)
        frontmatter[op[1]] = op[2]
    elif kind == "move":
        if op[1] in frontmatter:
            if story is not None:
                frontmatter.move_to_end(op[1])
            else:
                frontmatter[op[1]] = frontmatter.pop(op[1])
    elif kind == "record":
        if story is not None:
            bump_recovery(story, op[1])
            return
        breakdown = frontmatter.setdefault("recovery_breakdown", {})
        breakdown[op[1]] = breakdown.get(op[1], 0) + 1
        frontmatter["total_recovery_attempts"] = frontmatter.get("total_recovery_attempts", 0) + 1
    elif kind == "delete":
        frontmatter.pop(op[1], None)
    elif kind == "new":
        frontmatter[op[1]] = op[2]


def key_spans(data: bytes) -> dict[str, range]:
    """File line ranges of each top-level key's value and the blank lines right after it
    (trailing comment lines not indented into the value, and what follows them, excluded)."""
    text = data.decode("utf-8").removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    close = next(i for i in range(1, len(lines)) if lines[i].rstrip() == "---")
    node = YAML(typ="rt").compose("".join(lines[1:close]))
    starts = [(k.value, k.start_mark.line + 1, k.start_mark.column) for k, _ in node.value]
    spans = {}
    for index, (key, start, column) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else close
        segment_end = end
        while end > start + 1 and is_trailer(lines[end - 1], column):
            end -= 1
        while end < segment_end and not lines[end].strip():
            end += 1
        spans[key] = range(start, end)
    return spans


def is_trailer(line: str, column: int) -> bool:
    stripped = line.strip()
    indent = len(line) - len(line.lstrip(" "))
    return not stripped or (stripped.startswith("#") and indent <= column)


def kept(data: bytes, changed: set[str]) -> list[str]:
    spans = key_spans(data)
    skip = {n for key in changed if key in spans for n in spans[key]}
    lines = data.decode("utf-8").splitlines(keepends=True)
    return [line for n, line in enumerate(lines) if n not in skip]


def project_with(root: Path, story_id: str) -> Any:
    if story_id in EXTRA:
        store = make_project(root, [])
        write_story(store, story_id, EXTRA[story_id])
        return store
    return make_project(root, [story_id])


@settings(max_examples=examples(60, fuzz_base=150))
@given(story_id=st.sampled_from(STORY_IDS), ops=st.lists(edit, min_size=1, max_size=5))
def test_random_edits_reparse_and_leave_other_lines_identical(
    story_id: str, ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = project_with(Path(tmp), story_id)
        path = store.stories_dir / story_id / "story.md"
        old = path.read_bytes()
        original = to_plain(store.get(story_id).frontmatter)
        expected = to_plain(store.get(story_id).frontmatter)
        for op in ops:
            apply(expected, op)
        with store.edit(story_id) as story:
            for op in ops:
                apply(story.frontmatter, op, story)
        new = path.read_bytes()
        assert strict_equal(to_plain(store.get(story_id).frontmatter), expected)
        changed = {
            k
            for k in set(original) | set(expected)
            if k not in original or k not in expected or not strict_equal(original[k], expected[k])
        }
        assert not changed & ALIASED
        # Keys the edit moved (deleted and set again, move_to_end) may move; never more of
        # them than the code moved, and every other line stays byte for byte.
        both = [k for k in expected if k in original]
        moved = set(both) - splice.in_place(list(original), list(expected))
        reordered = {op[1] for op in ops if op[0] in ("reset", "move", "delete")}
        assert len(moved) <= len(reordered & set(both))
        assert kept(old, changed | moved) == kept(new, changed | moved)
        if not changed and not moved:
            assert new == old


SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)


@settings(max_examples=examples(40))
@given(
    story_id=st.sampled_from(STORY_IDS),
    where=st.sampled_from(["blocked_reason", "x_new", "nested", "key", "long_key"]),
    before=text,
    bad=SURROGATES,
)
def test_values_that_cannot_be_stored_are_refused_before_anything_is_written(
    story_id: str, where: str, before: str, bad: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = project_with(Path(tmp), story_id)
        path = store.stories_dir / story_id / "story.md"
        old = path.read_bytes()
        value = before[: len(before) // 2] + bad + before[len(before) // 2 :]
        with pytest.raises(InvalidInputError) as refused, store.edit(story_id) as story:
            story.increment("retry_count")
            if where == "nested":
                story.frontmatter["x_nested"] = {"items": ["fine", value]}
            elif where == "key":
                story.frontmatter["x_nested"] = {value: 1}
            elif where == "long_key":
                story.frontmatter["x_nested"] = {"k" * (render.MAX_PLAIN_KEY + 1): "v"}
            else:
                story.frontmatter[where] = value
        message = str(refused.value)
        assert message.startswith(f"{path}: refusing to write `")
        assert refused.value.hint
        if where == "long_key":
            assert "characters long" in message
        else:
            assert f"U+{ord(bad):04X}" in message
        assert path.read_bytes() == old
        assert sorted(p.name for p in path.parent.iterdir()) == ["story.md"]


def ruamel_plain(text: str) -> Any:
    return to_plain(YAML(typ="rt").load(text))


def assert_loaders_agree(text: str) -> None:
    try:
        fast = fast_load(text)
    except NotFast:
        return  # the store then uses ruamel itself
    assert strict_equal(fast, ruamel_plain(text)), text


@settings(max_examples=examples(50, fuzz_base=100))
@given(
    value=st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True), values),
    flow=st.sampled_from([False, True, None]),
    style=st.sampled_from([None, "'", '"']),
)
def test_fast_loader_equals_ruamel_on_generated_frontmatter(
    value: dict[str, Any], flow: bool | None, style: str | None
) -> None:
    assert_loaders_agree(
        yaml.safe_dump(
            value, default_flow_style=flow, default_style=style, allow_unicode=True, width=60
        )
    )
    if value:
        lines = render.block(value, 0)
        assert_loaders_agree("\n".join(lines) + "\n")


plain_tokens = st.one_of(
    st.from_regex(r"[-+]?[0-9_.:eExobTtZ+ -]{0,16}", fullmatch=True),
    st.from_regex(
        r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]{0,9})?"
        r"( ?(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?",
        fullmatch=True,
    ),
    st.sampled_from(
        [
            "yes",
            "no",
            "on",
            "off",
            "y",
            "n",
            "true",
            "True",
            "TRUE",
            "tRUE",
            "false",
            "null",
            "Null",
            "NULL",
            "nULL",
            "~",
            "",
            "<<",
            "=",
            ".inf",
            "-.Inf",
            "+.INF",
            ".nan",
            ".NaN",
            "0o17",
            "0x_",
            "0b101",
            "1__0",
            "_1",
            "!!str 5",
            "! 5",
            "&a 1",
            "*a",
            "[1, 2]",
            "{a: 1}",
            "'q'",
            '"d\\x41"',
            "a: b",
            "- x",
        ]
    ),
)


@settings(max_examples=examples(300))
@given(token=plain_tokens)
def test_fast_loader_equals_ruamel_on_plain_scalars(token: str) -> None:
    text = f"k: {token}\nother: 1\n"
    try:
        reference = ruamel_plain(text)
    except Exception:
        reference = None
    try:
        fast = fast_load(text)
    except NotFast:
        return
    assert reference is not None, f"fast loader accepted what ruamel rejects: {text!r}"
    assert strict_equal(fast, reference), (text, fast, reference)


@settings(max_examples=examples(200))
@given(value=values)
def test_rendered_values_load_back_to_the_same_value(value: Any) -> None:
    text = render.inline(value)
    doc = f"k: {text}\n" if text is not None else "k:\n" + "\n".join(render.block(value, 2)) + "\n"
    assert strict_equal(ruamel_plain(doc)["k"], value), doc


@settings(max_examples=examples(200))
@given(value=text)
def test_unquoted_strings_are_text_for_yaml_1_1_readers_too(value: str) -> None:
    rendered = render.scalar(value)
    loaded = yaml.safe_load(f"k: {rendered}\n")["k"]
    assert loaded == value or not render.plain_ok(value)
    if render.plain_ok(value):
        assert not re.match(r"['\"]", rendered)
        assert loaded == value


SYNTAX = " -+.:#'\"[]{},&*!|>%@`?~=<0123456789abeoxtTZnNuly\u00e9\\\t\n"
SHAPES = [
    "k: {}\n",
    "k:\n  - {}\n",
    "k: [{}]\n",
    "{}: v\n",
    "k:\n  a: {}\n  b: 1\n",
    "k: >\n  {}\n",
    "k: '{}'\n",
    'k: "{}"\n',
    "k: {{a: {}}}\n",
    "{}\n",
    "k: |\n  {}\n  x\n",
    "- {}\n- [{}]\n",
]


@settings(max_examples=examples(400))
@given(token=st.text(SYNTAX, max_size=16), shape=st.sampled_from(SHAPES))
def test_fast_loader_never_disagrees_on_arbitrary_syntax(token: str, shape: str) -> None:
    """Fuzzing found libyaml/ruamel differences (tabs, anchors, `?`, `|#`): those must fall back."""
    text = shape.format(token, token)
    try:
        fast = fast_load(text)
    except NotFast:
        return
    try:
        reference = ruamel_plain(text)
    except Exception:
        raise AssertionError(f"fast loader accepted what ruamel rejects: {text!r}") from None
    assert strict_equal(fast, reference), text


def test_a_story_frontmatter_reads_with_every_value_kind_as_ruamel_reads_it() -> None:
    """YAML 1.2 as ruamel reads it: `yes` is text, `0777` is 777, a bare date is a date."""
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
    expected = {
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
    assert strict_equal(fast_load(text), expected)
    assert strict_equal(ruamel_plain(text), expected)


RUAMEL_TAGS = {"str": STR, "null": NULL, "bool": BOOL, "int": INT, "float": FLOAT}
RUAMEL_TAGS.update({"timestamp": TIMESTAMP, "merge": UNSURE, "value": UNSURE})
YAML12 = VersionedResolver(version=(1, 2))


@settings(max_examples=examples(300, fuzz_base=600))
@given(
    word=plain_tokens
    | st.text(st.sampled_from("yYnNoOfFtTrueaslNUL~.<=0123456789infINFaN"), max_size=6)
    | st.text(max_size=6)
    | st.sampled_from(["1\n", "true\n", "", "<<", "="])
)
def test_yaml_1_2_typing_is_ruamels(word: str) -> None:
    """The fast loader's plain-scalar table (and its shortcuts: word sets, digit strings)
    gives ruamel's YAML 1.2 answer."""
    assume(word[:1] not in "!&*")  # a tag, anchor or alias there: never a plain scalar
    tag = str(YAML12.resolve(RuamelScalar, word, (True, False))).rsplit(":", 1)[1]
    assert resolve_plain(word) == RUAMEL_TAGS[tag], word


def test_plain_ok_quotes_words_either_yaml_version_types() -> None:
    assert render.plain_ok("in-progress")
    for word in ["yes", "y", "N", "0777", "1:20", "2026-01-31", "null", "1e3", ".inf", "010"]:
        assert not render.plain_ok(word), word


def test_yaml_texts_are_held_to_the_hostile_file_limits_and_no_further() -> None:
    deep = "".join(f"{' ' * level}k{level}:\n" for level in range(MAX_DEPTH)) + " " * 70 + "x: 1\n"
    with pytest.raises(InvalidInputError, match="nested more than 64 levels"):
        check_yaml(deep, "deep.md")
    shallow = "".join(f"{' ' * level}k{level}:\n" for level in range(15)) + " " * 40 + "x: 1\n"
    check_yaml(shallow, "shallow.md")
    many = "k:\n" + "".join(f"- {i}\n" for i in range(MAX_NODES))
    with pytest.raises(InvalidInputError, match="expands to more than 20,000 values"):
        check_yaml(many, "many.md")
    check_yaml("k:\n" + "".join(f"- {i}\n" for i in range(MAX_NODES // 2)), "fewer.md")
