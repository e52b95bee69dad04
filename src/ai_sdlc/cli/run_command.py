"""What `ai-sdlc run` does: checks the options, runs, renders, returns the exit code.
`cli/run.py` declares the command for typer and calls this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.common import checked_provider
from ai_sdlc.cli.progress import Progress, outcome_line
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import ExitCode, RunHaltedError, UsageError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.dryrun import DryRunPlan, plan_dry_run
from ai_sdlc.workflow.engine.assess import IN_REVIEW
from ai_sdlc.workflow.engine.runner import StoryOutcome
from ai_sdlc.workflow.session import Session

if TYPE_CHECKING:  # a one-story run never imports the multi-story machinery
    from ai_sdlc.workflow.runs.idle import Idle
    from ai_sdlc.workflow.runs.multirun import RunOutcome


def execute(
    app: Application,
    story_refs: list[str] | None = None,
    *,
    auto: bool = False,
    batch: bool = False,
    resume: str | None = None,
    continue_: bool = False,
    step: Phase | None = None,
    dry_run: bool = False,
    provider: str | None = None,
    no_worktree: bool = False,
    no_sandbox: bool = False,
    jobs: int | None = None,
    epic: str | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    json: bool = False,
    ignore_dependencies: bool = False,
    max_attempts: int | None = None,
) -> int:
    """Run what the options ask for; the command's exit code (0, BLOCKED, IN_REVIEW,
    INTERRUPTED). Errors are raised as `AiSdlcError`s, which `main()` maps to their exit
    codes."""
    out = app.terminal(json)
    refs = list(story_refs or [])
    if epic is not None and not batch and not refs and resume is None and not continue_:
        auto = True
    if (jobs is not None or epic is not None) and not (auto or batch or resume or continue_):
        raise UsageError(
            "--jobs and --epic apply to a multi-story run",
            hint="use them with --auto, --batch ID..., --resume or --continue",
        )
    if executor is not None and executor not in ("local", "ray"):
        raise UsageError(f"unknown executor '{executor}'", hint="use local or ray")
    if (executor is not None or ray_address is not None) and not (
        auto or batch or resume or continue_
    ):
        raise UsageError(
            "--executor and --ray-address apply to a multi-story run",
            hint="use them with --auto, --batch ID..., --resume or --continue",
        )
    multi = auto or batch or resume or continue_
    if ignore_dependencies and (multi or not refs):
        raise UsageError(
            "--ignore-dependencies applies to one story: 'ai-sdlc run ID --ignore-dependencies'"
        )
    if max_attempts is not None and not multi:
        raise UsageError("--max-attempts applies to a multi-story run (--auto, --continue, ...)")
    if executor == "ray":
        from ai_sdlc.workflow.parallel.ray_executor import require_ray

        require_ray()
    if epic is not None and (resume is not None or continue_):
        raise UsageError("a resumed run keeps its stories: --epic cannot be changed")
    _check_options(
        refs, auto=auto, batch=batch, resume=resume, latest=continue_, step=step, dry_run=dry_run
    )
    if resume is not None:
        from ai_sdlc.workflow.runs.runstate import check_run_id

        check_run_id(resume)
    checked_provider(provider)
    store = app.store(read_only=dry_run or provider == "dry-run", check_config=False)
    config = app.config()  # checked as every command checks it, and loaded once
    ids = [store.resolve(ref) for ref in refs]

    if dry_run and (resume is not None or continue_):
        _render_plan(out, _resume_plan(out, store, resume), json)
        return 0
    if dry_run or provider == "dry-run":
        plan = _dry_run_plan(
            store, ids, auto=auto or batch, step=step, show_prompts=provider == "dry-run"
        )
        _warn_of_clashes(plan, config, store)
        _render_plan(out, plan, json)
        return 0

    progress = Progress(out)
    # The session's notices (no isolation, PYTEST_ADDOPTS left out, ...) matter only once an
    # agent phase starts: a run that stops before (unknown run id, a done story) does not show
    # them. What stops a run (no provider, no verification) is an error of Session.open.
    pending: list[str] = []

    def emit(event: dict[str, Any]) -> None:
        if pending and event.get("event") == "phase_started":
            for notice in pending:
                out.warn(notice)
            pending.clear()
        progress.event(event)

    # The session owns its temp folders: closed when the command ends, however it ends.
    with Session.open(
        store,
        provider_name=provider,
        emit=emit,
        no_worktree=no_worktree,
        config=config,
        no_sandbox=no_sandbox,
        step=step,
    ) as session:
        wall = session.sandbox
        if wall is not None and wall.widened and wall.in_force and not no_sandbox:
            # Said first: a wider sandbox is a looser one.
            out.warn("sandbox widened by sandbox.writable: " + ", ".join(wall.widened))
        pending.extend((session.notice or "").splitlines())
        out.debug(describe_provider(session.provider.name, session.config))
        if auto or batch or resume or continue_:
            assert session.sandbox is not None
            which = (
                "--auto" if auto else "--batch" if batch else "--resume" if resume else "--continue"
            )
            session.sandbox.check_unattended(no_sandbox=no_sandbox, command=f"ai-sdlc run {which}")
            try:
                report = session.run_many(
                    story_ids=ids if batch else None,
                    resume=resume,
                    latest=continue_,
                    jobs=jobs,
                    epic=epic,
                    executor=executor,
                    ray_address=ray_address,
                    max_attempts=max_attempts,
                )
            finally:
                progress.close()
            if report is None:
                return _finish_idle(out, session.idle(epic=epic), json, {"run": None})
            return _finish_multi(out, store, report, json)
        try:
            outcomes = session.run(
                story_id=ids[0] if ids else None,
                auto=False,
                step=step,
                ignore_dependencies=ignore_dependencies,
            )
        finally:
            progress.close()
        if not outcomes:
            return _finish_idle(out, session.idle(), json, {})
        blocked = [o for o in outcomes if o.result == "blocked"]
        if json:
            out.ndjson({"event": "run_finished", "outcomes": [o.to_json() for o in outcomes]})
        _render_outcomes(out, outcomes)
        if blocked:
            return int(ExitCode.BLOCKED)
        return in_review_exit(store, outcomes)


def halted_hint(why: str, command: str) -> str:
    """The hint under a halted run's error: how to continue, unless the reason already named
    it (the attempt cap says `run --continue` and `--max-attempts`): a way out said once."""
    if "'ai-sdlc run --continue" in why:
        return "every finished story is kept"
    return f"every finished story is kept; to continue: {command}"


def in_review_exit(store: StoryStore, outcomes: list[StoryOutcome]) -> int:
    """7 when a story the run worked on ended waiting in review (its PR waits on people: a CI
    script must tell it from done), else 0."""
    for o in outcomes:
        if o.result == "waiting" and store.get(o.story_id).status == IN_REVIEW:
            return int(ExitCode.IN_REVIEW)
    return 0


def describe_provider(name: str, config: Any) -> str:
    """The `-v` line naming the effective provider and model."""
    from ai_sdlc.providers.selection import resolve_model

    model = resolve_model(name, config.section("ai"))
    return f"provider {name}, model {model or 'the agent default'}"


def _check_options(
    refs: list[str],
    *,
    auto: bool,
    batch: bool,
    resume: str | None,
    latest: bool,
    step: Phase | None,
    dry_run: bool,
) -> None:
    if resume is not None and latest:
        raise UsageError("give --resume RUN_ID or --continue, not both")
    if resume is not None or latest:
        if refs or auto or batch or step:
            raise UsageError(
                "--resume/--continue take no story, --auto, --batch or --step",
                hint="the run remembers its stories",
            )
        return
    if auto and batch:
        raise UsageError("give --auto (every actionable story) or --batch ID..., not both")
    if auto and refs:
        raise UsageError(
            "give a story or --auto, not both", hint="several stories as one run: --batch ID..."
        )
    if batch and not refs:
        raise UsageError("--batch needs the story ids to run, e.g. --batch S-0001 S-0002")
    if len(refs) > 1 and not batch:
        raise UsageError("give one story, or several with --batch")
    if step and (auto or batch):
        raise UsageError("--step runs one phase of one story; it cannot be used with a run")
    if step and not refs:
        raise UsageError("--step needs a story")


def _dry_run_plan(
    store: Any, ids: list[str], *, auto: bool, step: Phase | None, show_prompts: bool
) -> DryRunPlan:
    if len(ids) <= 1:
        return plan_dry_run(
            store, story_id=ids[0] if ids else None, auto=auto, step=step, show_prompts=show_prompts
        )
    stories = []
    for story_id in ids:
        stories += plan_dry_run(
            store, story_id=story_id, auto=True, step=None, show_prompts=show_prompts
        ).stories
    return DryRunPlan(stories)


def _warn_of_clashes(plan: DryRunPlan, config: Any, store: Any) -> None:
    """Mark the planned stories that cannot start: their unmerged dependencies' branches
    conflict (the run would skip them), with the way out."""
    from ai_sdlc.cli.storyrows import collisions

    if not plan.stories:
        return
    clashes = collisions(config, store.root, [store.get(p.story_id) for p in plan.stories])
    for item in plan.stories:
        clash = clashes.get(item.story_id)
        if clash is not None and clash.between:
            item.warning = f"{item.story_id} cannot start: {clash.text(item.story_id)}"


def _resume_plan(out: Terminal, store: Any, run_id: str | None) -> DryRunPlan:
    """What `run --resume RUN_ID` (None: `--continue`, the latest run) would do: the plan of
    each story of the run that is not done yet, read without writing anything."""
    from ai_sdlc.workflow.runs.runstate import RunRepository
    from ai_sdlc.workflow.session import resumable

    state = resumable(RunRepository(store.ai_dir), run_id)  # refused as the run refuses it
    left = [s.story_id for s in state.stories if store.get(s.story_id).status != "done"]
    out.info(f"Resuming run {state.run_id} would continue with: {', '.join(left) or 'nothing'}")
    return (
        _dry_run_plan(store, left, auto=True, step=None, show_prompts=False)
        if left
        else (DryRunPlan([]))
    )


def _render_outcomes(out: Terminal, outcomes: list[StoryOutcome]) -> None:
    """Each story's result line (stdout, kept by -q); an error goes to stderr; a block is
    followed by the command that clears it (stderr)."""
    from ai_sdlc.workflow.state.steps import unblock_hint

    for o in outcomes:
        if o.result == "error":
            out.error(f"{o.story_id}: {o.reason}")
            continue
        style = {"done": "green", "blocked": "yellow"}.get(o.result)
        out.result(outcome_line(o.story_id, o.result, o.reason), style=style)
        hint = unblock_hint(o.story_id, o.reason) if o.result == "blocked" else None
        if hint is not None:
            out.alert(f"  hint: {hint}")


def _finish_idle(out: Terminal, idle: Idle, json: bool, extra: dict[str, Any]) -> int:
    """A run that found nothing to do: why (the blocked stories and those waiting on them),
    and the exit code the core chose (5 when a remaining story is blocked)."""
    if json:
        out.ndjson({"event": "run_finished", **extra, "outcomes": [], "idle": idle.to_json()})
    render_idle(out, idle)
    return idle.exit_code


def render_idle(out: Terminal, idle: Idle, nothing: str = "Nothing to run") -> None:
    """The headline, then one line per held story (`watch --once` shows the same), then the
    way out. Stories the user named (`--epic`) left blocked are the run's result (stdout, kept
    by -q, exit 5; one waiting on a blocked story outside the run is an error); a backlog the
    run picked from, blocked before it, is a note (stderr, exit 0: docs/conventions.md)."""
    say = out.result if idle.failed or idle.unreadable else out.info
    say(idle.headline(nothing))
    for line in idle.lines():
        say(f"  {line}")
    way = idle.way_out()
    if way is not None:
        (out.alert if idle.failed else out.info)(f"  hint: {way}")
    for line in idle.stuck_lines():
        if idle.failed:
            out.error(line)
        else:
            out.warn(line)
    _render_unreadable(out, idle.unreadable)


def _render_unreadable(out: Terminal, unreadable: list[tuple[str, str | None]]) -> None:
    """Each story file a run could not read: `path:line: reason`, and its fix (stderr)."""
    if unreadable:
        n = len(unreadable)
        out.error(f"{n} story {'file' if n == 1 else 'files'} could not be read, so never ran:")
    for message, hint in unreadable:
        out.error(message, hint=hint)


def _finish_multi(out: Terminal, store: StoryStore, report: RunOutcome, json: bool) -> int:
    """Summarise a multi-story run; exit 6 when a stop condition halted it, 130 when
    interrupted (both resumable), 1 when a batch completed but skipped a story, 5 when a run
    completed but skipped stories of the epic it was asked for that wait on a story blocked
    outside it (a note under `--auto`: docs/conventions.md), 3 when it could not
    read a story file (each named with its file:line reason), 7 when a story ended in review."""
    root = store.root
    from ai_sdlc.cli.runs import continue_command, render_loop, statistics_line
    from ai_sdlc.workflow.runs.idle import unreadable_json
    from ai_sdlc.workflow.runs.record import ALL_ESCALATED_CONDITION

    state = report.state
    # Nothing left but escalated stories: what could be done was, and the rest is blocked.
    stuck = state.stop_reason is not None and state.stop_reason.condition == ALL_ESCALATED_CONDITION
    if json:
        out.ndjson(
            {
                "event": "run_finished",
                "run": state.to_json(),
                "outcomes": [o.to_json() for o in report.outcomes],
                "diagnostic": str(report.diagnostic_path) if report.diagnostic_path else None,
                "held": [h.to_json() for h in report.held.stuck] if report.held else [],
                "unreadable": unreadable_json(report.unreadable),
            }
        )
    else:
        _render_outcomes(out, report.outcomes)
        if report.loop is not None and not stuck:
            render_loop(out, report.loop, report.diagnostic_path, alert=True)
    command = continue_command(root, state.run_id)
    stats = statistics_line(state.statistics)
    if report.interrupted:
        # Like a single run's "error: interrupted": stderr (kept by -q), not a result.
        out.alert(f"Run {state.run_id} interrupted; finished work is kept. {stats}")
        out.alert(f"To continue: {command}")
        return int(ExitCode.INTERRUPTED)
    if report.halted and state.stop_reason is not None:
        for result in report.notifications:
            if not result.ok:
                out.warn(f"notification by {result.channel} failed: {result.detail}")
        done = "finished what it could" if stuck else "stopped"
        out.result(f"Run {state.run_id} {done}. {stats}")
        if stuck:
            out.warn(state.stop_reason.message)
            blocked = any(s.escalated and s.status == "blocked" for s in state.stories)
            if blocked:  # the way out that works: `unblock` only clears a block
                out.info(f"Once they are unblocked ('ai-sdlc unblock ID'), continue: {command}")
                return int(ExitCode.BLOCKED)
            out.info(f"Once the cause is fixed, continue: {command}")
        # The reason once: a failure loop was just shown in full; a stop condition is said here.
        why = (
            "the failure loop above"
            if report.loop is not None and not json
            else state.stop_reason.message
        )
        raise RunHaltedError(
            f"run {state.run_id} halted ({state.stop_reason.condition}): {why}",
            hint=halted_hint(why, command),
        )
    incomplete = report.skipped_error()
    if incomplete is not None:
        out.result(f"Run {state.run_id} completed without every story. {stats}")
        raise incomplete
    if report.held is not None or report.unreadable:
        # What it could start is done; the rest waits on a human (a story blocked outside it,
        # a story file that cannot be read).
        out.result(f"Run {state.run_id} completed without every story. {stats}")
        held = report.held
        failed = held is not None and held.failed  # the epic the user named cannot finish
        for line in held.stuck_lines() if held is not None else []:
            if failed:
                out.error(line)
            else:
                out.warn(line)
        _render_unreadable(out, report.unreadable)
        if failed:
            return int(ExitCode.BLOCKED)
        if report.unreadable:
            return int(ExitCode.INVALID_INPUT)
        return in_review_exit(store, report.outcomes)
    out.success(f"Run {state.run_id} completed. {stats}")
    return in_review_exit(store, report.outcomes)


#: How the plan's reasons read under the phases: nothing after a plain run to the end (the
#: phases listed are all that runs), and what `--step` means.
_PLAN_NOTES = {"then: all phases complete": "", "--step": "only this phase (--step)"}


def _render_plan(out: Any, plan: DryRunPlan, json: bool) -> None:
    if json:
        out.json(plan.to_json())
        return
    out.info("Dry run: nothing will be changed.", style="bold")
    if not plan.stories:
        out.info("Nothing to run: no story has an actionable next step.")
    for item in plan.stories:
        line = f"{item.story_id}: " + (" → ".join(item.phases) if item.phases else item.reason)
        out.data(line)
        if item.warning:
            out.warn(item.warning)
        note = _PLAN_NOTES.get(item.reason, item.reason)
        if item.phases and note:
            out.data(f"  ({note})")
        for prompt in item.prompts:
            out.data(prompt)
