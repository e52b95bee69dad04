"""`ai-sdlc run [story] [--auto] [--step PHASE] [--dry-run]`: the product's main job."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ai_sdlc.cli.common import JsonOption, open_store, terminal
from ai_sdlc.cli.progress import Progress
from ai_sdlc.errors import ExitCode, StoryBlockedError, UsageError
from ai_sdlc.providers.base import Phase
from ai_sdlc.workflow.session import DryRunPlan, Session, plan_dry_run


def run(
    story_ref: Annotated[
        str | None,
        typer.Argument(help="Story id or slug. Without it: the next recommended action."),
    ] = None,
    auto: Annotated[
        bool, typer.Option("--auto", help="Process every actionable story by priority.")
    ] = False,
    step: Annotated[
        Phase | None,
        typer.Option("--step", help="Run only this phase of the story.", case_sensitive=False),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; change nothing at all.")
    ] = False,
    provider: Annotated[
        str | None,
        typer.Option("--provider", help="scripted, dry-run, openai, anthropic, claude, command."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Take a story through refine → research → plan → implement → review → done."""
    out = terminal(json)
    if auto and story_ref:
        raise UsageError("give a story or --auto, not both")
    if step and not story_ref:
        raise UsageError("--step needs a story")
    store = open_store()
    story_id = store.resolve(story_ref) if story_ref else None

    if dry_run or provider == "dry-run":
        plan = plan_dry_run(
            store, story_id=story_id, auto=auto, step=step, show_prompts=provider == "dry-run"
        )
        _render_plan(out, plan, json)
        return

    progress = Progress(out)
    session = Session.open(store, provider_name=provider, emit=progress.event)
    if session.notice:
        out.warn(session.notice)
    outcomes = session.run(story_id=story_id, auto=auto, step=step)
    blocked = [o for o in outcomes if o.result == "blocked"]
    if json:
        out.ndjson({"event": "run_finished", "outcomes": [o.__dict__ for o in outcomes]})
    for o in outcomes:
        if o.result == "done":
            out.success(f"{o.story_id}: done")
        elif o.result == "waiting":
            out.info(f"{o.story_id}: {o.reason}")
        elif o.result == "blocked":
            out.error(o.reason)
        elif o.result == "idle":
            out.info(f"{o.story_id}: nothing to do ({o.reason})")
        else:
            out.info(f"{o.story_id}: {o.reason}")
    if not outcomes:
        out.info("Nothing to run: no story has an actionable next step.")
    if blocked:
        raise typer.Exit(int(ExitCode.BLOCKED))


def _render_plan(out: Any, plan: DryRunPlan, json: bool) -> None:
    if json:
        out.json(plan.to_json())
        return
    out.line("Dry run: nothing will be changed.", style="bold")
    if not plan.stories:
        out.line("Nothing to run: no story has an actionable next step.")
    for item in plan.stories:
        line = f"{item.story_id}: " + (" → ".join(item.phases) if item.phases else item.reason)
        out.line(line)
        if item.phases and item.reason:
            out.line(f"  ({item.reason})")
        for prompt in item.prompts:
            out.line(prompt)


def register(app: typer.Typer) -> None:
    app.command("run")(run)


__all__ = ["StoryBlockedError", "register", "run"]
