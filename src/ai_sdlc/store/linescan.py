"""Pure-Python reader for the simple YAML our writers and the TypeScript tool produce.

Importing PyYAML costs a story run ~0.03 s of CPU, more than reading its files takes. Almost
every frontmatter and config.yaml is a block mapping of `key: value` lines, so this scanner
reads that subset line by line, with ruamel's YAML 1.2 value rules (`yaml12`), and gives the
splicer the same line map libyaml's marks give (`splice.from_marks`).

The subset: block mappings nested by indentation; plain keys (`[A-Za-z_][A-Za-z0-9_./-]*`,
read as text); one-line plain scalars, 'single' and "double"-quoted strings (known escapes
only), `[]`, `{}` and one-line flow lists of such scalars; block lists of scalars (`- item`);
empty values (null); comment and blank lines; trailing ` # comments`; LF or CRLF line breaks.
Anything else (block or multi-line scalars, anchors, aliases, tags, tabs, `?` keys, duplicate
keys, odd characters, document markers...) raises `NotSimple`, and the caller reads the text
as before (libyaml, then ruamel, which also words every error): when unsure, it falls back.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ai_sdlc.store.yaml12 import STR, NotFast, plain_value, resolve_plain
from ai_sdlc.untrusted import MAX_NODES

if TYPE_CHECKING:
    from ai_sdlc.store.splice import Layout, Marks

__all__ = ["NotFast", "NotSimple", "bounded", "load", "load_for_edit", "scan"]

#: Deepest nesting read here (the hostile-file limit, untrusted.MAX_DEPTH, is 64; stories use
#: two levels). More than MAX_NODES (untrusted's limit) nodes also fall back.
MAX_DEPTH = 16
MAX_KEY = 128


class NotSimple(NotFast):
    """The text is outside the simple subset: the caller uses the full YAML readers."""


#: `key:` at the start of a line's content, followed by a space or the line's end.
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_./-]*):(?: +|$)")
#: Characters that cannot start a plain scalar (YAML indicators); `-` is let through below
#: only before a digit or `.` (numbers like -1, -.5).
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
#: A plain item inside `[...]`: words of safe characters separated by single spaces.
_FLOW_PLAIN = re.compile(r"(?:-?[A-Za-z0-9_.~/+=])[A-Za-z0-9_.~/+=-]*(?: [A-Za-z0-9_.~/+=-]+)*")
_SINGLE = re.compile(r"'((?:[^']|'')*)'")
_DOUBLE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))")
_SIMPLE_ESCAPES = {
    "0": "\0",
    "a": "\x07",
    "b": "\b",
    "t": "\t",
    "n": "\n",
    "v": "\x0b",
    "f": "\x0c",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
#: After a value: nothing, or spaces and an optional comment.
_REST = re.compile(r"(?: +(?:#.*)?)?\Z")


def load(text: str) -> Any:
    """Plain values of a YAML text: this scanner, else `fastload` (NotFast when only the
    round-trip loader can tell)."""
    try:
        return scan(text)[0]
    except NotSimple:
        from ai_sdlc.store import fastload

        return fastload.load(text)


def load_for_edit(text: str) -> tuple[dict[str, Any], Layout]:
    """(values, the splicer's line map) of a text in the subset; NotSimple otherwise."""
    from ai_sdlc.store import splice
    from ai_sdlc.store.storyfile import split_lines

    values, marks, column = scan(text)
    return values, splice.from_marks(split_lines(text), marks, column)


def bounded(text: str) -> bool:
    """True when the text is in the subset: no aliases, at most MAX_DEPTH levels and
    MAX_NODES nodes, so the hostile-file limits hold without a YAML parser."""
    try:
        scan(text)
    except NotSimple:
        return False
    return True


def scan(text: str) -> tuple[dict[str, Any], list[Marks], int]:
    """(values, marks of each top-level key, their column); NotSimple outside the subset."""
    return _Scanner(text).document()


class _Scanner:
    def __init__(self, text: str) -> None:
        if "\r" in text:
            text = text.replace("\r\n", "\n")
            if "\r" in text:
                raise NotSimple("a lone carriage return")
        raw = text.split("\n")
        if raw[-1] == "":
            raw.pop()
        elif not raw[-1].strip(" ") or raw[-1].lstrip(" ").startswith("#"):
            # libyaml's end marks then depend on that last line's width: not worth matching
            raise NotSimple("a last line without a line break that is blank or a comment")
        self.line_count = len(raw)
        #: Content lines: (line number, indentation, the line); blank and comment lines skipped.
        self.lines: list[tuple[int, int, str]] = []
        for number, line in enumerate(raw):
            if not line.isprintable():
                raise NotSimple("a tab, control, format or separator character")
            content = line.lstrip(" ")
            if content and content[0] != "#":
                self.lines.append((number, len(line) - len(content), line))
        self.nodes = 0

    def document(self) -> tuple[dict[str, Any], list[Marks], int]:
        if not self.lines:
            raise NotSimple("no mapping")
        column = self.lines[0][1]
        marks: list[Marks] = []
        values, index = self._mapping(0, column, 1, marks)
        if index != len(self.lines):
            raise NotSimple("a line indented less than the first key")
        return values, marks, column

    def _end_of(self, index: int) -> tuple[int, int]:
        """Mark where a block collection ends: the next content line's start, or the end."""
        if index < len(self.lines):
            number, indent, _ = self.lines[index]
            return (number, indent)
        return (self.line_count, 0)

    def _count(self, nodes: int) -> None:
        self.nodes += nodes
        if self.nodes > MAX_NODES:
            raise NotSimple("too many nodes")

    def _mapping(
        self, index: int, indent: int, depth: int, marks: list[Marks] | None
    ) -> tuple[dict[str, Any], int]:
        if depth > MAX_DEPTH:
            raise NotSimple("nested too deep")
        result: dict[str, Any] = {}
        self._count(1)
        while index < len(self.lines):
            number, column, line = self.lines[index]
            if column < indent:
                break
            if column > indent:
                raise NotSimple("a line indented into the value above it")
            found = _KEY.match(line, indent)
            if found is None:
                raise NotSimple("not a `key: value` line")
            key = found.group(1)
            if len(key) > MAX_KEY or resolve_plain(key) != STR or key in result:
                raise NotSimple("a key that is long, not text, or repeated")
            self._count(2)
            index += 1
            start = found.end()
            flow = False
            if start == len(line) or line[start] == "#":
                value, index, span = self._nested(index, indent, depth)
                # an empty value is a null whose marks are just after the colon (libyaml's)
                value_start, value_end = span or ((number, found.end(1) + 1),) * 2
            else:
                flow = line[start] in "[{"
                value, end = _inline(line, start)
                value_start, value_end = (number, start), (number, end)
                if isinstance(value, list):
                    self._count(len(value))
                if index < len(self.lines) and self.lines[index][1] > indent:
                    raise NotSimple("a value continued on the next line")
            result[key] = value
            if marks is not None:
                marks.append((key, number, found.end(1), value_start, value_end, flow, False))
        return result, index

    def _nested(
        self, index: int, indent: int, depth: int
    ) -> tuple[Any, int, tuple[tuple[int, int], tuple[int, int]] | None]:
        """The block value after `key:`, or null when the next line is not inside it:
        (value, next index, (start mark, end mark) of a block value)."""
        if index == len(self.lines):
            return None, index, None
        number, column, line = self.lines[index]
        entry = line.startswith("- ", column)
        if column < indent or (column == indent and not entry):
            return None, index, None
        value: Any
        if entry:
            value, index = self._sequence(index, column, depth + 1)
        else:
            value, index = self._mapping(index, column, depth + 1, None)
        if index < len(self.lines) and self.lines[index][1] > indent:
            raise NotSimple("a line indented into the value above it")
        return value, index, ((number, column), self._end_of(index))

    def _sequence(self, index: int, indent: int, depth: int) -> tuple[list[Any], int]:
        if depth > MAX_DEPTH:
            raise NotSimple("nested too deep")
        items: list[Any] = []
        self._count(1)
        while index < len(self.lines):
            _, column, line = self.lines[index]
            if column != indent or not line.startswith("- ", column):
                break
            start = column + 2
            while start < len(line) and line[start] == " ":
                start += 1
            if start == len(line) or line[start] == "#":
                raise NotSimple("an empty or nested list item")
            value, _ = _inline(line, start)
            if isinstance(value, list):
                self._count(len(value))
            items.append(value)
            self._count(1)
            index += 1
            if index < len(self.lines) and self.lines[index][1] > indent:
                raise NotSimple("a list item continued on the next line")
        return items, index


def _inline(line: str, start: int) -> tuple[Any, int]:
    """(value, end column) of the one-line value at `start`; what follows may only be spaces
    and a comment."""
    first = line[start]
    value: Any
    if first == "[":
        value, end = _flow_list(line, start)
    elif first == "{":
        if not line.startswith("{}", start):
            raise NotSimple("a flow mapping")
        value, end = {}, start + 2
    elif first in "'\"":
        value, end = _quoted(line, start)
    else:
        value, end = _plain(line, start)
    if end != len(line) and not _REST.match(line, end):
        raise NotSimple("text after a value")
    return value, end


def _plain(line: str, start: int) -> tuple[Any, int]:
    first = line[start]
    if first in _INDICATORS and not (first == "-" and line[start + 1 : start + 2] in _SIGNED):
        raise NotSimple("a value starting with an indicator")
    comment = line.find(" #", start)
    end = len(line) if comment < 0 else comment
    text = line[start:end].rstrip(" ")
    if ": " in text or text.endswith(":"):
        raise NotSimple("a `: ` inside a plain value")
    try:
        return plain_value(text), start + len(text)
    except NotFast:
        raise NotSimple("a value only the full readers build") from None


_SIGNED = frozenset("0123456789.")


def _quoted(line: str, start: int) -> tuple[str, int]:
    if line[start] == "'":
        found = _SINGLE.match(line, start)
        if found is None:
            raise NotSimple("a single-quoted value not closed on its line")
        return found.group(1).replace("''", "'"), found.end()
    found = _DOUBLE.match(line, start)
    if found is None:
        raise NotSimple("a double-quoted value not closed on its line")
    return _ESCAPE.sub(_unescape, found.group(1)), found.end()


def _unescape(found: re.Match[str]) -> str:
    hex_digits = found.group(1) or found.group(2) or found.group(3)
    if hex_digits is not None:
        code = int(hex_digits, 16)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            raise NotSimple("an escape that is not a character")
        return chr(code)
    known = _SIMPLE_ESCAPES.get(found.group(4))
    if known is None:
        raise NotSimple("an unknown escape")
    return known


def _flow_list(line: str, start: int) -> tuple[list[Any], int]:
    """`[a, 'b', "c"]` on one line: scalars only, no nesting, no trailing comma."""
    items: list[Any] = []
    position = start + 1
    while True:
        while line.startswith(" ", position):
            position += 1
        if line.startswith("]", position) and not items:
            return items, position + 1
        if line.startswith(("'", '"'), position):
            value, position = _quoted(line, position)
            items.append(value)
        else:
            found = _FLOW_PLAIN.match(line, position)
            if found is None:
                raise NotSimple("a list item outside the simple forms")
            try:
                items.append(plain_value(found.group()))
            except NotFast:
                raise NotSimple("a value only the full readers build") from None
            position = found.end()
        while line.startswith(" ", position):
            position += 1
        if line.startswith("]", position):
            return items, position + 1
        if not line.startswith(", ", position):
            raise NotSimple("a list item outside the simple forms")
        position += 1
