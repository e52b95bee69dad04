"""`ai-sdlc init`: create .ai-sdlc/ (stories folder, commented config, .gitignore); idempotent.

Inside a git repository the project goes at the repository's top, wherever `init` is run from
(a second project in a subfolder would hide the real one from every command run below it);
`--here` keeps it in the current folder, `-C DIR` puts it in DIR."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.config import load_config, write_default_config
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.git.repo import toplevel
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.anchor import forget_project
from ai_sdlc.worktree_env.propose import propose


def init(
    ctx: typer.Context,
    here: Annotated[
        bool,
        typer.Option(
            "--here", help="Create it in the current folder, not at the git repository's top."
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """Create .ai-sdlc/ in the project folder (safe to run again)."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store(must_exist=False)
    top = None if here or app.project_source == "option" else toplevel(store.root)
    if top is not None and top != store.root.resolve():
        store = StoryStore(top)
        if not json:
            out.info(f"{Path.cwd()} is inside the git repository {top}: the project goes there")
            out.info("(use --here for a separate project in this folder)")
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
                "worktree_setup_notes": proposal.notes if created_config else [],
            }
        )
    elif created or created_config:
        out.success(f"Initialised ai-sdlc in {store.ai_dir}")
        for note in proposal.notes if created_config else []:
            out.info(f"worktree.setup: {note}")
        if proposed:
            out.info(
                f"worktree.setup: {', '.join(proposed)} (for {', '.join(proposal.found)}): each "
                "story worktree gets its own environment; edit .ai-sdlc/config.yaml to change it"
            )
        elif created_config:  # say why the file holds `setup: []`
            out.info(
                "worktree.setup: [] (no lock file or manifest found here, so nothing to install "
                "in a story worktree); set it when the tests need one, e.g. "
                "`ai-sdlc config worktree.setup '[\"npm ci\"]'`"
            )
        out.info(_next_step(store.root))
    else:
        out.result(f"Already initialised: {store.ai_dir}")


def _next_step(root: Path) -> str:
    """What to do next. A run refuses to start (exit 3) until verification is configured, so
    a project without it is told that first: `add` then `run` would lead into that wall."""
    try:
        verify = load_config(root).typed().verify
    except AiSdlcError:  # a broken user config file is said by the next command that needs it
        verify = None
    if verify is not None and not (verify.build or verify.test or verify.none):
        return (
            "Next: say how the project is tested (ai-sdlc config verify.test 'pytest -q'), "
            'then ai-sdlc add "Your first story"'
        )
    return 'Next: ai-sdlc add "Your first story"'


def register(app: typer.Typer) -> None:
    app.command("init")(init)
