"""`ai-sdlc runs [--json]` and `ai-sdlc runs show <run_id> [--json]`: multi-story runs, their
state, why they stopped and how to continue them. Also the run summary `run` prints."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import BusyError
from ai_sdlc.wording import count
from ai_sdlc.workflow.runs.loops import FailureLoop
from ai_sdlc.workflow.runs.runstate import RUNNING, RunRepository, RunState, check_run_id
from ai_sdlc.workflow.session import MULTI_RUN_LOCK
from ai_sdlc.workflow.state.runlock import run_lock

runs_app = typer.Typer(
    name="runs",
    help="List multi-story runs (oldest first), or show one.",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
)


def continue_command(root: Path, run_id: str) -> str:
    """The exact command that resumes the run of the project at `root` (with --project when not
    run from there)."""
    args = ["ai-sdlc"]
    if root != Path.cwd().resolve():
        args += ["--project", str(root)]
    return shlex.join([*args, "run", "--resume", run_id])


def statistics_line(stats: dict[str, Any]) -> str:
    """The run's figures over all its segments (a state saved before `blocked` existed
    counted its blocked stories as `rejected`)."""
    if not stats:
        return "no statistics yet"
    blocked = stats.get("blocked", stats.get("rejected", 0))
    attempts = count(stats["total_attempts"], "agent attempt")
    if "implementation_attempts" in stats:
        implementing = count(stats["implementation_attempts"], "implementation attempt")
        attempts = f"{implementing} ({attempts})"
    return (
        f"{count(stats['total_stories'], 'story')} · {stats['attempted']} attempted · "
        f"{stats['approved']} done · {blocked} blocked · "
        f"{stats['failed']} failed · {stats['waiting']} waiting · "
        f"retry rate {stats['retry_rate']:.2f} · block rate {stats['reject_rate']:.2f} · "
        f"{count(stats['consecutive_fails'], 'consecutive fail')} · {attempts}"
    )


def render_loop(
    out: Terminal, loop: FailureLoop, diagnostic: Path | None, *, alert: bool = False
) -> None:
    """The failure loop: data for `runs show`, an `alert` (stderr) beside `run`'s error."""
    say = out.alert if alert else out.data
    say(loop.message, style="bold red")
    say(f"  loop type:  {loop.loop_type}")
    say(f"  stories:    {', '.join(loop.stories)}")
    say(f"  last phase: {loop.last_phase or 'none'}")
    say(f"  reason:     {loop.reason}")
    if loop.output_tail:
        say("  failing output (tail):")
        for line in loop.output_tail.splitlines():
            say(f"    {line}")
    if diagnostic is not None:
        say(f"  diagnostic: {diagnostic}")


def render_state(out: Terminal, root: Path, state: RunState, *, active: bool) -> None:
    status = state.run_status + (" (process gone: resumable)" if _stale(state, active) else "")
    out.data(f"Run {state.run_id} · {state.mode} · {status}", style="bold")
    out.data(
        f"  started {state.started_at}"
        + (f", ended {state.finished_at}" if state.finished_at else "")
        + f" · jobs {state.jobs} ({state.executor})"
        + (f" · epic {state.epic}" if state.epic else "")
    )
    out.data(f"  {statistics_line(state.statistics)}")
    if state.stop_reason:
        out.data(f"  stopped by {state.stop_reason.condition}: {state.stop_reason.message}")
    for s in state.stories:
        extra = ""
        if s.escalated:
            extra = f" · escalated: {s.escalation_reason}"
        elif s.reason and s.status not in ("done",):
            extra = f" · {s.reason}"
        if state.executor == "ray":  # the cluster nodes (and worker processes) that ran it
            nodes = dict.fromkeys(str(p.get("worker")) for p in s.phases if p.get("worker"))
            extra += f" · on {', '.join(nodes)}" if nodes else ""
        if s.deferred_by:
            extra += (
                f" · {'deferred' if s.status == 'pending' else 'was deferred'}: overlaps "
                f"{', '.join(s.deferred_by)} on {', '.join(s.deferred_paths)}"
            )
        out.data(
            f"  {s.story_id}  {s.status:<11} attempts {s.attempts} · retries {s.retries} · "
            f"bounces {s.bounces} · errors {s.errors}{extra}"
        )
    if state.resumable and not active:
        out.data(f"  continue with: {continue_command(root, state.run_id)}")


def _stale(state: RunState, active: bool) -> bool:
    return state.run_status == RUNNING and not active


def _live_run(ai_dir: Path, states: list[RunState]) -> str | None:
    """The run going on right now: another process holds the multi-run lock, and it is the
    newest run marked running (older ones so marked died without saying so)."""
    running = [s.run_id for s in states if s.run_status == RUNNING]
    if not running:
        return None
    try:
        with run_lock(ai_dir, MULTI_RUN_LOCK, what="a multi-story run"):
            return None
    except BusyError:
        return running[-1]


def _entry(state: RunState, live: str | None) -> dict[str, Any]:
    return {**state.to_json(), "active": state.run_id == live}


@runs_app.callback()
def runs(ctx: typer.Context, json: JsonOption = False) -> None:
    """List the runs of this project, oldest first."""
    if ctx.invoked_subcommand is not None:
        return
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    states = RunRepository(store.ai_dir).list()
    live = _live_run(store.ai_dir, states)
    if json:
        out.json({"runs": [_entry(s, live) for s in states]})
        return
    if not states:
        out.info("No multi-story runs yet ('ai-sdlc run --auto' starts one).")
        return
    for state in states:
        reason = f" · {state.stop_reason.condition}" if state.stop_reason else ""
        stats = state.statistics
        done = f"{stats.get('approved', 0)}/{stats.get('total_stories', len(state.stories))} done"
        stale = " (process gone)" if _stale(state, state.run_id == live) else ""
        out.data(f"{state.run_id}  {state.run_status}{stale}{reason} · {done} · {state.mode}")


@runs_app.command("show")
def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="A run id from 'ai-sdlc runs'.")],
    json: JsonOption = False,
) -> None:
    """Show one run: its state, statistics, stop reason and every story."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    repo = RunRepository(store.ai_dir)
    state = repo.load(check_run_id(run_id))
    live = _live_run(store.ai_dir, repo.list())
    if json:
        out.json(_entry(state, live))
        return
    render_state(out, store.root, state, active=state.run_id == live)


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
