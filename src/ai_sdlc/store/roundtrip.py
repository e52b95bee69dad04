"""ruamel.yaml round-trip loading, and YAML errors turned into messages a person can act on.

This module is the reference reader: whatever it loads is what a story holds. It is imported
only when a story is shown, or when the fast loader gives up (listing, or a locked edit).
"""

from __future__ import annotations

import io
import re
import warnings
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store.storyfile import FIRST_LINE, split_lines


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


def load(frontmatter: str, path: str) -> Any:
    """Round-trip data of a frontmatter text; any YAML problem is an InvalidInputError."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. reused anchors: legal, not worth a console line
            return _yaml().load(frontmatter)
    except Exception as exc:
        raise yaml_error(exc, frontmatter, path) from None


def compose(frontmatter: str) -> Node | None:
    """Node tree (with exact start/end marks) of a frontmatter known to load."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        node: Node | None = _yaml().compose(frontmatter)
    return node


def dump(data: Any) -> str:
    """Full re-dump of a frontmatter mapping: only for edits that cannot be spliced."""
    yaml = _yaml()
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.allow_unicode = True
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


# -- error messages ------------------------------------------------------------------------------


def yaml_error(exc: Exception, frontmatter: str, path: str) -> InvalidInputError:
    """InvalidInputError with the FILE line and column of a ruamel failure and a fix."""
    if isinstance(exc, ReaderError):
        line, column = _position(frontmatter, int(exc.position))
        char = exc.character if isinstance(exc.character, int) else 0
        return InvalidInputError(
            f"character U+{char:04X} is not allowed in YAML",
            path=path,
            line=line + FIRST_LINE,
            column=column + 1,
            hint="remove it, or write it as an escape inside a double-quoted value",
        )
    if isinstance(exc, MarkedYAMLError):
        return _marked_error(exc, frontmatter, path)
    return _value_error(exc, frontmatter, path)


def _position(text: str, index: int) -> tuple[int, int]:
    lines = split_lines(text[:index])
    if not lines:
        return 0, 0
    last = lines[-1]
    if last.endswith(("\n", "\r", "\x85", "\u2028", "\u2029")):
        return len(lines), 0
    return len(lines) - 1, len(last)


def _marked_error(exc: MarkedYAMLError, frontmatter: str, path: str) -> InvalidInputError:
    problem = str(exc.problem or exc.context or "invalid YAML")
    context = str(exc.context or "")
    mark = exc.problem_mark or exc.context_mark
    quoted = "scanning a quoted scalar" in context or "scanning a double-quoted" in context
    if quoted and "end of stream" in problem and exc.context_mark is not None:
        mark = exc.context_mark
        problem = "a quoted value starting here is never closed"
    line = mark.line if mark is not None else 0
    column = mark.column if mark is not None else 0
    lines = split_lines(frontmatter)
    raw = lines[line].rstrip("\r\n") if line < len(lines) else ""
    message, hint = _explain(problem, raw, frontmatter, line)
    return InvalidInputError(
        message, path=path, line=line + FIRST_LINE, column=column + 1, hint=hint
    )


_DUPLICATE = re.compile(r'found duplicate key "(?P<key>.*?)" with value')


def _explain(problem: str, raw: str, frontmatter: str, line: int) -> tuple[str, str]:
    if problem == "mapping values are not allowed here":
        key, _, value = raw.partition(":")
        quoted = value.strip().replace("'", "''")
        return (
            "a value contains ': ' (colon and space), which YAML reads as a nested key",
            f"quote the value: {key.rstrip()}: '{quoted}'",
        )
    duplicate = _DUPLICATE.search(problem)
    if duplicate is not None:
        key = duplicate.group("key")
        first = _first_line_of_key(frontmatter, key)
        where = f" (first on line {first + FIRST_LINE})" if first is not None else ""
        return f"duplicate key `{key}`{where}", f"keep only one `{key}:` line"
    if "'\\t'" in problem:
        return "a tab character where YAML needs spaces", "indent with spaces, not tabs"
    if "never closed" in problem:
        return problem, "close the quote, or remove the opening one"
    if "found undefined alias" in problem:
        return (
            f"invalid YAML: {problem}",
            "a leading `*` refers to an anchor; quote the value if you meant the text",
        )
    return (
        f"invalid YAML: {problem}",
        "check this line; quote values that contain ': ', ' #' or start with a special "
        "character such as [ { * & ! | > ' \" % @ `",
    )


def _first_line_of_key(frontmatter: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*['\"]?{re.escape(key)}['\"]?\s*:")
    for number, text in enumerate(split_lines(frontmatter)):
        if pattern.match(text):
            return number
    return None


def _value_error(exc: Exception, frontmatter: str, path: str) -> InvalidInputError:
    """A value that scans but cannot be built (e.g. `created: 2026-13-45`): find which one."""
    culprit = _failing_scalar(frontmatter)
    if culprit is None:
        return InvalidInputError(
            f"cannot read the frontmatter: {exc}", path=path, line=FIRST_LINE, column=1
        )
    return InvalidInputError(
        f"cannot read the value {culprit.value!r}: {exc}",
        path=path,
        line=culprit.start_mark.line + FIRST_LINE,
        column=culprit.start_mark.column + 1,
        hint=f"fix the value, or quote it to keep it as text: '{culprit.value}'",
    )


def _failing_scalar(frontmatter: str) -> ScalarNode | None:
    try:
        root = compose(frontmatter)
    except Exception:
        return None
    for node in _scalars(root):
        try:
            _yaml().load(f"probe: {_as_plain_line(node)}\n")
        except Exception:
            return node
    return None


def _as_plain_line(node: ScalarNode) -> str:
    return str(node.value) if node.style is None else f"'{node.value}'"


def _scalars(node: Node | None) -> list[ScalarNode]:
    if node is None:
        return []
    if isinstance(node, ScalarNode):
        return [node]
    found: list[ScalarNode] = []
    if isinstance(node, MappingNode):
        for key, value in node.value:
            found += _scalars(key) + _scalars(value)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            found += _scalars(item)
    return found
