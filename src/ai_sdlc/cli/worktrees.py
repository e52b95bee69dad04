"""`ai-sdlc worktrees [--json]` and `ai-sdlc worktrees prune [--force]`: the story worktrees."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.config import load_config
from ai_sdlc.git import stacking
from ai_sdlc.git.inventory import WorktreeState, story_worktrees
from ai_sdlc.git.inventory import prune as prune_worktrees
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.siblings import Collision, story_collisions
from ai_sdlc.store import StoryStore

worktrees_app = typer.Typer(
    name="worktrees",
    help="List the story worktrees (status, branch, dirty, ahead/behind), or prune.",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
)


def _status_lookup(store: StoryStore) -> dict[str, str]:
    from ai_sdlc.store.archive import archived_numbers
    from ai_sdlc.store.ids import format_id

    archived = {format_id(n): "archived" for n in archived_numbers(store)}  # `ai-sdlc archive`
    return {**archived, **{story.id: story.status for story in store.list()}}


def _states(store: StoryStore) -> list[WorktreeState]:
    settings = GitSettings.from_config(load_config(store.root))
    statuses = _status_lookup(store)
    deps = {story.id: stacking.dependencies(story) for story in store.list()}
    return story_worktrees(
        store.root,
        settings,
        lambda sid: statuses.get(sid, "unknown"),
        lambda sid: deps.get(sid, []),
    )


def _held(store: StoryStore) -> dict[str, Collision]:
    """The stories that cannot get a worktree: their unmerged dependencies conflict."""
    settings = GitSettings.from_config(load_config(store.root))
    found = story_collisions(store.root, settings, store.list())
    return {sid: c for sid, c in found.items() if c.between}


@worktrees_app.callback()
def worktrees(ctx: typer.Context, json: JsonOption = False) -> None:
    """List the story worktrees with their story status, branch, dirty/clean, ahead/behind."""
    if ctx.invoked_subcommand is not None:
        return
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    states = _states(store)
    held = _held(store)
    if json:
        out.json(
            {
                "worktrees": [s.to_json() for s in states],
                "dependency_conflicts": [
                    {"story": sid, "dependencies": c.between, "files": c.files}
                    for sid, c in held.items()
                ],
            }
        )
        return
    for sid, clash in held.items():  # no worktree, and none can be made until they merge
        out.warn(f"{sid} has no worktree: {clash.text(sid)}")
    if not states:
        out.info("No story worktrees ('ai-sdlc run <id>' creates one per story).")
        return
    rows = [("STORY", "STATUS", "STATE", "+AHEAD/-BEHIND", "BRANCH", "PATH")]
    for wt in states:
        counts = (
            f"+{wt.ahead}/-{wt.behind}" if wt.ahead is not None and wt.behind is not None else "?"
        )
        story = f"{wt.story} ← {wt.stacked_on}" if wt.stacked_on else wt.story
        state = "conflicts" if wt.conflicts else wt.state
        where = str(wt.path)
        if wt.conflicts:
            where += f"  (conflicts in {', '.join(wt.conflicts)}: ai-sdlc run {wt.story})"
        rows.append((story, wt.status, state, counts, wt.branch or "-", where))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.data("  ".join([*cells, row[-1]]))


@worktrees_app.command("prune")
def prune(
    ctx: typer.Context,
    force: Annotated[
        bool,
        typer.Option("--force", help="Also remove worktrees with uncommitted work (it is lost)."),
    ] = False,
    json: JsonOption = False,
) -> None:
    """Remove the worktrees of done or abandoned stories (their branches stay)."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    pool = GitSettings.from_config(load_config(store.root)).worktrees_root(store.root)
    result = prune_worktrees(store.root, _states(store), force=force, pool=pool)
    if json:
        out.json({"removed": result.removed, "kept": result.kept})
    else:
        for path in result.removed:
            out.result(f"Removed {path}")
        for path, why in result.kept.items():
            out.warn(f"Kept {path}: {why}")
        if not result.removed and not result.kept:
            out.info("Nothing to prune: no worktree of a done or abandoned story.")


@worktrees_app.command("venv")
def venv(
    ctx: typer.Context,
    base: Annotated[
        Path | None,
        typer.Option(
            "--base",
            help="The project's venv to layer on (default: .venv, venv or env in the project).",
        ),
    ] = None,
) -> None:
    """Build this story worktree's own .venv (what `worktree.setup` runs for Python projects):
    layered on the project's venv when the dependency files match, else a full venv."""
    app = Application.of(ctx)
    from ai_sdlc.errors import UsageError
    from ai_sdlc.worktree_env.pyvenv import build
    from ai_sdlc.worktree_env.setup import PROJECT_VAR, WORKTREE_VAR

    out = app.terminal(False)
    project = os.environ.get(PROJECT_VAR)
    if not project:
        raise UsageError(
            f"{PROJECT_VAR} is not set: this command runs as a worktree.setup command",
            hint='set worktree.setup: ["ai-sdlc worktrees venv"]; ai-sdlc runs it in each '
            "new story worktree",
        )
    worktree = Path(os.environ.get(WORKTREE_VAR) or os.getcwd())
    out.info(build(worktree, Path(project), base=base))


def register(app: typer.Typer) -> None:
    app.add_typer(worktrees_app, name="worktrees")
