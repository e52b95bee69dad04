"""`ai-sdlc report [RUN_ID | STORY] [--html out.html] [--json]`: a run (multi-story or single-story)
as a picture (one self-contained HTML file) or as data (the same report as JSON on stdout)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.completion import story_ids
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.reporting.data import report_for
from ai_sdlc.reporting.html import render, write_html
from ai_sdlc.reporting.select import choose_run
from ai_sdlc.workflow.runs.stopconditions import StopConditions
from ai_sdlc.workflow.state.events import utc_now


def report(
    ctx: typer.Context,
    which: Annotated[
        str | None,
        typer.Argument(
            metavar="[RUN_ID|STORY]",
            help="A run id, or a story (its latest run); default: the latest run of any kind.",
            autocompletion=story_ids,
        ),
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
    """Report a run (any kind): timeline, recovery budgets, stop conditions, cost (HTML, JSON).

    Any run: `ai-sdlc run S-0007` and `run --auto` alike. Without --html or --json, a short
    summary is printed. The JSON is the data the HTML draws (its shape: docs/runs.md, "Run
    report"). Data goes to stdout (the summary, the JSON, the HTML file's path)."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    state = choose_run(store, which)
    config = app.config()
    data = report_for(
        store.ai_dir,
        store,
        state,
        global_limit=config.typed().limits.global_recovery,
        conditions=StopConditions.from_config(config),
        now=utc_now(),
    )
    if html is not None:
        target = write_html(html, render(data))
        out.info(f"Wrote the report of run {state.run_id} to {target}")
        if not json:  # the path is the result (stdout); with --json the data is
            out.result(str(target))
    if json:
        out.json(data)
    elif html is None:
        _summary(out, data)


def _summary(out: Terminal, data: dict[str, object]) -> None:
    run = data["run"]
    assert isinstance(run, dict)
    span = data["span"]
    assert isinstance(span, dict)
    out.data(
        f"Run {run['run_id']} · {run['mode']} · {run['run_status']} · "
        f"{span['seconds']} s from first to last event"
    )
    stories = data["stories"]
    assert isinstance(stories, list)
    for s in stories:
        budget, usage = s["budget"], s["usage"]
        kinds = ", ".join(f"{k} {n}" for k, n in s["recoveries_by_kind"].items()) or "none"
        status = f"{s['status']} (unverified)" if s.get("unverified") else s["status"]
        out.data(
            f"  {s['id']}  {status:<11} phases {len(s['phases'])} · recoveries in run: "
            f"{kinds} · budget {budget['total']}/{budget['limit']} · tokens "
            f"{usage['input_tokens'] + usage['output_tokens']} · events {len(s['events'])}"
        )
    out.info("'ai-sdlc report --html report.html' draws it; '--json' gives the data.")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
