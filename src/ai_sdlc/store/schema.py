"""What a story's frontmatter may hold, checked on plain values.

The checks return a `Problem` naming the field rather than raising, so that each loader can attach
the right file line (the fast loader has no line numbers and asks the round-trip loader for them).
Fields not listed here are kept untouched and never checked: the TypeScript tool writes many.

Bounds that make a value usable, not just well typed: counters are at most `MAX_COUNTER` (10^9;
a larger one would in effect switch the global recovery limit off), `priority` is >= 0, dates
are real ISO dates or timestamps, and `type` is one lowercase word (`TYPE_PATTERN`): the
TypeScript tool's files carry types beyond its own union (`refactor`, `documentation`, ...), so
any word loads; `STORY_TYPES` are the ones the agents get their own guidance for.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping

import msgspec

#: `in-review`: the story's pull request is open and followed (`pr.loop`), not done yet.
STATUSES: tuple[str, ...] = ("backlog", "ready", "in-progress", "in-review", "done", "blocked")
#: The one table of recovery kinds: kind → (singular, plural) as messages spell them, in the
#: order breakdowns are shown (the ledger and every message use it).
RECOVERY_KIND_LABELS: dict[str, tuple[str, str]] = {
    "implementation_retry": ("implementation retry", "implementation retries"),
    "rework": ("rework cycle", "rework cycles"),
    "api_retry": ("API retry", "API retries"),
    "refinement": ("refinement iteration", "refinement iterations"),
    "pr_rework": ("PR rework round", "PR rework rounds"),
}
RECOVERY_KINDS: tuple[str, ...] = tuple(RECOVERY_KIND_LABELS)

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
#: The story types the agents know (each gets its own line of guidance); any other lowercase
#: word (`TYPE_PATTERN`) is a valid type too, given neutral guidance.
STORY_TYPES: tuple[str, ...] = (
    "feature",
    "bug",
    "chore",
    "spike",
    "refactor",
    "documentation",
    "enhancement",
)
#: A story type: one lowercase word (letters, digits, '-' or '_' inside), at most 40 characters.
TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,39}")

#: Largest value of a counter (and of a `recovery_breakdown` count).
MAX_COUNTER = 1_000_000_000

ID_PATTERN = re.compile(r"S-([0-9]{4,})")


class Problem(msgspec.Struct, frozen=True):
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


def _in_counter_range(value: object) -> bool:
    return _is_int(value) and 0 <= value <= MAX_COUNTER  # type: ignore[operator]


def _counter(field: str, value: object) -> Problem | None:
    if _in_counter_range(value):
        return None
    return Problem(
        field,
        f"`{field}` must be a whole number >= 0 and at most {MAX_COUNTER:,}, not {_shown(value)}",
        f"write e.g. `{field}: 0` (a missing counter counts as 0)",
    )


def _text(field: str, value: object, *, nullable: bool = False) -> Problem | None:
    if isinstance(value, str) or (nullable and value is None):
        return None
    quoted = str(value).replace("'", "''")
    return Problem(
        field, f"`{field}` must be text, not {_shown(value)}", f"quote it: {field}: '{quoted}'"
    )


def is_iso_date(text: str) -> bool:
    """True for an ISO 8601 date or timestamp (`2026-01-31`, `2026-01-31T10:00:00.000Z`)."""
    try:
        dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def _when(field: str, value: object, *, nullable: bool = False) -> Problem | None:
    if isinstance(value, dt.date) or (nullable and value is None):
        return None
    if isinstance(value, str) and is_iso_date(value):
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


#: An epic id (`epic: E-01`, or a TypeScript-tool label `epic-E-01`).
EPIC_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _dependencies(field: str, value: object) -> Problem | None:
    """`dependencies: [S-0003, ...]`: story ids only (the run graph reads them)."""
    hint = "write e.g. dependencies: [S-0003, S-0004]"
    if not isinstance(value, list):
        return Problem(field, f"`{field}` must be a list of story ids, not {_shown(value)}", hint)
    for item in value:
        if not isinstance(item, str) or not ID_PATTERN.fullmatch(item):
            return Problem(field, f"`{field}` has {_shown(item)}, which is not a story id", hint)
    return None


def _epic(field: str, value: object) -> Problem | None:
    if isinstance(value, str) and EPIC_PATTERN.fullmatch(value):
        return None
    return Problem(
        field,
        f"`epic` must be an epic id (letters, digits, '.', '_', '-'), not {_shown(value)}",
        "write e.g. epic: E-01",
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
    if _in_counter_range(value):
        return None
    return Problem(
        field,
        f"`priority` must be a whole number >= 0 and at most {MAX_COUNTER:,}, not {_shown(value)}",
        "write e.g. priority: 10 (lower numbers come first)",
    )


def type_problem(value: object) -> Problem | None:
    """None for a usable story type (one lowercase word), else what is wrong with it."""
    if isinstance(value, str) and TYPE_PATTERN.fullmatch(value):
        return None
    return Problem(
        "type",
        f"`type` {_shown(value)} is not a story type (one lowercase word)",
        f"write e.g. type: {STORY_TYPES[0]} (known: {', '.join(STORY_TYPES)}; any lowercase "
        "word is accepted)",
    )


def _type(field: str, value: object) -> Problem | None:
    return type_problem(value)


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
        if not _in_counter_range(count):
            return Problem(
                field,
                f"`{field}.{kind}` must be a whole number >= 0 and at most {MAX_COUNTER:,}, "
                f"not {_shown(count)}",
                hint,
            )
    return None


Check = Callable[[str, object], Problem | None]

_CHECKS: dict[str, Check] = {
    "id": _text,
    "title": _title,
    "slug": _text,
    "type": _type,
    "status": _status,
    "priority": _priority,
    "created": _when,
    "updated": _when,
    "labels": _text_list,
    "dependencies": _dependencies,
    "epic": _epic,
    "blocked_reason": lambda f, v: _text(f, v, nullable=True),
    "blocked_at": lambda f, v: _when(f, v, nullable=True),
    "recovery_breakdown": _breakdown,
    #: The story's opt-out of protected tests (see `verify.judge`): a real boolean, never a
    #: word that reads as yes.
    "allow_test_changes": _flag,
    #: Done without any verification, as the project allowed (`verify.none: true`).
    "unverified": _flag,
    **{name: _flag for name in FLAG_FIELDS},
    **{name: _counter for name in COUNTER_FIELDS},
}

REQUIRED: tuple[str, ...] = ("title", "status")


def field_problem(key: str, value: object) -> Problem | None:
    """What is wrong with one field's value, as a story file would be checked (None: fine)."""
    check = _CHECKS.get(key)
    return check(key, value) if check is not None else None


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


def breakdown_text(total: int, breakdown: dict[str, int]) -> str:
    """ "3 implementation retries, 1 rework": a story's recovery counts in words (the
    ledger's limit message, `show`, the pull request's body)."""
    parts: list[str] = []
    for kind, (one, many) in RECOVERY_KIND_LABELS.items():
        n = breakdown.get(kind, 0)
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    for kind in sorted(set(breakdown) - set(RECOVERY_KIND_LABELS)):
        if breakdown[kind]:
            parts.append(f"{breakdown[kind]} {kind}")
    unattributed = total - sum(v for v in breakdown.values() if v > 0)
    if unattributed > 0:
        parts.append(f"{unattributed} unattributed")
    return ", ".join(parts) if parts else "none recorded"
