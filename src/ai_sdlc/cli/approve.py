"""`ai-sdlc approve <id>`: pass the stage gate a story is waiting at (`gates.*` in config)."""

from __future__ import annotations

import typer

from ai_sdlc.cli.common import JsonOption, open_store, terminal
from ai_sdlc.cli.show import StoryArg
from ai_sdlc.config import load_config
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.workflow.assess import pending_gate
from ai_sdlc.workflow.events import append_event, iso, utc_now


def approve(story_ref: StoryArg, json: JsonOption = False) -> None:
    """Approve the gate the story is waiting at, so `run` continues."""
    out = terminal(json)
    store = open_store()
    story_id = store.resolve(story_ref)
    gates = load_config(store.root).section("gates")
    with store.edit(story_id) as story:
        gate = pending_gate(story.frontmatter, gates)
        if gate is None:
            raise AiSdlcError(
                f"{story_id} is not waiting at a gate",
                hint="gates are set in config: gates.before_implementation, gates.before_done",
            )
        approved = list(story.frontmatter.get("approved_gates") or [])
        story.frontmatter["approved_gates"] = [*approved, gate]
        folder = story.folder
    append_event(folder, {"time": iso(utc_now()), "action": "approve", "outcome": gate})
    if json:
        out.json({"id": story_id, "approved": gate})
    else:
        out.success(f"Approved {story_id} at gate {gate}. Continue with: ai-sdlc run {story_id}")


def register(app: typer.Typer) -> None:
    app.command("approve")(approve)
