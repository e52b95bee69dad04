"""Read one story file: the round-trip load (for edits and `show`) and the fast load (listing).

Both validate with the same rules and agree on values; the fast path hands anything unusual,
and every broken file, to the round-trip path so that errors carry exact file lines. Both read
only regular files (`untrusted.read_regular`) and hold the frontmatter to the same size, depth
and alias-expansion limits (`untrusted.check_yaml`) before any YAML parser sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc import untrusted
from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import schema, storyfile
from ai_sdlc.store.storyfile import FIRST_LINE, StoryText
from ai_sdlc.store.values import UnsupportedValueError, to_plain


class RoundTrip(msgspec.Struct):
    """A story file parsed for editing: exact text parts, ruamel data, plain snapshot."""

    text: StoryText
    data: Any  # ruamel CommentedMap (mutable, keeps formatting)
    plain: dict[str, Any]


def read(path: Path) -> bytes:
    """Bytes of a story file: a symlink, FIFO, folder or unreadable file is an
    InvalidInputError naming the file and the reason (never a hang or a crash)."""
    return untrusted.read_regular(path)


def parts_of(data: bytes, shown: str) -> StoryText:
    """The parts of a story file, its frontmatter checked against the YAML limits."""
    parts = storyfile.split(storyfile.decode(data, shown), shown)
    untrusted.check_yaml(parts.frontmatter, shown, first_line=FIRST_LINE)
    return parts


def load_roundtrip(path: Path, folder_id: str, data: bytes) -> RoundTrip:
    """Parse + validate with ruamel; InvalidInputError with file line/column on any problem."""
    from ai_sdlc.store import roundtrip

    shown = str(path)
    parts = parts_of(data, shown)
    loaded = roundtrip.load(parts.frontmatter, shown)
    plain = plain_frontmatter(loaded, shown)
    problem = schema.find_problem(plain, folder_id)
    if problem is not None:
        raise problem_error(problem, shown, loaded)
    return RoundTrip(parts, loaded, plain)


def plain_frontmatter(loaded: Any, path: str) -> Any:
    """Plain copy of round-trip data; values a story cannot hold are InvalidInputErrors."""
    if not isinstance(loaded, Mapping):
        try:
            return to_plain(loaded)
        except (UnsupportedValueError, RecursionError) as exc:
            raise InvalidInputError(_why(exc), path=path, line=FIRST_LINE, column=1) from None
    result: dict[Any, Any] = {}
    for key, value in loaded.items():
        try:
            result[to_plain(key)] = to_plain(value)
        except (UnsupportedValueError, RecursionError) as exc:
            line, column = _key_position(loaded, key)
            raise InvalidInputError(
                f"`{key}`: {_why(exc)}",
                path=path,
                line=line,
                column=column,
                hint="write the value as plain text, numbers, lists or mappings (no `!tags`, "
                "no alias that contains itself)",
            ) from None
    return result


def _why(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "the value contains itself through an alias (`*name` inside `&name`)"
    return str(exc)


def _key_position(loaded: Any, key: Any) -> tuple[int, int]:
    try:
        line, column = loaded.lc.key(key)
    except Exception:
        return FIRST_LINE, 1
    return int(line) + FIRST_LINE, int(column) + 1


def problem_error(problem: schema.Problem, path: str, loaded: Any) -> InvalidInputError:
    line, column = FIRST_LINE, 1
    if problem.field is not None and isinstance(loaded, Mapping) and problem.field in loaded:
        line, column = _key_position(loaded, problem.field)
    elif problem.field is None and isinstance(loaded, Mapping):
        line = FIRST_LINE - 1  # a missing field: point at the frontmatter's opening line
    return InvalidInputError(
        problem.message, path=path, line=line, column=column, hint=problem.hint
    )


def load_fast(path: Path | str, folder_id: str, data: bytes) -> tuple[dict[str, Any], bool]:
    """(validated plain frontmatter, True when libyaml's C parser produced it)."""
    from ai_sdlc.store import fastload

    shown = str(path)
    parts = parts_of(data, shown)
    try:
        plain = fastload.load(parts.frontmatter)
    except fastload.NotFast:
        return load_roundtrip(Path(path), folder_id, data).plain, False
    if schema.find_problem(plain, folder_id) is not None:
        # Same values, so the same problem: the round-trip load reports it with its line.
        return load_roundtrip(Path(path), folder_id, data).plain, False
    return plain, True


def body_of(path: Path) -> str:
    """Body text of a story file as it is on disk now (lazy `Story.body` of listed stories)."""
    shown = str(path)
    return storyfile.split(storyfile.decode(read(path), shown), shown).body
