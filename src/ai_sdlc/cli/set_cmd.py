"""`ai-sdlc set <id> key=value…`: shape the backlog without a text editor.

Dependencies, epic, priority, labels, title, type, and the statuses a person chooses (backlog,
ready). Every value is checked before anything is written (an unknown or archived dependency,
a cycle, a status the workflow owns: exit 2, nothing changed); the change is one transaction of
the state owner (`StoryState.shape`), logged as an `edited` event."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.show import StoryArg
from ai_sdlc.errors import UsageError
from ai_sdlc.workflow.state.shaping import SETTABLE, parse_assignment
from ai_sdlc.workflow.state.transitions import StoryState


def set_fields(
    ctx: typer.Context,
    story_ref: StoryArg,
    assignments: Annotated[
        list[str],
        typer.Argument(
            help="key=value pairs; keys: " + ", ".join(SETTABLE) + ". Lists are comma-separated "
            "(dependencies=S-0001,S-0003); an empty value clears (epic=, dependencies=); status "
            "is backlog or ready.",
            show_default=False,
        ),
    ],
    json: JsonOption = False,
) -> None:
    """Set a story's dependencies, epic, priority, labels, title, type or status."""
    app = Application.of(ctx)
    out = app.terminal(json)
    changes: dict[str, object] = {}
    for text in assignments:
        key, value = parse_assignment(text)
        if key in changes:
            raise UsageError(f"{key} is given twice")
        changes[key] = value
    store = app.store()
    story_id = store.resolve(story_ref)
    store.get(story_id)  # a bad story file fails here (exit 3) before any edit
    limit = app.config().typed().limits.global_recovery
    changed = StoryState(store, limit=limit).shape(story_id, changes)
    if json:
        out.json({"id": story_id, "changed": changed})
        return
    if not changed:
        out.info(f"{story_id}: nothing to change.")
        return
    for key, change in changed.items():
        out.success(f"{story_id} {key}: {_shown(change['from'])} → {_shown(change['to'])}")


def _shown(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def register(app: typer.Typer) -> None:
    app.command("set")(set_fields)
