"""`ai-sdlc unblock <id> [--reset-retries]`: a human clears a guardrail's block."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.show import StoryArg
from ai_sdlc.workflow.state.transitions import StoryState


def unblock(
    ctx: typer.Context,
    story_ref: StoryArg,
    reset_retries: Annotated[
        bool,
        typer.Option(
            "--reset-retries",
            help="Also set every recovery counter and the breakdown to 0 (the only way to "
            "lower them). Without it the counters stay, so the next failed attempt counts on "
            "top and blocks again at the limit.",
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """Clear a story's block; it returns to the first phase it has not passed."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    story_id = store.resolve(story_ref)
    store.get(story_id)  # a bad story file fails here (exit 3) before any edit
    limit = app.config().typed().limits.global_recovery
    result = StoryState(store, limit=limit).unblock(story_id, reset_retries=reset_retries)
    if json:
        out.json(result)
        return
    if result["was_blocked"]:
        out.success(f"Unblocked {story_id} (now {result['status']}).")
    else:
        out.result(f"{story_id} was not blocked.")
    if reset_retries:
        out.info("Recovery counters reset to 0.")
    elif result["total_recovery_attempts"]:
        out.info(
            f"Recovery counter stays at {result['total_recovery_attempts']}; "
            "use --reset-retries to start from 0."
        )


def register(app: typer.Typer) -> None:
    app.command("unblock")(unblock)
