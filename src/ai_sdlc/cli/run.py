"""`ai-sdlc run [story] [--auto | --batch ID... | --resume RUN_ID | --continue] [--step PHASE]
[--dry-run]`: the product's main job. This module declares its options for typer; the work is
`run_command.execute`."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.completion import provider_names, story_ids
from ai_sdlc.cli.options import JobsOption, JsonOption, NoSandboxOption, NoWorktreeOption
from ai_sdlc.cli.run_command import execute
from ai_sdlc.providers.base import Phase


def run(
    ctx: typer.Context,
    story_refs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="STORY",
            help="Story id or slug (several with --batch). Without it: the next recommended "
            "action.",
            show_default=False,
            autocompletion=story_ids,
        ),
    ] = None,
    auto: Annotated[
        bool, typer.Option("--auto", help="One run over every actionable story, by priority.")
    ] = False,
    batch: Annotated[
        bool, typer.Option("--batch", help="One run over the stories given, in that order.")
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="RUN_ID",
            help="Continue a stopped or interrupted run (see 'ai-sdlc runs').",
        ),
    ] = None,
    continue_: Annotated[
        bool, typer.Option("--continue", help="Continue the most recent run.")
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
        typer.Option(
            "--provider",
            help="scripted, dry-run, openai, anthropic, claude, command.",
            autocompletion=provider_names,
        ),
    ] = None,
    no_worktree: NoWorktreeOption = False,
    no_sandbox: NoSandboxOption = False,
    jobs: JobsOption = None,
    epic: Annotated[
        str | None,
        typer.Option("--epic", help="Only the stories of this epic (implies --auto)."),
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            "--executor",
            help="Where a multi-story run's stories run: local (worker processes) or ray "
            "(a Ray cluster; needs the ray extra). Default: run.executor.",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="The Ray cluster to use with --executor ray (default: run.ray.address; unset "
            "starts a local Ray instance).",
        ),
    ] = None,
    ignore_dependencies: Annotated[
        bool,
        typer.Option(
            "--ignore-dependencies",
            help="Run the story even though a dependency is not done.",
        ),
    ] = False,
    max_attempts: Annotated[
        int | None,
        typer.Option(
            "--max-attempts",
            min=1,
            help="For this run only: the run-wide cap on implementation attempts "
            "(default: run.stop_conditions.max_total_attempts).",
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Take a story through refine → research → plan → implement → review → done."""
    code = execute(
        Application.of(ctx),
        story_refs,
        auto=auto,
        batch=batch,
        resume=resume,
        continue_=continue_,
        step=step,
        dry_run=dry_run,
        provider=provider,
        no_worktree=no_worktree,
        no_sandbox=no_sandbox,
        jobs=jobs,
        epic=epic,
        executor=executor,
        ray_address=ray_address,
        json=json,
        ignore_dependencies=ignore_dependencies,
        max_attempts=max_attempts,
    )
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
