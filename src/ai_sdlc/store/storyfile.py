"""Split a story file into its exact parts: BOM, `---` lines, frontmatter text, body.

Every byte outside the frontmatter text is kept as read, so a write can reassemble the file
with only the frontmatter lines that changed (CRLF, BOM and the body untouched).
"""

from __future__ import annotations

import re

import msgspec

from ai_sdlc.errors import InvalidInputError

BOM = "\ufeff"
#: File line of the first frontmatter line (line 1 is the opening `---`).
FIRST_LINE = 2

_OPEN = re.compile(r"---[ \t]*(\r?\n)")
_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\r?\Z)", re.MULTILINE)
#: The line breaks YAML (and ruamel's line counter) recognise.
_BREAK = re.compile(r"\r\n|[\n\r\x85\u2028\u2029]")


class StoryText(msgspec.Struct, frozen=True):
    bom: str
    open_line: str
    frontmatter: str
    close_line: str
    body: str

    @property
    def newline(self) -> str:
        """The file's line ending, taken from the opening `---` line."""
        return "\r\n" if self.open_line.endswith("\r\n") else "\n"

    def text(self) -> str:
        return self.bom + self.open_line + self.frontmatter + self.close_line + self.body

    def with_parts(self, *, frontmatter: str | None = None, body: str | None = None) -> StoryText:
        return msgspec.structs.replace(
            self,
            frontmatter=self.frontmatter if frontmatter is None else frontmatter,
            body=self.body if body is None else body,
        )


def decode(data: bytes, path: str) -> str:
    """UTF-8 text of a story file; a bad byte is reported with its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InvalidInputError(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x})",
            path=path,
            line=line,
            column=column,
            hint="save the file as UTF-8",
        ) from None


def split(text: str, path: str) -> StoryText:
    """Parts of a story file; no frontmatter or an unclosed one is an InvalidInputError."""
    bom = BOM if text.startswith(BOM) else ""
    opened = _OPEN.match(text, len(bom))
    if opened is None:
        raise InvalidInputError(
            "no frontmatter: a story starts with a line `---`, then `key: value` lines, "
            "then a closing `---`",
            path=path,
            line=1,
            column=1,
            hint="start the file with: ---, title: My story, status: backlog, --- (one per line)",
        )
    closed = _CLOSE.search(text, opened.end())
    if closed is None:
        raise InvalidInputError(
            "the frontmatter opened on line 1 is never closed",
            path=path,
            line=1,
            column=1,
            hint="add a line `---` after the last `key: value` line",
        )
    return StoryText(
        bom=bom,
        open_line=opened.group(0),
        frontmatter=text[opened.end() : closed.start()],
        close_line=closed.group(0),
        body=text[closed.end() :],
    )


def split_lines(text: str) -> list[str]:
    """Lines with their endings, broken exactly where YAML counts a new line."""
    lines: list[str] = []
    start = 0
    for found in _BREAK.finditer(text):
        lines.append(text[start : found.end()])
        start = found.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def normalise_newlines(text: str, newline: str) -> str:
    """`text` with every line break written as `newline` (for bodies set by code)."""
    return re.sub(r"\r\n|\n", newline, text) if newline != "\n" else text.replace("\r\n", "\n")
