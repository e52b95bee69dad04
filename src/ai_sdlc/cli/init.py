"""`ai-sdlc init`: create .ai-sdlc/ (stories folder, commented config, .gitignore); idempotent."""

from __future__ import annotations

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.config import write_default_config
from ai_sdlc.workflow.state.anchor import forget_project
from ai_sdlc.worktree_env.propose import propose


def init(ctx: typer.Context, json: JsonOption = False) -> None:
    """Create .ai-sdlc/ in the project folder (safe to run again)."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store(must_exist=False)
    fresh = not store.is_initialized()
    created = store.init()
    if fresh:  # nothing of an earlier project at this path applies to this one's stories
        forget_project(store.root)
    proposal = propose(store.root)
    created_config = write_default_config(store.root, setup_line=proposal.config_line())
    proposed = proposal.commands if created_config else []
    if json:
        out.json(
            {
                "project": str(store.root),
                "created": created or created_config,
                "worktree_setup": proposed,
            }
        )
    elif created or created_config:
        out.success(f"Initialised ai-sdlc in {store.ai_dir}")
        if proposed:
            out.info(
                f"worktree.setup: {', '.join(proposed)} (for {', '.join(proposal.found)}): each "
                "story worktree gets its own environment; edit .ai-sdlc/config.yaml to change it"
            )
        out.info('Next: ai-sdlc add "Your first story"')
    else:
        out.info(f"Already initialised: {store.ai_dir}")


def register(app: typer.Typer) -> None:
    app.command("init")(init)
