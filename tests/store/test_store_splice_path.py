"""Splicing one value at a nested key path (`store.splice.set_path`, the writer behind
`ai-sdlc config KEY VALUE`): the result loads to the intended mapping and every line outside
the edited key is kept byte for byte, comments included.

Deterministic in `make test` (tests/support/hypothesis_profiles.py); `make fuzz` searches longer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from ai_sdlc.store import render, splice
from ai_sdlc.store.values import strict_equal, to_plain
from tests.conftest import run_cli
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.slow


def read(text: str) -> Any:
    return to_plain(YAML(typ="rt").load(text))


names = st.from_regex(r"[a-z][a-z_]{0,5}", fullmatch=True)
words = st.one_of(
    st.sampled_from(["yes", "No", "0777", "010", "1:20", "null", "~", "a #b", "- x", "", " x"]),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    words,
)
leaves = st.one_of(scalars, st.lists(scalars, max_size=3))
trees = st.dictionaries(
    names,
    st.recursive(leaves, lambda inner: st.dictionaries(names, inner, max_size=3), max_leaves=8),
    min_size=1,
    max_size=4,
)
new_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(names, scalars, max_size=2),
)


class Doc:
    """A commented block-style YAML text of a tree, and the lines each key's entry spans."""

    def __init__(self, tree: dict[str, Any], data: st.DataObject) -> None:
        self.lines: list[str] = []
        self.spans: dict[tuple[str, ...], range] = {}
        self.data = data
        self._mapping(tree, 0, ())

    def _maybe(self, what: str) -> bool:
        return self.data.draw(st.booleans(), label=what)

    def _mapping(self, node: dict[str, Any], indent: int, path: tuple[str, ...]) -> None:
        pad = " " * indent
        for key, value in node.items():
            if self._maybe("comment line before"):
                column = self.data.draw(st.sampled_from([0, indent]), label="comment column")
                self.lines.append(" " * column + "# about " + key + "\n")
            start = len(self.lines)
            note = "   # note" if self._maybe("trailing comment") else ""
            if isinstance(value, dict) and value:
                self.lines.append(f"{pad}{key}:{note}\n")
                self._mapping(value, indent + 2, (*path, key))
            elif isinstance(value, list) and value and self._maybe("block list"):
                self.lines.append(f"{pad}{key}:{note}\n")
                self.lines += [f"{pad}  - {render.scalar(v)}\n" for v in value]
            else:
                text = render.flow(value) if isinstance(value, list) and value else None
                self.lines.append(f"{pad}{key}: {text or render.inline(value)}{note}\n")
            self.spans[(*path, key)] = range(start, len(self.lines))
            if self._maybe("blank line after"):
                self.lines.append("\n")

    @property
    def text(self) -> str:
        return "".join(self.lines)


def with_path(data: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    out = dict(data)
    if len(path) == 1:
        out[path[0]] = value
    else:
        child = out.get(path[0])
        out[path[0]] = with_path(child if isinstance(child, dict) else {}, path[1:], value)
    return out


def replaced_span(doc: Doc, tree: dict[str, Any], path: list[str]) -> range:
    """The original lines the edit may replace: those of the deepest key of `path` that exists
    and does not hold a block mapping the rest of the path goes into (none for a new key)."""
    node: Any = tree
    for depth, part in enumerate(path):
        if part not in node:
            return range(0)
        last = depth == len(path) - 1
        if last or not (isinstance(node[part], dict) and node[part]):
            return doc.spans[tuple(path[: depth + 1])]
        node = node[part]
    return range(0)


def kept_outside(old: list[str], new: str, span: range) -> bool:
    """True when `new` is `old` with only the lines of `span` replaced, or (an empty span)
    with lines added only: every old line still there, in order, byte for byte."""
    if span:
        head, tail = "".join(old[: span.start]), "".join(old[span.stop :])
        return new.startswith(head) and new.endswith(tail) and len(new) >= len(head + tail)
    remaining = iter(new.splitlines(keepends=True))
    return all(any(line == got for got in remaining) for line in old)


def paths_of(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[list[str]]:
    out: list[list[str]] = []
    for key, value in tree.items():
        out.append([*prefix, key])
        if isinstance(value, dict):
            out += paths_of(value, (*prefix, key))
    return out


@settings(max_examples=examples(100, fuzz_base=300))
@given(tree=trees, data=st.data())
def test_a_nested_value_is_spliced_and_every_other_line_is_kept(
    tree: dict[str, Any], data: st.DataObject
) -> None:
    doc = Doc(tree, data)
    assert strict_equal(read(doc.text), tree)
    base = data.draw(st.sampled_from(paths_of(tree)), label="existing path")
    extra = data.draw(st.lists(st.from_regex(r"n[a-z]{0,3}", fullmatch=True), max_size=2))
    path = base[: data.draw(st.integers(0, len(base)), label="prefix")] + extra or base
    value = data.draw(new_values, label="value")

    result = splice.set_path(doc.text, path, value, read=read)

    assert strict_equal(read(result), with_path(tree, path, value))
    assert kept_outside(doc.lines, result, replaced_span(doc, tree, path)), (doc.text, result)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_new_sections_are_added_under_their_parent_with_its_indentation(newline: str) -> None:
    text = "# top\nrun:   # runs\n  jobs: 2  # two\n\n  # about ray\ngit:\n  remote: o\n"
    text = text.replace("\n", newline)
    result = splice.set_path(text, ["run", "ray", "address"], "head:1", read=read)
    assert result == text.replace(
        "  jobs: 2  # two" + newline,
        f"  jobs: 2  # two{newline}  ray:{newline}    address: head:1{newline}",
    )


def test_a_comment_after_a_value_keeps_its_column() -> None:
    text = "limits:\n  global_recovery: 10     # the limit\n  phase_timeout: 900\n"
    result = splice.set_path(text, ["limits", "global_recovery"], 8, read=read)
    assert result == "limits:\n  global_recovery: 8      # the limit\n  phase_timeout: 900\n"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: &x {b: 1}\nc: *x\n", id="anchored-section"),
        pytest.param("a: !!map {b: 1}\n", id="tagged-section"),
        pytest.param("{a: {b: 1}}\n", id="flow-root"),
        pytest.param("a:\n  b: &x 1\nc: *x\n", id="anchored-value"),
    ],
)
def test_layouts_that_cannot_be_spliced_are_re_rendered_and_checked(text: str) -> None:
    before = read(text)
    result = splice.set_path(text, ["a", "b"], 5, read=read)
    assert strict_equal(read(result), with_path(before, ["a", "b"], 5))


def test_config_edits_go_through_the_splicer_end_to_end(project: Path) -> None:
    """`ai-sdlc config KEY VALUE` on a hand-commented file: one line changes (`010` is 10),
    a new key lands under its section, every comment stays."""
    config = project / ".ai-sdlc" / "config.yaml"
    original = (
        "# my settings\n"
        "limits:   # guardrails\n"
        "  global_recovery: 12   # agreed with the team\n"
        "\n"
        "run:\n"
        "  stop_conditions:\n"
        "    max_retry_rate: 0.4   # we retry a lot\n"
        "  # nothing else\n"
    )
    config.write_text(original)
    result = run_cli(project, "config", "limits.global_recovery", "010")
    assert result.returncode == 0, result.output
    after = config.read_text()
    assert after == original.replace("global_recovery: 12  ", "global_recovery: 10  ")
    result = run_cli(project, "config", "run.stop_conditions.min_attempted", "6")
    assert result.returncode == 0, result.output
    assert config.read_text() == after.replace(
        "    max_retry_rate: 0.4   # we retry a lot\n",
        "    max_retry_rate: 0.4   # we retry a lot\n    min_attempted: 6\n",
    )
