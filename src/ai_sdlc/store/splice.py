"""Rewrite only the frontmatter lines whose values changed.

A full YAML re-dump re-wraps long strings, turns `\\U0001F6D1` escapes into emoji, rewrites
timestamps and moves comments; on real TypeScript-tool files it kept only 73 of 85
byte-identical. Splicing keeps every untouched line as it was: the new `key: value` text replaces
exactly the lines of the keys that changed (found from the parser's node marks), deleted keys
lose their lines, new keys are appended after their predecessor. A key whose place in the
mapping changed (deleted and set again, `move_to_end`) is written where it now is and removed
where it was; every other key stays in place (the longest run of keys still in order). Comment
lines after a value stay, and so does a comment at the end of a one-line value.

Every result is checked before it is written. For a file in the fast loader's subset (no
anchors, tags, tabs, raw Unicode line separators or keep-chomping block scalars) the untouched
lines cannot read differently once neighbouring entries change, so only the written lines are
parsed back (one small C parse); any other file is re-read whole with
ruamel. Odd layouts (flow-style root, complex keys, aliases broken by the edit) fall back to a
full re-render, checked the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from ai_sdlc.store import render
from ai_sdlc.store.storyfile import split_lines
from ai_sdlc.store.values import strict_equal, to_plain

_EOL = "\r\n\x85\u2028\u2029"
#: A keep-chomping block scalar header (`|+`, `>2+`): its value owns the blank lines after it,
#: so removing a neighbour can change it; such files get a whole-text check.
_KEEP_CHOMP = re.compile(r"[|>][1-9]?\+")


class SpliceError(RuntimeError):
    """Neither splicing nor a full re-render produced text that loads back to the new values."""


class KeyPlace(msgspec.Struct, frozen=True):
    """Where one top-level key and its value are, in lines and columns of the frontmatter."""

    key: Any
    line: int  # the key's line
    content_end: int  # end (exclusive) of the value's lines
    segment_end: int  # end (exclusive) including trailing comment/blank lines
    key_end: int  # column just after the key
    value_start: tuple[int, int]
    value_end: tuple[int, int]
    flow: bool  # the value is a flow collection (`[a, b]`, `{a: 1}`)
    keep: bool  # the value is a keep-chomping block scalar (`|+`): it owns blank lines after it


class Layout(msgspec.Struct, frozen=True):
    """Line map of a block-mapping frontmatter: its lines and one entry per key."""

    lines: list[str]
    entries: list[KeyPlace]
    column: int  # indentation of the keys


def layout(frontmatter: str, root: Any, keys: list[Any]) -> Layout | None:
    """Line map from a parsed node tree (libyaml's or ruamel's: both carry the same marks);
    None for layouts splicing does not handle (flow root, complex or multi-line keys)."""
    if root is None or getattr(root, "id", None) != "mapping" or root.flow_style:
        return None
    if [k.value for k, _ in root.value] != keys:
        return None  # merge keys, or keys that are not text
    return _node_layout(split_lines(frontmatter), root)


def _node_layout(lines: list[str], root: Any) -> Layout | None:
    """Line map of one block mapping node whose entries all lie within `lines`."""
    if root is None or getattr(root, "id", None) != "mapping" or root.flow_style:
        return None
    pairs: list[tuple[Any, Any]] = list(root.value)
    if any(k.id != "scalar" or k.end_mark.line != k.start_mark.line for k, _ in pairs):
        return None
    columns = {k.start_mark.column for k, _ in pairs}
    if len(columns) > 1:
        return None
    column = columns.pop() if columns else 0
    keys = [k.value for k, _ in pairs]
    marks: list[Marks] = []
    for key, (key_node, value_node) in zip(keys, pairs, strict=True):
        start, end = value_node.start_mark, value_node.end_mark
        marks.append(
            (
                key,
                key_node.start_mark.line,
                key_node.end_mark.column,
                (start.line, start.column),
                (end.line, end.column),
                value_node.id != "scalar" and bool(value_node.flow_style),
                _keeps_blank_lines(value_node, lines),
            )
        )
    return from_marks(lines, marks, column)


#: What a parser tells of one top-level key: (key, its line, the column after it, value start
#: and end (line, column), value is a flow collection, value is a keep-chomping block scalar).
Marks = tuple[Any, int, int, tuple[int, int], tuple[int, int], bool, bool]


def from_marks(lines: list[str], marks: list[Marks], column: int) -> Layout:
    """Line map from the marks of each top-level key (from a node tree)."""
    starts = [mark[1] for mark in marks]
    entries = []
    for index, (key, line, key_end, value_start, value_end, flow, keep) in enumerate(marks):
        segment_end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        content_end = segment_end
        while content_end > line + 1 and _is_trailer(lines[content_end - 1], column):
            content_end -= 1
        entries.append(
            KeyPlace(
                key, line, content_end, segment_end, key_end, value_start, value_end, flow, keep
            )
        )
    return Layout(lines, entries, column)


def _keeps_blank_lines(node: Any, lines: list[str]) -> bool:
    if node.id != "scalar" or node.style not in ("|", ">"):
        return False
    start = node.start_mark
    header = lines[start.line][start.column :].split("#", 1)[0].split()
    return bool(header) and "+" in header[0]


def _is_trailer(line: str, column: int) -> bool:
    """A blank line, or a comment line not indented into the value above it."""
    stripped = line.strip(" \t" + _EOL)
    if not stripped:
        return True
    indent = len(line) - len(line.lstrip(" \t"))
    return stripped.startswith("#") and indent <= column


#: Plain values of a YAML text; raises on text that does not load.
Reader = Callable[[str], Any]


def rewrite(
    frontmatter: str,
    newline: str,
    before: dict[Any, Any],
    after: dict[Any, Any],
    shape: Layout | None,
    *,
    read: Reader,
    lines_only: bool,
    live: Mapping[Any, Any] | None = None,
    path: str = "",
) -> str:
    """New frontmatter text holding `after` (plain values); `frontmatter` if nothing changed.

    `read` loads YAML text to plain values (the reference reader for this file). With
    `lines_only` only the written lines are read back; otherwise the whole result. `live` is
    the caller's ruamel mapping, whose own dump (keeping comments) is tried before a plain
    re-render when splicing is impossible.
    """
    if strict_equal(before, after):
        return frontmatter
    if shape is not None:
        spliced = _splice(shape, newline, before, after)
        if spliced is not None:
            text, written, expected = spliced
            if lines_only and not _KEEP_CHOMP.search(frontmatter):
                if _holds("".join(written), expected, read):
                    return text
            elif _holds(text, after, read):
                return text
    for candidate in _full_texts(after, live, newline):
        if _holds(candidate, after, read):
            return candidate
    raise SpliceError(f"{path}: could not write the new frontmatter values faithfully")


def _holds(text: str, expected: dict[Any, Any], read: Reader) -> bool:
    if not text:
        return not expected
    try:
        return strict_equal(to_plain(read(text)), expected)
    except Exception:
        return False


def _full_texts(
    after: dict[Any, Any], live: Mapping[Any, Any] | None, newline: str
) -> Iterator[str]:
    """Whole-frontmatter candidates: ruamel's dump of the live mapping (keeps comments), our
    renderer (exact for every plain value), then ruamel's dump of the plain values."""
    from ai_sdlc.store import roundtrip

    makers: list[Callable[[], str]] = [
        lambda: "".join(line + "\n" for line in render.block(after, 0)) if after else "{}\n",
        lambda: roundtrip.dump(after),
    ]
    if live is not None:
        makers.insert(0, lambda: roundtrip.dump(live))
    for make in makers:
        try:
            text = make()
        except Exception:
            continue  # a value that writer cannot express; the next one may
        yield text.replace("\n", newline) if newline != "\n" else text


def in_place(before: list[Any], after: list[Any]) -> set[Any]:
    """Keys of both lists that keep their place; the others are written where they now are.

    Code reorders a mapping by appending (`del m[k]; m[k] = v`, `move_to_end`), so the keys
    that keep their place are the longest prefix of `after` still in the old order: exactly
    the keys the code did not move. When that prefix is short (a key moved to the front), the
    longest run in the old order anywhere is used instead. Either way no more keys move than
    the code moved.
    """
    position = {k: i for i, k in enumerate(before)}
    kept = [k for k in after if k in position]
    order = [position[k] for k in kept]
    prefix = 1
    while prefix < len(order) and order[prefix] > order[prefix - 1]:
        prefix += 1
    if 2 * prefix >= len(order):
        return set(kept[:prefix])
    count = len(order)
    longest = [1] * count  # longest increasing run starting at each index
    for i in range(count - 2, -1, -1):
        longest[i] = 1 + max(
            (longest[j] for j in range(i + 1, count) if order[j] > order[i]), default=0
        )
    need, last, chosen = max(longest), -1, set()
    for i in range(count):
        if need and longest[i] == need and order[i] > last:
            chosen.add(kept[i])
            last, need = order[i], need - 1
    return chosen


def _splice(
    shape: Layout, newline: str, before: dict[Any, Any], after: dict[Any, Any]
) -> tuple[str, list[str], dict[Any, Any]] | None:
    """(new text, the lines written, the values those lines must read as), or None."""
    lines, column = shape.lines, shape.column
    staying = in_place(list(before), list(after))
    following: dict[Any, list[Any]] = {}
    previous: Any = _START
    for k in after:
        if k in staying:
            previous = k
        else:
            following.setdefault(previous, []).append(k)
    out: list[str] = []
    written: list[str] = []
    expected: dict[Any, Any] = {}

    def add(keys: list[Any]) -> None:
        for k in keys:
            chunk = _new_key(k, after[k], column, newline)
            out.extend(chunk)
            written.extend(chunk)
            expected[k] = after[k]

    # True while the last value written is a keep-chomping block scalar followed by nothing but
    # blank lines: a blank line added there would become part of that value.
    absorbing = False
    try:
        first = shape.entries[0].line if shape.entries else len(lines)
        out += lines[:first]
        add(following.get(_START, []))
        for entry in shape.entries:
            trailer = lines[entry.content_end : entry.segment_end]
            if entry.key not in staying:
                # The key's lines go; its trailing comments stay. Its blank lines stay too,
                # unless a kept `|+` value above would take them in.
                for line in trailer:
                    if line.strip(" \t" + _EOL):
                        absorbing = False
                    if not absorbing:
                        out.append(line)
            elif strict_equal(before[entry.key], after[entry.key]):
                out += lines[entry.line : entry.segment_end]
                absorbing = entry.keep and not any(line.strip(" \t" + _EOL) for line in trailer)
            else:
                chunk = _replacement(entry, lines, after[entry.key], column, newline)
                out += chunk + trailer
                written += chunk
                expected[entry.key] = after[entry.key]
                absorbing = False
            if following.get(entry.key):
                absorbing = False
            add(following.get(entry.key, []))
    except render.UnrenderableError:
        return None
    return "".join(out), written, expected


_START = object()  # `following` slot of keys that go before the first entry


def _replacement(
    entry: KeyPlace,
    lines: list[str],
    value: Any,
    key_col: int,
    newline: str,
    flow: bool = False,
    keep_column: bool = False,
) -> list[str]:
    """The new lines of `entry` holding `value` (`flow`: a list or mapping in flow form where
    it can be; `keep_column`: a comment after a one-line value stays in its column)."""
    raw = lines[entry.line].rstrip(_EOL)
    (start_line, start_col), (end_line, end_col) = entry.value_start, entry.value_end
    one_line = start_line == entry.line and end_line == entry.line
    if one_line and entry.content_end == entry.line + 1:
        head, tail = raw[:start_col], raw[end_col:]
    elif start_line == entry.line:
        head, tail = raw[:start_col], ""
    else:
        colon = raw.find(":", entry.key_end)
        if colon < 0 or raw[entry.key_end : colon].strip():
            raise render.UnrenderableError("key line without a plain colon")
        head, rest = raw[: colon + 1], raw[colon + 1 :]
        tail = rest if rest.strip().startswith("#") else ""
    text = _inline_text(entry.flow or flow, value)
    if text is not None and keep_column and one_line:
        spaces = len(tail) - len(tail.lstrip(" "))
        if spaces and tail[spaces:].startswith("#"):
            width = spaces + (end_col - start_col) - len(text)
            tail = " " * max(1, width) + tail[spaces:]
    if text is not None:
        if tail and not tail[0].isspace():
            tail = " " + tail
        if not head.endswith((" ", "\t")):
            head += " "
        return [head + text + tail + newline]
    assert isinstance(value, dict | list)
    nested = render.block(value, key_col + 2)
    return [head.rstrip(" \t") + tail + newline] + [line + newline for line in nested]


def _inline_text(was_flow: bool, value: Any) -> str | None:
    if was_flow and isinstance(value, dict | list) and value:
        return render.flow(value)
    return render.inline(value)


def _new_key(key: Any, value: Any, key_col: int, newline: str) -> list[str]:
    pad = " " * key_col
    text = render.inline(value)
    if text is not None:
        return [f"{pad}{render.key(key)}: {text}{newline}"]
    return [f"{pad}{render.key(key)}:{newline}"] + [
        line + newline for line in render.block(value, key_col + 2)
    ]


# -- one value at a nested key path (config files) -----------------------------------------------


def set_path(
    text: str,
    path: list[str],
    value: Any,
    *,
    read: Reader,
    flow: bool = True,
    live: Mapping[Any, Any] | None = None,
    where: str = "",
) -> str:
    """`text` (a YAML mapping document) with `value` at the nested key `path`, every other line
    kept byte for byte: the lines of that key's value are replaced, or a missing key (with any
    missing sections above it) is added after the last entry of the deepest mapping that
    exists. `flow` writes a list or mapping value in flow form (`[a, b]`) where it can. The
    result must load (`read`) to the old values with `path` set; a layout splicing cannot keep
    (a flow or anchored section, a key written twice) is re-rendered whole as `rewrite` does
    (`live`: the caller's ruamel document, holding the new value, whose dump keeps comments)."""
    if not path:
        raise ValueError("an empty key path")
    newline = "\r\n" if "\r\n" in text else "\n"
    old = to_plain(read(text)) if text.strip() else None
    if old is None:
        old = {}
    if not isinstance(old, dict):
        raise SpliceError(f"{where}: the document is not a mapping")
    expected = _with_path(old, path, value)
    try:
        spliced = _splice_path(text, newline, path, value, old, flow)
    except render.UnrenderableError:
        spliced = None
    if spliced is not None and _holds(spliced, expected, read):
        return spliced
    for candidate in _full_texts(expected, live, newline):
        if _holds(candidate, expected, read):
            return candidate
    raise SpliceError(f"{where}: could not write {'.'.join(path)} faithfully")


def _with_path(data: dict[Any, Any], path: list[str], value: Any) -> dict[Any, Any]:
    """A copy of `data` with `value` at `path` (missing or non-mapping sections made mappings)."""
    out = dict(data)
    head, rest = path[0], path[1:]
    if rest:
        child = out.get(head)
        out[head] = _with_path(child if isinstance(child, dict) else {}, rest, value)
    else:
        out[head] = value
    return out


def _splice_path(
    text: str, newline: str, path: list[str], value: Any, old: dict[Any, Any], flow: bool
) -> str | None:
    """The spliced text, or None where the layout does not allow a line-exact edit."""
    from ai_sdlc.store import roundtrip

    lines = split_lines(text)
    root = roundtrip.compose(text) if text.strip() else None
    if root is None:  # nothing but comments and blank lines
        if lines and not lines[-1].endswith(tuple(_EOL)):
            lines[-1] += newline
        return "".join(lines) + "".join(_path_lines(path, value, 0, newline, flow))
    node, end, plain = root, len(lines), old
    for depth, part in enumerate(path):
        shape = _node_layout(lines[:end], node)
        if shape is None:
            return None
        places = [e for e in shape.entries if e.key == part]
        if len(places) > 1:
            return None  # a key written twice: which one counts is the loader's business
        if not places:
            if not shape.entries:
                return None
            at = shape.entries[-1].content_end
            added = _path_lines(path[depth:], value, shape.column, newline, flow)
            return "".join(lines[:at] + added + lines[at:])
        entry = places[0]
        key, child = next((k, v) for k, v in node.value if k.value == part)
        if _decorated(text, key, child):
            return None
        rest = path[depth + 1 :]
        if rest and child.id == "mapping" and not child.flow_style and child.value:
            inner = plain.get(part)
            if not isinstance(inner, dict):
                return None
            node, end, plain = child, entry.content_end, inner
            continue
        if rest:
            current = plain.get(part)
            new = _with_path(current if isinstance(current, dict) else {}, rest, value)
            chunk = _replacement(entry, lines, new, shape.column, newline, flow=False)
        else:
            chunk = _replacement(
                entry, lines, value, shape.column, newline, flow=flow, keep_column=True
            )
        return "".join(lines[: entry.line] + chunk + lines[entry.content_end :])
    return None


def _decorated(text: str, key: Any, node: Any) -> bool:
    """A value with an anchor or an explicit tag (rewriting it would drop them), or an alias
    (its marks are those of the anchored value, elsewhere in the file)."""
    start = node.start_mark.index
    return start < key.end_mark.index or text[start : start + 1] in ("!", "&", "*")


def _path_lines(path: list[str], value: Any, column: int, newline: str, flow: bool) -> list[str]:
    """New lines for `path` (sections as block mappings) holding `value`."""
    lines = [f"{' ' * (column + 2 * i)}{render.key(part)}:{newline}" for i, part in enumerate(path)]
    indent = column + 2 * (len(path) - 1)
    text = (render.flow(value) if flow and isinstance(value, dict | list) and value else None) or (
        render.inline(value)
    )
    if text is not None:
        lines[-1] = lines[-1][: -len(newline)] + f" {text}{newline}"
        return lines
    return lines + [line + newline for line in render.block(value, indent + 2)]
