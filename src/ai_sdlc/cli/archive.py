"""`ai-sdlc archive <id>`: take a story out of the active backlog.

Its folder moves to `.ai-sdlc/archive/<id>/` whole (file, artifacts, events): `status`, runs
and the graph no longer see it, `show <id>` still does and says it is archived, and its id is
never reused. Refused while a run holds the story, and while an active story depends on it."""

from __future__ import annotations

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.show import StoryArg
from ai_sdlc.workflow.state.transitions import StoryState


def archive(ctx: typer.Context, story_ref: StoryArg, json: JsonOption = False) -> None:
    """Move a story out of the backlog into .ai-sdlc/archive/ (show still finds it)."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    story_id = store.resolve(story_ref)
    store.get(story_id)  # a bad story file fails here (exit 3) before anything moves
    limit = app.config().typed().limits.global_recovery
    folder = StoryState(store, limit=limit).archive(story_id)
    if json:
        out.json({"id": story_id, "archived": str(folder)})
        return
    out.success(f"Archived {story_id}: {folder}")
    out.info(f"`ai-sdlc show {story_id}` still shows it; move the folder back to restore it.")


def register(app: typer.Typer) -> None:
    app.command("archive")(archive)
