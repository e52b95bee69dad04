"""`ai-sdlc watch [--once] [--poll SECONDS] [--jobs N]`: run stories as they become ready
(the core is `ai_sdlc.workflow.watch`)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.common import checked_provider
from ai_sdlc.cli.completion import provider_names
from ai_sdlc.cli.options import JobsOption, JsonOption, NoSandboxOption, NoWorktreeOption
from ai_sdlc.cli.progress import Progress, outcome_line
from ai_sdlc.cli.runs import continue_command
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import ExitCode, RunHaltedError, UsageError
from ai_sdlc.workflow.runs.idle import Idle
from ai_sdlc.workflow.runs.multirun import RunOutcome
from ai_sdlc.workflow.session import Session
from ai_sdlc.workflow.watch import (
    EventChanges,
    PollChanges,
    StopFlag,
    Watch,
    WatchResult,
)


def watch(
    ctx: typer.Context,
    once: Annotated[
        bool,
        typer.Option("--once", help="Run what is ready now, then exit (for cron and CI)."),
    ] = False,
    poll: Annotated[
        float | None,
        typer.Option(
            "--poll",
            min=0.05,
            help="Look for changes every SECONDS instead of filesystem events.",
            metavar="SECONDS",
        ),
    ] = None,
    jobs: JobsOption = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="scripted, openai, anthropic, claude, command.",
            autocompletion=provider_names,
        ),
    ] = None,
    no_worktree: NoWorktreeOption = False,
    no_sandbox: NoSandboxOption = False,
    json: JsonOption = False,
) -> None:
    """Run stories as they become ready: a foreground daemon, or once with --once."""
    app = Application.of(ctx)
    out = app.terminal(json)
    checked_provider(provider)
    if provider is not None and provider.strip().lower() == "dry-run":
        raise UsageError("watch runs stories; for a plan use 'ai-sdlc run --auto --dry-run'")
    store = app.store()
    _check_sandbox(store, no_sandbox)
    progress = Progress(out)
    notices: set[str] = set()

    def run_stories(ids: list[str]) -> RunOutcome | None:
        session = Session.open(
            store,
            provider_name=provider,
            emit=progress.event,
            no_worktree=no_worktree,
            no_sandbox=no_sandbox,
        )
        for notice in (session.notice or "").splitlines():
            if notice not in notices:
                notices.add(notice)
                out.warn(notice)
        try:
            return session.run_many(story_ids=ids, jobs=jobs)
        finally:
            progress.close()
            session.close()  # its temp folders go with each run, not when the watch ends

    stop = StopFlag()
    stories_dir = store.stories_dir
    interval = poll if poll is not None else 2.0
    typed = app.config().typed()
    follow = typed.pr.loop or typed.git.auto_merge
    core = Watch(
        store,
        run=run_stories,
        emit=lambda event: _show(out, event),
        changes=None if poll is not None else EventChanges(stories_dir),
        fallback=lambda: PollChanges(stories_dir, interval),
        stop=stop,
        pr_interval=typed.pr.poll_seconds if follow else None,
    )
    with _signals(stop):
        result = core.once() if once else core.serve()
    idle = None
    if once and not result.runs and result.stopped_by is None:
        from ai_sdlc.workflow.runs.idle import idle_of

        idle = idle_of(store, app.config(), ready_only=True)
    _finish(out, store, result, once=once, idle=idle)


def _check_sandbox(store: Any, no_sandbox: bool) -> None:
    """Refuse to start watching where no sandbox can confine the runs (sandbox.required)."""
    from ai_sdlc.config import load_config
    from ai_sdlc.sandbox import Sandbox

    sandbox = Sandbox.from_config(load_config(store.root), root=store.root)
    sandbox.check_unattended(no_sandbox=no_sandbox, command="ai-sdlc watch")


def _finish(
    out: Terminal, store: Any, result: WatchResult, *, once: bool, idle: Idle | None = None
) -> None:
    root = store.root
    if out.json_mode:  # the result as the last event (before an error event, if any)
        out.ndjson(_finished_event(result, idle))
    if result.stopped_by == "SIGTERM":
        out.info("Watch stopped (SIGTERM); finished work is kept.")
        return
    if result.stopped_by is not None:
        out.alert("Watch interrupted; finished work is kept.")
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if not once:
        return
    if idle is not None:  # nothing was ready: why, and exit 5 when a story is blocked
        from ai_sdlc.cli.run_command import render_idle

        render_idle(out, idle, "Nothing ready to run")
        if idle.exit_code:
            raise typer.Exit(idle.exit_code)
    if result.blocked:
        raise typer.Exit(int(ExitCode.BLOCKED))
    if result.halted:
        from ai_sdlc.cli.run_command import halted_hint

        last = result.runs[-1].state
        why = last.stop_reason.message if last.stop_reason else "a stop condition"
        raise RunHaltedError(
            f"run {last.run_id} halted: {why}",
            hint=halted_hint(why, continue_command(root, last.run_id)),
        )
    from ai_sdlc.cli.run_command import in_review_exit

    code = in_review_exit(store, [o for run in result.runs for o in run.outcomes])
    if code:  # a story waits in review (its PR waits on people): not done
        raise typer.Exit(code)


def _finished_event(result: WatchResult, idle: Idle | None = None) -> dict[str, Any]:
    """`watch --json`'s last event: every run it started and how the watch ended (`idle`:
    why nothing was ready, for `--once`)."""
    return {
        "event": "watch_finished",
        "runs": [
            {
                "run_id": r.state.run_id,
                "status": r.state.run_status,
                "outcomes": [o.to_json() for o in r.outcomes],
            }
            for r in result.runs
        ],
        "blocked": result.blocked,
        "halted": result.halted,
        "stopped_by": result.stopped_by,
        "idle": idle.to_json("Nothing ready to run") if idle is not None else None,
    }


def _show(out: Terminal, event: dict[str, Any]) -> None:
    if out.json_mode:
        out.ndjson(event)
        return
    name = event.get("event")
    if name == "watch_started":
        how = "filesystem events" if event["source"] == "watchfiles" else "polling"
        out.info(f"Watching for ready stories ({how}); Ctrl-C to stop.")
    elif name == "watch_fallback":
        out.warn(f"file watcher unavailable ({event['reason']}): polling instead")
    elif name == "watch_story_unreadable":
        out.warn(f"skipped an unreadable story: {event['message']}")
    elif name == "watch_waiting":
        _show_waiting(out, event)
    elif name == "watch_run":
        out.info("Running " + ", ".join(event["stories"]))
    elif name == "watch_busy":
        out.warn(f"{event['message']}; trying again when the stories change")
    elif name == "watch_run_failed":
        out.error(f"run of {', '.join(event['stories'])} refused: {event['message']}")
    elif name == "watch_run_finished":
        for o in event["outcomes"]:
            text = outcome_line(o["story_id"], o["result"], o["reason"])
            out.result(text, style="green" if o["result"] == "done" else "yellow")
        if event.get("stop_reason"):
            out.warn(f"run {event['run_id']} {event['status']}: {event['stop_reason']}")


def _show_waiting(out: Terminal, event: dict[str, Any]) -> None:
    """What the watch waits for: each story held back by a dependency, then the rest."""
    for held in event["held"]:
        out.info(f"waiting for {held['on']} ({held['status']}) before {held['story']}")
    waiting = []
    if event["backlog"]:
        count = event["backlog"]
        waiting.append(f"{count} {'story' if count == 1 else 'stories'} in backlog")
    if event["blocked"]:
        waiting.append(f"{event['blocked']} blocked")
    when = (
        f"next check in {event['next_check']:g} s"
        if event.get("next_check") is not None
        else "looking again when a story file changes"
    )
    out.info("waiting: " + ", ".join([*waiting, "none ready"]) + f"; {when}")


@contextmanager
def _signals(stop: StopFlag) -> Iterator[None]:
    """SIGINT and SIGTERM stop the watch the way Ctrl-C stops a run (KeyboardInterrupt),
    remembering which one it was (exit 130 or 0)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        stop.signal = signal.Signals(signum).name
        raise KeyboardInterrupt

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def register(app: typer.Typer) -> None:
    app.command("watch")(watch)
