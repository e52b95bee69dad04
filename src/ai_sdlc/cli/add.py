"""`ai-sdlc add "title"`: create a story with an atomically allocated id; prints the id.

`ai-sdlc add --from FILE.md` (or a folder of them) brings in markdown written elsewhere: every
document is read and checked first, and stories are created only when all of them are good."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import UsageError

STORY_TYPES = ("feature", "bug", "chore", "spike")


def add(
    ctx: typer.Context,
    title: Annotated[
        str | None, typer.Argument(help="The story's title.", show_default=False)
    ] = None,
    type_: Annotated[
        str, typer.Option("--type", "-t", help="feature, bug, chore or spike.")
    ] = "feature",
    label: Annotated[
        list[str] | None, typer.Option("--label", "-l", help="A label (repeatable).")
    ] = None,
    priority: Annotated[
        int | None, typer.Option("--priority", "-p", help="Lower runs first.", min=0)
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A markdown file (YAML, TOML or JSON frontmatter), or a folder: one story per "
            "*.md file.",
            show_default=False,
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Add a story to the backlog and print its id on stdout."""
    app = Application.of(ctx)
    out = app.terminal(json)
    if type_ not in STORY_TYPES:
        raise UsageError(
            f"unknown story type '{type_}'", hint="use one of " + ", ".join(STORY_TYPES)
        )
    if source is not None:
        if title is not None:
            raise UsageError("give a title or --from, not both")
        if any(not lb.strip() or not lb.isprintable() for lb in label or []):
            raise UsageError("labels are short one-line words")
        _add_from(app, out, source, type_=type_, labels=label or [], priority=priority, json=json)
        return
    if title is None or not title.strip():
        raise UsageError(
            "the title is empty", hint='ai-sdlc add "Title", or ai-sdlc add --from FILE.md'
        )
    store = app.store()
    story = store.add(title.strip(), type=type_, labels=tuple(label or ()), priority=priority)
    if json:
        out.json(story.to_json())
    else:
        out.success(f"Added {story.id}: {story.title}")
        out.result(story.id)


def _add_from(
    app: Application,
    out: Terminal,
    source: Path,
    *,
    type_: str,
    labels: list[str],
    priority: int | None,
    json: bool,
) -> None:
    """Validate every document, then create one story each (in file-name order)."""
    from ai_sdlc.store.foreign import documents, read_draft

    store = app.store()
    drafts = [read_draft(path) for path in documents(source)]
    created = []
    for draft in drafts:
        story = store.add(
            draft.title,
            type=draft.type if type_ == "feature" else type_,
            labels=(*draft.labels, *(lb for lb in labels if lb not in draft.labels)),
            priority=draft.priority if draft.priority is not None else priority,
            body=draft.body,
            status=draft.status,
        )
        created.append((draft, story))
        if not json:
            out.success(f"Added {story.id}: {story.title}  (from {draft.path.name})")
            if draft.ignored:
                out.info(f"  not mapped: {', '.join(draft.ignored)} (kept out of the story)")
    if json:
        out.json(
            {
                "stories": [
                    {**story.to_json(), "source": str(draft.path), "ignored": list(draft.ignored)}
                    for draft, story in created
                ]
            }
        )
    else:
        for _, story in created:
            out.result(story.id)


def register(app: typer.Typer) -> None:
    app.command("add")(add)
