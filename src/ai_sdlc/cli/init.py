"""`ai-sdlc init`: create .ai-sdlc/ (stories folder, commented config, .gitignore); idempotent."""

from __future__ import annotations

import typer

from ai_sdlc.cli.common import open_store, terminal
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.config import write_default_config


def init(json: JsonOption = False) -> None:
    """Create .ai-sdlc/ in the project folder (safe to run again)."""
    out = terminal(json)
    store = open_store(must_exist=False)
    created = store.init()
    created_config = write_default_config(store.root)
    if json:
        out.json({"project": str(store.root), "created": created or created_config})
    elif created or created_config:
        out.success(f"Initialised ai-sdlc in {store.ai_dir}")
        out.info('Next: ai-sdlc add "Your first story"')
    else:
        out.info(f"Already initialised: {store.ai_dir}")


def register(app: typer.Typer) -> None:
    app.command("init")(init)
