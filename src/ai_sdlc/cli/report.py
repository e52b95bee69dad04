"""`ai-sdlc report [RUN_ID] [--html out.html] [--json]`: a multi-story run as a picture (one
self-contained HTML file) or as data (the same report as JSON on stdout)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.reporting.data import report_for
from ai_sdlc.reporting.html import render, write_html
from ai_sdlc.workflow.runs.runstate import RunNotFoundError, RunRepository, check_run_id
from ai_sdlc.workflow.runs.stopconditions import StopConditions
from ai_sdlc.workflow.state.events import utc_now


def report(
    ctx: typer.Context,
    run_id: Annotated[
        str | None, typer.Argument(help="A run id from 'ai-sdlc runs' (default: the latest run).")
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Write the report to this HTML file (self-contained: opens offline).",
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Report a multi-story run: timeline, recovery budgets, stop conditions, cost (HTML, JSON).

    Without --html or --json, a short summary is printed. The JSON is the data the HTML draws
    (its shape is described in the README, "Run report")."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    repo = RunRepository(store.ai_dir)
    if run_id is None:
        state = repo.latest()
        if state is None:
            raise RunNotFoundError(
                f"no multi-story runs in {repo.root}",
                hint="'ai-sdlc run --auto' starts one; 'ai-sdlc runs' lists them",
            )
    else:
        state = repo.load(check_run_id(run_id))
    config = app.config()
    data = report_for(
        store.ai_dir,
        store,
        state,
        global_limit=int(config.get("limits.global_recovery")),
        conditions=StopConditions.from_config(config),
        now=utc_now(),
    )
    if html is not None:
        target = write_html(html, render(data))
        out.info(f"Wrote the report of run {state.run_id} to {target}")
    if json:
        out.json(data)
    elif html is None:
        _summary(out, data)


def _summary(out: Terminal, data: dict[str, object]) -> None:
    run = data["run"]
    assert isinstance(run, dict)
    span = data["span"]
    assert isinstance(span, dict)
    out.line(
        f"Run {run['run_id']} · {run['mode']} · {run['run_status']} · "
        f"{span['seconds']} s from first to last event",
        style="bold",
    )
    stories = data["stories"]
    assert isinstance(stories, list)
    for s in stories:
        budget, usage = s["budget"], s["usage"]
        kinds = ", ".join(f"{k} {n}" for k, n in s["recoveries_by_kind"].items()) or "none"
        out.line(
            f"  {s['id']}  {s['status']:<11} phases {len(s['phases'])} · recoveries in run: "
            f"{kinds} · budget {budget['total']}/{budget['limit']} · tokens "
            f"{usage['input_tokens'] + usage['output_tokens']} · events {len(s['events'])}"
        )
    out.info("'ai-sdlc report --html report.html' draws it; '--json' gives the data.")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
