"""`ai-sdlc add "title"`: create a story with an atomically allocated id; prints the id."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.common import JsonOption, open_store, terminal
from ai_sdlc.errors import UsageError

STORY_TYPES = ("feature", "bug", "chore", "spike")


def add(
    title: Annotated[str, typer.Argument(help="The story's title.")],
    type_: Annotated[
        str, typer.Option("--type", "-t", help="feature, bug, chore or spike.")
    ] = "feature",
    label: Annotated[
        list[str] | None, typer.Option("--label", "-l", help="A label (repeatable).")
    ] = None,
    priority: Annotated[
        int | None, typer.Option("--priority", "-p", help="Lower runs first.", min=0)
    ] = None,
    json: JsonOption = False,
) -> None:
    """Add a story to the backlog and print its id on stdout."""
    out = terminal(json)
    if not title.strip():
        raise UsageError("the title is empty")
    if type_ not in STORY_TYPES:
        raise UsageError(
            f"unknown story type '{type_}'", hint="use one of " + ", ".join(STORY_TYPES)
        )
    store = open_store()
    story = store.add(title.strip(), type=type_, labels=tuple(label or ()), priority=priority)
    if json:
        out.json(story.to_json())
    else:
        out.success(f"Added {story.id}: {story.title}")
        out.result(story.id)


def register(app: typer.Typer) -> None:
    app.command("add")(add)
