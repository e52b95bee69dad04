"""What a story's frontmatter may hold, checked on plain values.

The checks return a `Problem` naming the field rather than raising, so that each loader can attach
the right file line (the fast loader has no line numbers and asks the round-trip loader for them).
Fields not listed here are kept untouched and never checked: the TypeScript tool writes many.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

STATUSES: tuple[str, ...] = ("backlog", "ready", "in-progress", "done", "blocked")
RECOVERY_KINDS: tuple[str, ...] = ("implementation_retry", "rework", "refinement", "api_retry")
COUNTER_FIELDS: tuple[str, ...] = (
    "implementation_retry_count",
    "retry_count",
    "refinement_count",
    "total_recovery_attempts",
)
FLAG_FIELDS: tuple[str, ...] = (
    "research_complete",
    "plan_complete",
    "implementation_complete",
    "reviews_complete",
)
STORY_TYPES: tuple[str, ...] = ("feature", "bug", "chore", "spike")

ID_PATTERN = re.compile(r"S-([0-9]{4,})")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a frontmatter; `field` None means the frontmatter as a whole."""

    field: str | None
    message: str
    hint: str | None = None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else _yaml_word(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _yaml_word(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _counter(field: str, value: object) -> Problem | None:
    if _is_int(value) and value >= 0:  # type: ignore[operator]
        return None
    return Problem(
        field,
        f"`{field}` must be a whole number >= 0, not {_shown(value)}",
        f"write e.g. `{field}: 0` (a missing counter counts as 0)",
    )


def _text(field: str, value: object, *, nullable: bool = False) -> Problem | None:
    if isinstance(value, str) or (nullable and value is None):
        return None
    quoted = str(value).replace("'", "''")
    return Problem(
        field, f"`{field}` must be text, not {_shown(value)}", f"quote it: {field}: '{quoted}'"
    )


def _when(field: str, value: object, *, nullable: bool = False) -> Problem | None:
    if isinstance(value, str | dt.date) or (nullable and value is None):
        return None
    return Problem(
        field,
        f"`{field}` must be a date or timestamp, not {_shown(value)}",
        f"write e.g. {field}: '2026-01-31'",
    )


def _flag(field: str, value: object) -> Problem | None:
    if isinstance(value, bool):
        return None
    return Problem(
        field, f"`{field}` must be true or false, not {_shown(value)}", f"write {field}: false"
    )


def _text_list(field: str, value: object) -> Problem | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return Problem(
        field,
        f"`{field}` must be a list of text items, not {_shown(value)}",
        f"write e.g. {field}: [one, two]",
    )


def _status(field: str, value: object) -> Problem | None:
    if isinstance(value, str) and value in STATUSES:
        return None
    return Problem(
        field,
        f"`status` {_shown(value)} is not a known status",
        f"use one of: {', '.join(STATUSES)}",
    )


def _priority(field: str, value: object) -> Problem | None:
    if _is_int(value):
        return None
    return Problem(
        field, f"`priority` must be a whole number, not {_shown(value)}", "write e.g. priority: 10"
    )


def _title(field: str, value: object) -> Problem | None:
    problem = _text(field, value)
    if problem is None and not str(value).strip():
        return Problem(field, "`title` is empty", "give the story a one-line title")
    return problem


def _breakdown(field: str, value: object) -> Problem | None:
    hint = f"write e.g. {field}: {{rework: 1}} with kinds from: {', '.join(RECOVERY_KINDS)}"
    if not isinstance(value, dict):
        return Problem(field, f"`{field}` must be a mapping of kind: count", hint)
    for kind, count in value.items():
        if kind not in RECOVERY_KINDS:
            return Problem(field, f"`{field}` has an unknown kind {_shown(kind)}", hint)
        if not (_is_int(count) and count >= 0):
            return Problem(
                field, f"`{field}.{kind}` must be a whole number >= 0, not {_shown(count)}", hint
            )
    return None


Check = Callable[[str, object], Problem | None]

_CHECKS: dict[str, Check] = {
    "id": _text,
    "title": _title,
    "slug": _text,
    "type": _text,
    "status": _status,
    "priority": _priority,
    "created": _when,
    "updated": _when,
    "labels": _text_list,
    "dependencies": _text_list,
    "blocked_reason": lambda f, v: _text(f, v, nullable=True),
    "blocked_at": lambda f, v: _when(f, v, nullable=True),
    "recovery_breakdown": _breakdown,
    **{name: _flag for name in FLAG_FIELDS},
    **{name: _counter for name in COUNTER_FIELDS},
}

REQUIRED: tuple[str, ...] = ("title", "status")


def find_problem(frontmatter: object, folder_id: str) -> Problem | None:
    """First problem in file order, or None when the frontmatter is usable as a story."""
    if frontmatter is None:
        return Problem(None, "the frontmatter is empty", "add at least `title:` and `status:`")
    if not isinstance(frontmatter, Mapping):
        found = "a list" if isinstance(frontmatter, list) else "a single value"
        return Problem(
            None,
            f"the frontmatter must be `key: value` lines, found {found}",
            "write one `key: value` per line, e.g. `title: My story`",
        )
    for key, value in frontmatter.items():
        if not isinstance(key, str):
            return Problem(
                None, f"field name {_shown(key)} must be text", f"quote it: '{_yaml_word(key)}':"
            )
        check = _CHECKS.get(key)
        problem = check(key, value) if check is not None else None
        if problem is not None:
            return problem
    story_id = frontmatter.get("id")
    if story_id is not None and story_id != folder_id:
        return Problem(
            "id",
            f"`id` is {story_id!r} but the story lives in folder {folder_id}",
            f"set id: {folder_id} (the folder name is the story id)",
        )
    for name in REQUIRED:
        if name not in frontmatter:
            example = "backlog" if name == "status" else "A one-line title"
            return Problem(None, f"the frontmatter has no `{name}`", f"add `{name}: {example}`")
    return None
