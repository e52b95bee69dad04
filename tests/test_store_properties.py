"""Property tests: random edits round-trip and leave other lines alone; both loaders agree."""

from __future__ import annotations

import datetime as dt
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from ai_sdlc.store import COUNTER_FIELDS, RECOVERY_KINDS, STATUSES, render
from ai_sdlc.store.fastload import NotFast
from ai_sdlc.store.fastload import load as fast_load
from ai_sdlc.store.values import strict_equal, to_plain
from tests.store_support import FIXTURE_IDS, make_project

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
]

text = st.one_of(
    st.sampled_from(TRICKY),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
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
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True), inner, max_size=4),
    ),
    max_leaves=8,
)
new_keys = st.from_regex(r"x_[a-z]{1,8}", fullmatch=True)
edit = st.one_of(
    st.tuples(st.just("counter"), st.sampled_from(COUNTER_FIELDS), st.integers(0, 10**6)),
    st.tuples(st.just("status"), st.sampled_from(STATUSES)),
    st.tuples(st.just("title"), non_empty_title),
    st.tuples(st.just("set"), st.sampled_from(["blocked_reason", "branch", "slug"]), text),
    st.tuples(st.just("record"), st.sampled_from(RECOVERY_KINDS)),
    st.tuples(st.just("delete"), st.sampled_from(["blocked_reason", "labels", "branch", "type"])),
    st.tuples(st.just("new"), new_keys, values),
)
#: Keys whose edit would break an alias (S-0033 shares one mapping between two keys).
ALIASED = {"anchored", "reused"}


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
    elif kind == "record":
        if story is not None:
            story.record_recovery(op[1])
            return
        breakdown = frontmatter.setdefault("recovery_breakdown", {})
        breakdown[op[1]] = breakdown.get(op[1], 0) + 1
        frontmatter["total_recovery_attempts"] = frontmatter.get("total_recovery_attempts", 0) + 1
    elif kind == "delete":
        frontmatter.pop(op[1], None)
    elif kind == "new":
        frontmatter[op[1]] = op[2]


def key_spans(data: bytes) -> dict[str, range]:
    """File line ranges of each top-level key's value (trailing comments/blank lines excluded)."""
    text = data.decode("utf-8").removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    close = next(i for i in range(1, len(lines)) if lines[i].rstrip() == "---")
    node = YAML(typ="rt").compose("".join(lines[1:close]))
    starts = [(k.value, k.start_mark.line + 1) for k, _ in node.value]
    spans = {}
    for index, (key, start) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else close
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
            end -= 1
        spans[key] = range(start, end)
    return spans


def kept(data: bytes, changed: set[str]) -> list[str]:
    spans = key_spans(data)
    skip = {n for key in changed if key in spans for n in spans[key]}
    lines = data.decode("utf-8").splitlines(keepends=True)
    return [line for n, line in enumerate(lines) if n not in skip]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(story_id=st.sampled_from(FIXTURE_IDS), ops=st.lists(edit, min_size=1, max_size=5))
def test_random_edits_reparse_and_leave_other_lines_identical(
    story_id: str, ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = make_project(Path(tmp), [story_id])
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
        assert kept(old, changed) == kept(new, changed)
        if not changed:
            assert new == old


def ruamel_plain(text: str) -> Any:
    return to_plain(YAML(typ="rt").load(text))


def assert_loaders_agree(text: str) -> None:
    try:
        fast = fast_load(text)
    except NotFast:
        return  # the store then uses ruamel itself
    assert strict_equal(fast, ruamel_plain(text)), text


@settings(max_examples=100, deadline=None)
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


@settings(max_examples=300, deadline=None)
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


@settings(max_examples=200, deadline=None)
@given(value=values)
def test_rendered_values_load_back_to_the_same_value(value: Any) -> None:
    text = render.inline(value)
    doc = f"k: {text}\n" if text is not None else "k:\n" + "\n".join(render.block(value, 2)) + "\n"
    assert strict_equal(ruamel_plain(doc)["k"], value), doc


@settings(max_examples=200, deadline=None)
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


@settings(max_examples=400, deadline=None)
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
