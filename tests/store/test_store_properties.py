"""Property tests: random edits round-trip and leave other lines alone; both loaders agree
(libyaml's, with the YAML 1.2 rules, and ruamel's, the reference).

Deterministic in `make test` (tests/support/hypothesis_profiles.py); `make fuzz` runs the same
tests as a
longer random search and prints what it tried.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
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

from ai_sdlc.errors import BusyError, InvalidInputError, StoryNotFoundError, UsageError
from ai_sdlc.locks import SidecarLock
from ai_sdlc.store import (
    COUNTER_FIELDS,
    RECOVERY_KINDS,
    STATUSES,
    StoryStore,
    render,
    schema,
    splice,
)
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
from tests.support.hypothesis_profiles import examples
from tests.support.store_support import (
    FIXTURE_IDS,
    OLD_NS,
    bump_recovery,
    make_project,
    minimal,
    write_story,
)

pytestmark = pytest.mark.slow

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


@settings(max_examples=examples(30, fuzz_base=150))
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


@settings(max_examples=examples(25, fuzz_base=100))
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


@settings(max_examples=examples(150, fuzz_base=300))
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


@settings(max_examples=examples(100, fuzz_base=200))
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


# =============================================================================================
# The story store's operations (`StoryStore`): the files it writes, what it refuses and with
# which message, its locks as one process sees them, the order of its listings, its ids.
# Plain in-process unit tests (the classes are named `TestTheStore...` so they can be selected
# together with `-k TestTheStore`).
# =============================================================================================

FRESH_GITIGNORE = (
    "# ai-sdlc local state (caches, locks, run logs): not for git\n"
    ".cache/\n.locks/\nstate/\nruns/\nworktrees/\n.gitignore\n"
)
TODAY = dt.date(2026, 1, 31)
BUSY_HINT = "\n  hint: wait for the other command to finish, then retry"


def _project(tmp_path: Path, **kwargs: Any) -> StoryStore:
    store = StoryStore(tmp_path / "proj", today=lambda: TODAY, **kwargs)
    store.init()
    return store


def _story(store: StoryStore, story_id: str, **fields: str) -> Path:
    return write_story(store, story_id, minimal(story_id, **fields))


def _hand_made(tmp_path: Path) -> StoryStore:
    """A project another tool made: `.ai-sdlc/stories/` with one story, no `.gitignore`."""
    store = StoryStore(tmp_path / "proj")
    store.stories_dir.mkdir(parents=True)
    _story(store, "S-0001")
    return store


def _folder_fsyncs(monkeypatch: pytest.MonkeyPatch, folder: Path) -> list[int]:
    """Records each fsync of `folder` itself (the call that makes a rename in it durable)."""
    synced: list[int] = []
    real = os.fsync
    inode = os.stat(folder).st_ino

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode) and info.st_ino == inode:
            synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


class TestTheStoreSetsUpAProject:
    def test_init_makes_the_tree_and_a_gitignore_that_ignores_itself_once(
        self, tmp_path: Path
    ) -> None:
        store = StoryStore(tmp_path / "a" / "b")  # its parents are made too
        assert store.init() is True
        assert store.stories_dir.is_dir()
        assert (store.ai_dir / ".gitignore").read_text(encoding="utf-8") == FRESH_GITIGNORE
        assert store.init() is False
        assert (store.ai_dir / ".gitignore").read_text(encoding="utf-8") == FRESH_GITIGNORE

    def test_init_in_a_bare_ai_dir_makes_the_stories_folder(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path)
        store.ai_dir.mkdir()
        assert store.init() is True
        assert store.stories_dir.is_dir()

    def test_init_says_it_made_a_folder_even_when_the_gitignore_was_complete(
        self, tmp_path: Path
    ) -> None:
        store = StoryStore(tmp_path)
        store.ai_dir.mkdir()
        (store.ai_dir / ".gitignore").write_text(FRESH_GITIGNORE, encoding="utf-8")
        assert store.init() is True
        assert (store.ai_dir / ".gitignore").read_text(encoding="utf-8") == FRESH_GITIGNORE

    def test_init_says_it_completed_the_gitignore_of_an_existing_tree(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path)
        store.stories_dir.mkdir(parents=True)
        assert store.init() is True
        assert (store.ai_dir / ".gitignore").read_text(encoding="utf-8") == FRESH_GITIGNORE

    def test_init_accepts_a_folder_another_init_made_meanwhile(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = StoryStore(tmp_path)
        real_mkdir = Path.mkdir

        def mkdir_after_another(self: Path, *args: Any, **kwargs: Any) -> None:
            if self in (store.ai_dir, store.stories_dir) and not self.exists():
                os.mkdir(self)  # a concurrent `ai-sdlc init` got there first
            real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir_after_another)
        assert store.init() is True
        assert store.stories_dir.is_dir()

    def test_init_refuses_a_file_where_a_folder_goes(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path)
        store.ai_dir.write_text("not a folder", encoding="utf-8")
        with pytest.raises(InvalidInputError) as caught:
            store.init()
        assert str(caught.value) == (
            f"{store.ai_dir}: exists but is not a folder\n  hint: move the file away"
        )
        assert caught.value.path == str(store.ai_dir)
        store.ai_dir.unlink()
        store.ai_dir.mkdir()
        store.stories_dir.write_text("", encoding="utf-8")
        with pytest.raises(InvalidInputError) as caught:
            store.init()
        assert caught.value.path == str(store.stories_dir)
        assert caught.value.hint == "move the file away"

    def test_the_missing_gitignore_lines_go_after_the_users_own(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path)
        store.stories_dir.mkdir(parents=True)
        ignore = store.ai_dir / ".gitignore"
        ignore.write_text("# café\nnode_modules", encoding="utf-8")  # no final newline
        assert store.init() is True
        assert ignore.read_text(encoding="utf-8") == (
            "# café\nnode_modules\n.cache/\n.locks/\nstate/\nruns/\nworktrees/\n"
        )
        ignore.write_text("# mine\n  .cache/  \nstate/\n", encoding="utf-8")
        assert store.init() is True
        assert ignore.read_text(encoding="utf-8") == (
            "# mine\n  .cache/  \nstate/\n.locks/\nruns/\nworktrees/\n"
        )
        assert store.init() is False

    def test_a_project_made_by_another_tool_gets_its_gitignore_on_the_first_listing(
        self, tmp_path: Path
    ) -> None:
        store = _hand_made(tmp_path)
        assert [s.id for s in store.list()] == ["S-0001"]
        assert store.cache_dir.is_dir()  # the listing cache is written by default
        assert (store.ai_dir / ".gitignore").read_text(encoding="utf-8") == FRESH_GITIGNORE

    def test_the_gitignore_is_checked_once_per_store(self, tmp_path: Path) -> None:
        store = _hand_made(tmp_path)
        store.list()
        ignore = store.ai_dir / ".gitignore"
        ignore.unlink()
        with store.graph_locked():  # making a lock checks the ignore file too
            pass
        assert not ignore.exists()
        with StoryStore(store.root).graph_locked():
            pass
        assert ignore.read_text(encoding="utf-8") == FRESH_GITIGNORE

    def test_no_gitignore_is_made_before_the_project_exists(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path / "proj")
        (tmp_path / "proj").mkdir()
        store.ensure_ignored()
        assert not store.ai_dir.exists()

    def test_an_unreadable_gitignore_does_not_stop_listing_or_editing(self, tmp_path: Path) -> None:
        store = _hand_made(tmp_path)
        (store.ai_dir / ".gitignore").mkdir()
        assert [s.id for s in store.list()] == ["S-0001"]
        with store.edit("S-0001") as story:
            story.frontmatter["status"] = "done"
        assert store.get("S-0001").frontmatter["status"] == "done"

    def test_outside_a_project_every_command_says_how_to_make_one(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path)
        expected = (
            f"no ai-sdlc project in {tmp_path} (no .ai-sdlc/stories folder)\n"
            "  hint: run `ai-sdlc init` there, or pass --project"
        )
        for call in (store.list, lambda: store.add("A title"), lambda: store.folder("S-0001")):
            with pytest.raises(UsageError) as caught:
                call()
            assert str(caught.value) == expected
        store.init()
        assert store.list() == []

    def test_by_default_a_lock_is_awaited_for_a_minute_and_listings_are_cached(
        self, tmp_path: Path
    ) -> None:
        store = StoryStore(tmp_path)
        assert store.lock_timeout == 60.0
        assert store.write_cache is True
        assert store.root == tmp_path


class TestTheStoreFindsAStory:
    def test_a_reference_names_the_canonical_folder(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        _story(store, "S-0003")
        assert store.folder("s-3") == store.stories_dir / "S-0003"
        assert store.story_path("S-3") == store.stories_dir / "S-0003" / "story.md"
        assert store.resolve("s-0003") == "S-0003"

    def test_a_missing_story_is_not_found_with_a_hint(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        (store.ai_dir / "archive" / "S-0009").mkdir(parents=True)  # a folder without its file
        with pytest.raises(StoryNotFoundError) as caught:
            store.folder("S-9")
        assert str(caught.value) == (
            f"no story S-0009 in {store.stories_dir}\n  hint: `ai-sdlc status` lists the stories"
        )

    def test_an_archived_story_says_where_it_went(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        archived = store.ai_dir / "archive" / "S-0004"
        archived.mkdir(parents=True)
        (archived / "story.md").write_text(minimal("S-0004"), encoding="utf-8")
        with pytest.raises(StoryNotFoundError) as caught:
            store.story_path("S-0004")
        assert str(caught.value) == (
            f"no story S-0004 in {store.stories_dir}: it was archived to {archived}\n"
            f"  hint: `ai-sdlc show S-0004` shows it; move its folder back into "
            f"{store.stories_dir} to work on it again"
        )

    def test_a_story_file_that_is_a_symlink_is_refused_not_followed(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        elsewhere = tmp_path / "elsewhere.md"
        elsewhere.write_text(minimal("S-0001"), encoding="utf-8")
        (store.stories_dir / "S-0001").mkdir()
        os.symlink(elsewhere, store.stories_dir / "S-0001" / "story.md")
        with pytest.raises(InvalidInputError, match="refused: it is a symbolic link"):
            store.folder("S-0001")

    def test_a_symlinked_project_tree_is_refused(self, tmp_path: Path) -> None:
        real = tmp_path / "real"
        (real / "stories").mkdir(parents=True)
        store = StoryStore(tmp_path / "proj")
        store.root.mkdir()
        os.symlink(real, store.ai_dir)
        hint = "\n  hint: replace the link with the folder it points to (or remove it)"
        why = ": refused: it is a symbolic link; .ai-sdlc/ must be a real folder tree"
        for call in (store.list, store.init, lambda: store.folder("S-0001")):
            with pytest.raises(InvalidInputError) as caught:
                call()
            assert str(caught.value) == f"{store.ai_dir}{why}{hint}"
            assert caught.value.path == str(store.ai_dir)
        store.ai_dir.unlink()
        store.ai_dir.mkdir()
        os.symlink(real / "stories", store.stories_dir)
        with pytest.raises(InvalidInputError) as caught:
            store.list()
        assert str(caught.value) == f"{store.stories_dir}{why}{hint}"

    def test_a_slug_names_its_one_story(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001", slug="alpha")
        _story(store, "S-0002", slug="beta")
        _story(store, "S-0003", slug="gamma")
        assert store.resolve("beta") == "S-0002"
        assert store.resolve("alpha") == "S-0001"

    def test_a_slug_two_stories_share_is_refused_naming_them(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001", slug="twin")
        _story(store, "S-0002", slug="other")
        _story(store, "S-0003", slug="twin")
        with pytest.raises(UsageError) as caught:
            store.resolve("twin")
        assert str(caught.value) == (
            "slug 'twin' matches several stories: S-0001, S-0003\n  hint: use the story id instead"
        )

    def test_an_unknown_slug_is_not_found(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001", slug="alpha")
        with pytest.raises(StoryNotFoundError) as caught:
            store.resolve("nope")
        assert str(caught.value) == (
            f"no story with id or slug 'nope' in {store.stories_dir}\n"
            "  hint: `ai-sdlc status` lists the stories"
        )


class TestTheStoreKeepsArtifacts:
    def test_an_artifact_is_written_redacted_and_read_back_exactly(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001")
        text = "# Plan\r\nuse token ghp_abcdefghijklmnopqrstuvwx here\r\nnaïve ✓\n"
        path = store.write_artifact("s-1", "plan.md", text)
        assert path == store.stories_dir / "S-0001" / "plan.md"
        expected = "# Plan\r\nuse token *** here\r\nnaïve ✓\n"
        assert path.read_bytes() == expected.encode("utf-8")
        assert store.read_artifact("S-0001", "plan.md") == expected
        assert store.artifact_path("S-1", "plan.md") == path
        assert store.read_artifact("S-0001", "review.md") is None

    def test_story_md_is_not_an_artifact(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        before = _story(store, "S-0001").read_bytes()
        with pytest.raises(UsageError) as caught:
            store.write_artifact("S-0001", "story.md", "---\n---\n")
        assert str(caught.value) == (
            "story.md is written through StoryStore.edit, not as an artifact"
        )
        assert (store.stories_dir / "S-0001" / "story.md").read_bytes() == before
        with pytest.raises(UsageError, match="is not an artifact name"):
            store.write_artifact("S-0001", "../plan.md", "x")

    def test_an_artifact_write_syncs_the_folder_unless_the_caller_will(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001")
        synced = _folder_fsyncs(monkeypatch, store.stories_dir / "S-0001")
        store.write_artifact("S-0001", "plan.md", "one\n")
        assert len(synced) == 1
        store.write_artifact("S-0001", "plan.md", "two\n", sync_folder=False)
        assert len(synced) == 1
        assert store.read_artifact("S-0001", "plan.md") == "two\n"


class TestTheStoreReadsAStory:
    def test_get_gives_the_id_path_values_and_exact_body(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = write_story(store, "S-0002", minimal("S-0002") + "more\r\n")
        story = store.get("s-2")
        assert story.id == "S-0002"
        assert story.path == path
        assert story.frontmatter["title"] == "A small story"
        assert story.frontmatter["id"] == "S-0002"
        assert story.body == "# Body\nmore\r\n"

    def test_an_invalid_story_is_an_error_naming_its_file(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = write_story(store, "S-0001", "---\ntitle: [unclosed\n---\n")
        with pytest.raises(InvalidInputError) as caught:
            store.get("S-0001")
        assert caught.value.path == str(path)
        assert str(caught.value).startswith(f"{path}:")


class TestTheStoreLists:
    def test_stories_are_listed_in_id_order_and_other_entries_ignored(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        for story_id in ["S-10000", "S-0010", "S-9999", "S-0002"]:
            _story(store, story_id)
        for n in range(12):  # entries that are not story folders, among the stories
            (store.stories_dir / f"notes-{n}").mkdir()
            (store.stories_dir / f"README-{n}.md").write_text("", encoding="utf-8")
        (store.stories_dir / "S-12").mkdir()  # not canonical: no story folder
        (store.stories_dir / "S-0003").write_text("a file", encoding="utf-8")
        stories = store.list()
        assert [s.id for s in stories] == ["S-0002", "S-0010", "S-9999", "S-10000"]
        assert stories[0].path == store.stories_dir / "S-0002" / "story.md"
        assert stories[0].frontmatter["title"] == "A small story"
        assert store.scan().errors == []

    def test_a_folder_without_its_story_file_is_skipped(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        (store.stories_dir / "S-0001").mkdir()  # an `add` in progress
        _story(store, "S-0002")
        scan = store.scan()
        assert [s.id for s in scan.stories] == ["S-0002"]
        assert scan.errors == []

    def test_a_symlinked_story_folder_is_an_error_and_the_rest_are_listed(
        self, tmp_path: Path
    ) -> None:
        store = _project(tmp_path)
        _story(store, "S-0003")
        os.symlink(store.stories_dir / "S-0003", store.stories_dir / "S-0001")
        scan = store.scan()
        assert [s.id for s in scan.stories] == ["S-0003"]
        link = store.stories_dir / "S-0001"
        assert [str(e) for e in scan.errors] == [
            f"{link}: refused: the story folder is a symbolic link (to "
            f"{store.stories_dir / 'S-0003'}); .ai-sdlc/ must be a real folder tree\n"
            "  hint: replace the link with a real folder (or remove it)"
        ]

    def test_a_story_file_that_is_not_a_regular_file_is_an_error_and_the_rest_are_listed(
        self, tmp_path: Path
    ) -> None:
        store = _project(tmp_path)
        (store.stories_dir / "S-0001" / "story.md").mkdir(parents=True)
        _story(store, "S-0002")
        scan = store.scan()
        assert [s.id for s in scan.stories] == ["S-0002"]
        (error,) = scan.errors
        assert isinstance(error, InvalidInputError)
        assert error.path == str(store.stories_dir / "S-0001" / "story.md")
        assert "not a regular file" in str(error)

    def test_an_invalid_story_is_an_error_beside_the_valid_ones(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        write_story(store, "S-0001", "---\ntitle: [unclosed\n---\n")
        _story(store, "S-0002")
        for _ in range(2):  # the second listing reads the error from the cache
            scan = store.scan()
            assert [s.id for s in scan.stories] == ["S-0002"]
            (error,) = scan.errors
            assert error.path == str(store.stories_dir / "S-0001" / "story.md")

    def test_a_story_file_that_cannot_even_be_looked_at_is_an_error(self, tmp_path: Path) -> None:
        """A path past the system's limit (ENAMETOOLONG): the folder lists, its file cannot."""
        fd = os.open(tmp_path, os.O_RDONLY)
        root = str(tmp_path)
        target = 4095 - len("/.ai-sdlc/stories/S-0001")
        try:
            while len(root) < target:
                name = "d" * min(200, target - len(root) - 1)
                os.mkdir(name, dir_fd=fd)
                inner = os.open(name, os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = inner
                root += "/" + name
            for name in (".ai-sdlc", "stories", "S-0001"):
                os.mkdir(name, dir_fd=fd)
                inner = os.open(name, os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)
        store = StoryStore(Path(root), write_cache=False)
        scan = store.scan()
        assert scan.stories == []
        (error,) = scan.errors
        assert error.path == os.path.join(root, ".ai-sdlc", "stories", "S-0001", "story.md")
        assert "cannot be read: File name too long" in str(error)

    def test_a_story_deleted_while_listing_is_skipped_and_the_rest_are_listed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = _project(tmp_path)
        doomed = str(_story(store, "S-0001"))
        _story(store, "S-0002")
        real_open = os.open

        def open_after_a_delete(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if path == doomed and os.path.exists(doomed):
                os.unlink(doomed)  # another process removes it just before it is opened
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", open_after_a_delete)
        scan = store.scan()
        assert [s.id for s in scan.stories] == ["S-0002"]
        assert scan.errors == []

    def test_a_listing_trusts_the_cache_while_the_file_stamp_is_unchanged(
        self, tmp_path: Path
    ) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001", title="Before")
        assert store.list()[0].frontmatter["title"] == "Before"
        with open(path, "r+b") as handle:  # same inode, same size, same mtime: same stamp
            handle.write(minimal("S-0001", title="Beforx").encode("utf-8"))
        os.utime(path, ns=(OLD_NS, OLD_NS))
        assert StoryStore(store.root).list()[0].frontmatter["title"] == "Before"
        os.utime(path, ns=(OLD_NS + 10**9, OLD_NS + 10**9))
        assert StoryStore(store.root).list()[0].frontmatter["title"] == "Beforx"

    def test_a_moved_project_does_not_trust_the_cache_of_its_old_place(
        self, tmp_path: Path
    ) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001", title="Before")
        store.list()
        moved = tmp_path / "moved"
        store.root.rename(moved)  # same inodes, sizes and times: the same stamps
        path = moved / path.relative_to(store.root)
        with open(path, "r+b") as handle:
            handle.write(minimal("S-0001", title="Beforx").encode("utf-8"))
        os.utime(path, ns=(OLD_NS, OLD_NS))
        assert StoryStore(moved).list()[0].frontmatter["title"] == "Beforx"

    def test_a_dry_run_store_lists_without_writing_a_cache(self, tmp_path: Path) -> None:
        store = _hand_made(tmp_path)
        dry = StoryStore(store.root, write_cache=False)
        assert [s.id for s in dry.list()] == ["S-0001"]
        assert not store.cache_dir.exists()
        assert not (store.ai_dir / ".gitignore").exists()


class TestTheStoreEditsUnderALock:
    def test_a_new_field_is_appended_and_only_changed_lines_move(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001")
        with store.edit("S-0001") as story:
            story.frontmatter["status"] = "done"
            story.frontmatter["owner"] = "ana"
        assert path.read_text(encoding="utf-8") == (
            "---\nid: S-0001\ntitle: A small story\nstatus: done\nowner: ana\n---\n# Body\n"
        )

    def test_a_story_the_schema_refuses_is_not_written(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001")
        before = path.read_bytes()
        problem = schema.find_problem(
            {"id": "S-0001", "title": "A small story", "status": "bogus"}, "S-0001"
        )
        assert problem is not None
        with pytest.raises(InvalidInputError) as caught, store.edit("S-0001") as story:
            story.frontmatter["status"] = "bogus"
        assert str(caught.value) == (
            f"{path}: refusing to write: {problem.message}\n  hint: {problem.hint}"
        )
        assert caught.value.path == str(path)
        assert path.read_bytes() == before

    def test_a_value_of_a_type_a_story_cannot_hold_is_a_type_error(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001")
        before = path.read_bytes()
        with pytest.raises(TypeError) as caught, store.edit("S-0001") as story:
            story.frontmatter["owner"] = object()
        assert str(caught.value).startswith(f"{path}: `owner`: ")
        assert path.read_bytes() == before

    def test_a_changed_value_that_cannot_be_written_exactly_is_refused(
        self, tmp_path: Path
    ) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001")
        before = path.read_bytes()
        with pytest.raises(InvalidInputError) as caught, store.edit("S-0001") as story:
            story.frontmatter["note"] = "half \ud800 a pair"
        assert str(caught.value) == (
            f"{path}: refusing to write `note`: the text holds U+D800, half of a UTF-16 "
            "surrogate pair, which is not a character and cannot be stored in a UTF-8 file\n"
            "  hint: decode the text properly (e.g. errors='replace'), or remove that character"
        )
        assert caught.value.path == str(path)
        assert path.read_bytes() == before

    def test_an_unwritable_value_already_in_the_file_does_not_block_other_edits(
        self, tmp_path: Path
    ) -> None:
        store = _project(tmp_path)
        path = write_story(store, "S-0001", minimal("S-0001", note='"\\ud800"'))
        with store.edit("S-0001") as story:
            story.frontmatter["status"] = "done"
        assert path.read_text(encoding="utf-8") == (
            '---\nid: S-0001\ntitle: A small story\nstatus: done\nnote: "\\ud800"\n---\n# Body\n'
        )

    def test_an_edit_removes_temp_files_of_killed_writers(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001")
        stale = path.parent / ".story.md.x1y2.tmp"
        stale.write_text("half a story", encoding="utf-8")
        odd = path.parent / ".story.md.dir.tmp"
        odd.mkdir()  # cannot be unlinked: left alone, the edit goes on
        other = path.parent / ".plan.md.x1y2.tmp"
        other.write_text("", encoding="utf-8")
        with store.edit("S-0001") as story:
            story.frontmatter["status"] = "done"
        assert not stale.exists()
        assert odd.is_dir()
        assert other.exists()
        assert store.get("S-0001").frontmatter["status"] == "done"

    def test_a_story_being_edited_is_locked_for_every_other_writer(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001")
        _story(store, "S-0002")
        other = StoryStore(store.root, lock_timeout=0)
        busy = "story S-0001 is locked by another ai-sdlc process (waited 0 s)" + BUSY_HINT
        with store.edit("S-0001"):
            with pytest.raises(BusyError) as caught, other.edit("S-0001"):
                pass
            assert str(caught.value) == busy
            with pytest.raises(BusyError) as caught:
                other.replace_unreadable("S-0001", b"---\n---\n")
            assert str(caught.value) == busy
            with other.edit("S-0002") as story:  # another story is not held up
                story.frontmatter["status"] = "done"
        assert sorted(p.name for p in store.locks_dir.iterdir()) == ["S-0001.lock", "S-0002.lock"]
        with other.edit("S-0001") as story:
            story.frontmatter["status"] = "done"

    def test_the_graph_lock_and_the_id_lock_keep_other_writers_out(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        other = StoryStore(store.root, lock_timeout=0)
        with store.graph_locked():
            with pytest.raises(BusyError) as caught, other.graph_locked():
                pass
            assert str(caught.value) == (
                "the backlog graph is locked by another ai-sdlc process (waited 0 s)" + BUSY_HINT
            )
        with SidecarLock(store.locks_dir / "ids.lock", timeout=0):
            with pytest.raises(BusyError) as caught:
                other.add("Blocked")
            assert str(caught.value) == (
                "story id allocation is locked by another ai-sdlc process (waited 0 s)" + BUSY_HINT
            )
        assert other.add("Free").id == "S-0001"

    def test_a_lock_can_be_taken_before_the_project_exists(self, tmp_path: Path) -> None:
        store = StoryStore(tmp_path / "proj")
        store.root.mkdir()
        with store.graph_locked():
            assert (store.locks_dir / "graph.lock").exists()


class TestTheStoreRestoresAnUnreadableStory:
    def test_a_broken_story_file_is_replaced_by_the_saved_copy(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = write_story(store, "S-0001", "---\ntitle: [broken\n---\n")
        saved = minimal("S-0001").encode("utf-8")
        store.replace_unreadable("s-1", saved)
        assert path.read_bytes() == saved
        assert store.get("S-0001").frontmatter["status"] == "ready"

    def test_a_readable_story_file_is_not_replaced(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        path = _story(store, "S-0001")
        before = path.read_bytes()
        with pytest.raises(UsageError) as caught:
            store.replace_unreadable("S-0001", b"---\nid: S-0001\n---\n")
        assert str(caught.value) == f"{path} is readable: change it through StoryStore.edit"
        assert path.read_bytes() == before


ADDED = """---
id: S-0001
title: Export the board as CSV
slug: export-the-board-as-csv
priority: 10
status: backlog
type: feature
created: '2026-01-31'
updated: '2026-01-31'
labels:
  - ui
  - api
ticket_url: https://x.example/1
ticket_meta:
  a: 1
  b:
    - 1
    - 2
research_complete: false
plan_complete: false
implementation_complete: false
reviews_complete: false
---
# Export the board as CSV
"""


class TestTheStoreAddsAStory:
    def test_a_new_story_file_is_written_field_by_field(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        story = store.add(
            "  Export the board as CSV ",
            labels=["ui", " api ", "ui"],
            extra={"ticket_url": "https://x.example/1", "ticket_meta": {"a": 1, "b": [1, 2]}},
        )
        assert story.path.read_text(encoding="utf-8") == ADDED
        assert story.id == "S-0001"
        assert story.frontmatter["labels"] == ["ui", "api"]
        assert story.body == "# Export the board as CSV\n"

    def test_the_callers_body_priority_status_and_type_are_kept(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        story = store.add("Second", priority=5, body="Custom\n", status="ready", type="bug")
        text = story.path.read_text(encoding="utf-8")
        assert text.startswith("---\nid: S-0001\ntitle: Second\nslug: second\npriority: 5\n")
        assert "\nstatus: ready\ntype: bug\n" in text
        assert "\nlabels: []\n" in text
        assert text.endswith("\nreviews_complete: false\n---\nCustom\n")

    def test_ids_follow_the_highest_id_ever_given(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        assert store.add("One").id == "S-0001"
        _story(store, "S-0003")
        assert store.add("After a gap").id == "S-0004"  # S-0002 is not reused
        (store.stories_dir / "S-12").mkdir()  # a folder another tool named
        assert store.add("Past a stray").id == "S-0013"
        (store.ai_dir / "archive" / "S-0020").mkdir(parents=True)
        assert store.add("Past the archive").id == "S-0021"
        (store.stories_dir / "S-9999").mkdir()
        assert store.add("Five digits").id == "S-10000"

    def test_a_folder_made_by_another_tool_meanwhile_is_skipped(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = _project(tmp_path)
        _story(store, "S-0001")
        real_scandir = os.scandir
        stories = str(store.stories_dir)

        class Listed(list):  # type: ignore[type-arg]
            def __enter__(self) -> Listed:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

        def scandir(path: Any = ".") -> Any:
            if os.fspath(path) != stories or (store.stories_dir / "S-0002").exists():
                return real_scandir(path)
            with real_scandir(path) as entries:
                seen = Listed(entries)
            (store.stories_dir / "S-0002").mkdir()  # after the id scan, before the mkdir
            return seen

        monkeypatch.setattr(os, "scandir", scandir)
        # an explicit priority: the id scan is the first look at the folder
        assert store.add("Raced", priority=1).id == "S-0003"
        assert not (store.stories_dir / "S-0002" / "story.md").exists()

    def test_the_default_priority_goes_after_the_last_one(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        assert store.add("First").frontmatter["priority"] == 10
        store.add("Explicit", priority=35)
        _story(store, "S-0007")  # no priority at all
        assert store.add("Next").frontmatter["priority"] == 45

    def test_a_title_is_one_printable_line(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        for title in ["", "   ", None]:
            with pytest.raises(UsageError) as caught:
                store.add(title)  # type: ignore[arg-type]
            assert str(caught.value) == (
                'a story needs a title\n  hint: ai-sdlc add "Export the board as CSV"'
            )
        for title in ["two\nlines", "a\tb"]:
            with pytest.raises(UsageError) as caught:
                store.add(title)
            assert str(caught.value) == "the title must be one line of printable text"
        assert list(store.stories_dir.iterdir()) == []

    def test_an_unknown_status_is_refused(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        with pytest.raises(UsageError) as caught:
            store.add("A title", status="nope")
        assert str(caught.value) == (
            "unknown status 'nope'\n"
            "  hint: use one of: backlog, ready, in-progress, in-review, done, blocked"
        )

    @pytest.mark.parametrize(
        "field",
        [
            *("id", "title", "slug", "priority", "status", "type"),
            *("created", "updated", "labels", *schema.FLAG_FIELDS),
        ],
    )
    def test_an_extra_field_may_not_set_what_the_tool_sets(
        self, tmp_path: Path, field: str
    ) -> None:
        store = _project(tmp_path)
        with pytest.raises(UsageError) as caught:
            store.add("A title", extra={field: "x", "ticket": "T-1"})
        assert str(caught.value) == f"cannot add: field {field!r} is set by ai-sdlc itself"
        assert list(store.stories_dir.iterdir()) == []

    def test_of_several_clashing_fields_the_first_by_name_is_named(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        with pytest.raises(UsageError) as caught:
            store.add("A title", extra={"type": 1, "slug": 2, "labels": 3, "created": 4})
        assert str(caught.value) == "cannot add: field 'slug' is set by ai-sdlc itself"

    def test_an_extra_value_that_cannot_be_written_is_refused(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        with pytest.raises(UsageError) as caught:
            store.add("A title", extra={"note": "half \ud800"})
        assert str(caught.value) == (
            "cannot store the extra fields: the text holds U+D800, half of a UTF-16 surrogate "
            "pair, which is not a character and cannot be stored in a UTF-8 file\n"
            "  hint: decode the text properly (e.g. errors='replace'), or remove that character"
        )

    def test_an_extra_value_the_schema_refuses_leaves_nothing_behind(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        with pytest.raises(UsageError) as caught:
            store.add("A title", extra={"total_recovery_attempts": -1})
        assert str(caught.value) == (
            "cannot add: `total_recovery_attempts` must be a whole number >= 0 and at most "
            "1,000,000,000, not -1\n"
            "  hint: write e.g. `total_recovery_attempts: 0` (a missing counter counts as 0)"
        )
        assert list(store.stories_dir.iterdir()) == []
        assert store.add("A title", extra={"total_recovery_attempts": 2}).id == "S-0001"

    def test_a_type_that_is_not_one_lowercase_word_is_refused(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        problem = schema.type_problem("Bad Type")
        assert problem is not None
        with pytest.raises(UsageError) as caught:
            store.add("A title", type="Bad Type")
        assert str(caught.value) == f"{problem.message}\n  hint: {problem.hint}"
        assert list(store.stories_dir.iterdir()) == []

    def test_labels_are_short_one_line_words(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        for label in ["", "  ", 5, "a\tb"]:
            with pytest.raises(UsageError) as caught:
                store.add("A title", labels=["ok", label])  # type: ignore[list-item]
            assert str(caught.value) == (
                f"invalid label {label!r}\n  hint: labels are short one-line words"
            )
        assert store.add("A title", labels=[" x ", "y", "x"]).frontmatter["labels"] == ["x", "y"]

    @pytest.mark.parametrize("priority", [True, "5", -1, 1.5, schema.MAX_COUNTER + 1])
    def test_a_priority_out_of_range_is_refused(self, tmp_path: Path, priority: Any) -> None:
        store = _project(tmp_path)
        with pytest.raises(UsageError) as caught:
            store.add("A title", priority=priority)
        assert str(caught.value) == "priority must be a whole number from 0 to 1,000,000,000"

    def test_the_priority_range_ends_are_accepted(self, tmp_path: Path) -> None:
        store = _project(tmp_path)
        assert store.add("Low", priority=0).frontmatter["priority"] == 0
        top = store.add("High", priority=schema.MAX_COUNTER)
        assert top.frontmatter["priority"] == schema.MAX_COUNTER
