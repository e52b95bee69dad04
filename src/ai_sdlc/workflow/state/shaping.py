"""What a person may change about a story's place in the backlog (`ai-sdlc set`, `add`), checked.

The graph fields (`dependencies`, `epic`), the ordering and naming fields (`priority`,
`labels`, `title`, `type`) and the two statuses a person chooses (`backlog`, `ready`). The
other statuses belong to the workflow (`in-progress`, `done`) and to `unblock` (`blocked`).
Values arrive as command-line text (`parse`) and are checked against the backlog as it is
(`check_dependencies`): an unknown or archived id, a story depending on itself, and a cycle are
refused, the cycle named as a path (`S-0001 → S-0003 → S-0001`). Pure functions: the state
owner (`transitions.StoryState.shape`) applies the result under the story's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ai_sdlc.errors import UsageError
from ai_sdlc.store import ids, schema

#: The keys `ai-sdlc set` accepts, in the order they are applied and shown.
SETTABLE: tuple[str, ...] = (
    "title",
    "type",
    "status",
    "priority",
    "labels",
    "epic",
    "dependencies",
)
#: The statuses a person sets; the others are the workflow's and `unblock`'s.
USER_STATUSES: tuple[str, ...] = ("backlog", "ready")
#: A value that removes the key (`epic=` with nothing after it).
CLEARED = None


def _words(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


def parse_assignment(text: str) -> tuple[str, Any]:
    """`key=value` → (key, typed value); UsageError naming what is wrong."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep:
        raise UsageError(
            f"{text!r} is not key=value", hint="e.g. ai-sdlc set S-0002 dependencies=S-0001"
        )
    if key not in SETTABLE:
        raise UsageError(f"{key!r} cannot be set", hint="settable keys: " + ", ".join(SETTABLE))
    return key, parse_value(key, raw)


def parse_value(key: str, raw: str) -> Any:
    """The typed value of one settable key from its text."""
    raw = raw.strip()
    if key == "dependencies":
        return dependency_ids(_words(raw))
    if key == "labels":
        labels = _words(raw)
        if not all(label.isprintable() for label in labels):
            raise UsageError("labels are short one-line words")
        return list(dict.fromkeys(labels))
    if key == "epic":
        if not raw:
            return CLEARED
        if not schema.EPIC_PATTERN.fullmatch(raw):
            raise UsageError(
                f"{raw!r} is not an epic id", hint="letters, digits, '.', '_', '-', e.g. E-01"
            )
        return raw
    if key == "priority":
        if not raw.isdigit() or int(raw) > schema.MAX_COUNTER:
            raise UsageError(
                f"priority must be a whole number from 0 to {schema.MAX_COUNTER:,}, not {raw!r}",
                hint="lower numbers run first",
            )
        return int(raw)
    if key == "status":
        if raw not in USER_STATUSES:
            raise UsageError(
                f"status {raw!r} cannot be set by hand",
                hint="set backlog or ready; in-progress and done are the workflow's, "
                "'ai-sdlc unblock' clears a block",
            )
        return raw
    if key == "title":
        if not raw or not raw.isprintable():
            raise UsageError("the title must be one line of printable text")
        return " ".join(raw.split())
    if key == "type":
        typed = raw.strip().lower()  # `type=Bug` means bug
        problem = schema.type_problem(typed)
        if problem is not None:
            raise UsageError(problem.message, hint=problem.hint)
        return typed
    raise UsageError(f"{key!r} cannot be set", hint="settable keys: " + ", ".join(SETTABLE))


def dependency_ids(refs: Iterable[str]) -> list[str]:
    """Canonical story ids (`s-1` → `S-0001`), in order, without repeats."""
    out: list[str] = []
    for ref in refs:
        found, _ = ids.parse_ref(ref)
        if found is None:
            raise UsageError(f"dependency {ref!r} is not a story id", hint="use ids such as S-0001")
        if found not in out:
            out.append(found)
    return out


def check_status_change(story_id: str, current: object, wanted: str) -> None:
    """A person moves a story between backlog and ready only."""
    if current in USER_STATUSES:
        return
    hint = (
        f"'ai-sdlc unblock {story_id}' clears the block"
        if current == "blocked"
        else "the workflow sets in-progress and done; a story already started is not sent back"
    )
    raise UsageError(f"{story_id} is {current}: its status cannot be set to {wanted}", hint=hint)


def check_dependencies(
    story_id: str | None,
    wanted: list[str],
    backlog: Mapping[str, Mapping[str, Any]],
    archived: Iterable[str] = (),
) -> None:
    """Refuse dependencies the backlog cannot honour. `backlog` maps every active story id to
    its frontmatter; `story_id` is None for a story not created yet (it cannot close a cycle)."""
    gone = set(archived)
    for dep in wanted:
        if dep == story_id:
            raise UsageError(f"{story_id} cannot depend on itself")
        if dep not in backlog:
            where = "is archived" if dep in gone else "is not a story in this backlog"
            raise UsageError(f"dependency {dep} {where}", hint="'ai-sdlc status' lists the stories")
    if story_id is None:
        return
    cycle = _cycle_through(story_id, wanted, backlog)
    if cycle:
        raise UsageError(
            "refused: a dependency cycle " + " → ".join(cycle),
            hint="a story cannot wait, directly or not, for itself; drop one of these",
        )


def _cycle_through(
    story_id: str, wanted: list[str], backlog: Mapping[str, Mapping[str, Any]]
) -> list[str] | None:
    """The path `story_id → … → story_id` the new dependencies would close, or None."""
    came_from: dict[str, str] = {}
    queue = list(wanted)
    for dep in wanted:
        came_from.setdefault(dep, story_id)
    while queue:
        current = queue.pop(0)
        if current == story_id:
            path = [story_id]
            node = came_from[story_id]
            while node != story_id:
                path.append(node)
                node = came_from[node]
            return [story_id, *reversed(path[1:]), story_id]
        for nxt in dependencies_of(backlog.get(current, {})):
            if nxt not in came_from:
                came_from[nxt] = current
                queue.append(nxt)
    return None


def dependencies_of(frontmatter: Mapping[str, Any]) -> list[str]:
    deps = frontmatter.get("dependencies")
    return [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []


def dependents(story_id: str, backlog: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The active stories that list `story_id` among their dependencies."""
    return [sid for sid, fm in backlog.items() if story_id in dependencies_of(fm)]
