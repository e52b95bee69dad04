"""`ai-sdlc approve <id>`: pass the stage gate a story is waiting at (`gates.*` in config)."""

from __future__ import annotations

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.show import StoryArg
from ai_sdlc.workflow.state.transitions import StoryState


def approve(ctx: typer.Context, story_ref: StoryArg, json: JsonOption = False) -> None:
    """Approve the gate the story is waiting at, so `run` continues."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    story_id = store.resolve(story_ref)
    config = app.config()
    owner = StoryState(store, limit=config.typed().limits.global_recovery)
    gate = owner.approve(story_id, config.section("gates"))
    if json:
        out.json({"id": story_id, "approved": gate})
    else:
        out.success(f"Approved {story_id} at gate {gate}. Continue with: ai-sdlc run {story_id}")


def register(app: typer.Typer) -> None:
    app.command("approve")(approve)
