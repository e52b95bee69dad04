"""Why a run finds nothing to do, and the exit code that says so.

A run that starts nothing is not a success when stories are left: each one is blocked (or at
the global recovery limit), waits for an approval, or waits on a dependency that is not done.
`run`, `run --auto`, `run --epic` and `watch --once` ask `why_idle`; the CLI only renders it.
Exit 5 (`ExitCode.BLOCKED`) only for stories the user named (`run --auto --epic E`: the
epic's): one is blocked, or waits (directly or through other stories) on a blocked story outside
the run (`--epic E2` whose story depends on a blocked story of E1: nothing will ever start until
a human acts). A run that picks its own stories (`run`, `run --auto`, `watch --once`) and finds
only stories blocked before it exits 0, naming them and `unblock` on stderr: a cron job must
not "fail" every hour for as long as one story stays blocked; the run that blocked it exited 5.
0 too when nothing is left (every story done, or none at all) or only approvals are awaited. A
run that did work but skipped stories for that reason ends the same way (`held_outside`). A
story file that cannot be read is a story the run cannot account for: it is named with its
file:line reason and the run exits 3 (`ExitCode.INVALID_INPUT`, as `status` does
on the same file), never "completed" as if the backlog were whole.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ai_sdlc.errors import ExitCode
from ai_sdlc.workflow.engine.assess import assess
from ai_sdlc.workflow.runs import graph as G
from ai_sdlc.workflow.runs.runstate import COMPLETED, SKIPPED, RunState
from ai_sdlc.workflow.state.readiness import unmet_dependencies

#: A held story's kinds: blocked (or at the global limit), waiting for an approval, in the
#: backlog where only ready stories run (`watch`), waiting on a dependency that is not done.
BLOCKED, APPROVAL, BACKLOG, DEPENDENCY = "blocked", "approval", "backlog", "dependency"


@dataclass(frozen=True)
class Held:
    """A remaining story that cannot run now, and why."""

    story_id: str
    kind: str
    reason: str
    #: For a DEPENDENCY: the dependencies that are not done.
    waits_on: tuple[str, ...] = ()
    #: For a DEPENDENCY: the blocked stories it waits on, directly or through others, with
    #: their block reasons.
    blocked_by: tuple[tuple[str, str], ...] = ()
    #: For a BLOCKED story at the global recovery limit: `unblock` needs `--reset-retries`.
    at_limit: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "story": self.story_id,
            "kind": self.kind,
            "reason": self.reason,
            "waits_on": list(self.waits_on),
            "blocked_by": [{"story": sid, "reason": why} for sid, why in self.blocked_by],
        }


@dataclass(frozen=True)
class Idle:
    """Nothing can run: the stories left (none: everything is done) and why each is held."""

    held: list[Held] = field(default_factory=list)
    #: Story files that cannot be read (`path:line: reason`, and the fix): never run, never done.
    unreadable: list[tuple[str, str | None]] = field(default_factory=list)
    #: The user named these stories (an epic's): a blocked one is the run's result (exit 5),
    #: not a note about a backlog the run picked from.
    named: bool = False

    @property
    def blocked(self) -> list[Held]:
        return [h for h in self.held if h.kind == BLOCKED]

    @property
    def stuck(self) -> list[Held]:
        """Stories waiting on a blocked story that is not among the held ones (outside the run:
        another epic's): they cannot start until a human unblocks it."""
        inside = {h.story_id for h in self.blocked}
        return [h for h in self.held if any(sid not in inside for sid, _ in h.blocked_by)]

    @property
    def failed(self) -> bool:
        """A story the user named is blocked or waits on a blocked one (exit 5)."""
        return self.named and bool(self.blocked or self.stuck)

    @property
    def exit_code(self) -> int:
        if self.failed:
            return int(ExitCode.BLOCKED)
        return int(ExitCode.INVALID_INPUT) if self.unreadable else int(ExitCode.OK)

    def stuck_lines(self) -> list[str]:
        """One line per story waiting on a blocked story outside the run, naming both."""
        inside = {h.story_id for h in self.blocked}
        return [
            f"{h.story_id} cannot start: it depends on {sid}, which is blocked outside this "
            f"run ({why}); unblock {sid} ('ai-sdlc unblock {sid}') once its cause is fixed"
            for h in sorted(self.stuck, key=lambda h: h.story_id)
            for sid, why in h.blocked_by
            if sid not in inside
        ]

    def headline(self, nothing: str = "Nothing to run") -> str:
        if not self.held:
            return f"{nothing}: no story has an actionable next step."
        n = len(self.held)
        count = f"{n} remaining {'story' if n == 1 else 'stories'} cannot start"
        blocked, stuck = len(self.blocked), len(self.stuck)
        if stuck and not blocked:
            return f"{nothing}: {count} ({stuck} waiting on a blocked story outside this run):"
        return f"{nothing}: {count}" + (f" ({blocked} blocked):" if blocked else ":")

    def lines(self) -> list[str]:
        """One line per held story: blocked ones first (with their reasons), then the rest."""
        order = {BLOCKED: 0, APPROVAL: 1, BACKLOG: 2, DEPENDENCY: 3}
        return [
            f"{h.story_id}: {h.reason}"
            for h in sorted(self.held, key=lambda h: (order[h.kind], h.story_id))
        ]

    def way_out(self) -> str | None:
        """The command that clears the blocked stories inside the run (those outside are
        named by `stuck_lines`), or None when none is blocked."""
        blocked = sorted(self.blocked, key=lambda h: h.story_id)
        if not blocked:
            return None
        if len(blocked) > 1:
            reset = (
                " (--reset-retries at the global limit)" if any(h.at_limit for h in blocked) else ""
            )
            return f"once a cause is fixed, 'ai-sdlc unblock ID'{reset} lets the next run take it"
        flag = " --reset-retries" if blocked[0].at_limit else ""
        return (
            f"once the cause is fixed, 'ai-sdlc unblock {blocked[0].story_id}{flag}' lets the "
            "next run take it"
        )

    def to_json(self, nothing: str = "Nothing to run") -> dict[str, Any]:
        return {
            "message": self.headline(nothing),
            "exit_code": self.exit_code,
            "held": [h.to_json() for h in self.held],
            "unreadable": unreadable_json(self.unreadable),
        }


def unreadable_of(store: Any) -> list[tuple[str, str | None]]:
    """(message with file:line, hint) of every story file `store` cannot read."""
    return [(error.message, error.hint) for error in store.scan().errors]


def unreadable_json(unreadable: Iterable[tuple[str, str | None]]) -> list[dict[str, Any]]:
    return [{"message": message, "hint": hint} for message, hint in unreadable]


def why_idle(
    stories: Iterable[Mapping[str, Any]],
    *,
    gates: Mapping[str, Any],
    global_limit: int,
    done_means: str,
    only: Collection[str] | None = None,
    ready_only: bool = False,
) -> Idle:
    """Why none of `stories` (frontmatters; `only`: just these ids, an epic's) can run. Called
    once a run found nothing actionable; a story that would run is not listed. `ready_only`:
    the caller runs no backlog story (`watch`), which is then held as BACKLOG."""
    board = list(stories)
    by_id = {str(fm.get("id")): fm for fm in board}
    held = []
    for fm in board:
        sid = str(fm.get("id"))
        if only is not None and sid not in only:
            continue
        action = assess(fm, gates=gates, global_limit=global_limit)
        if action.kind in ("blocked", "limit"):
            reason = action.reason if action.kind == "blocked" else f"blocked: {action.reason}"
            spent = str(fm.get("total_recovery_attempts") or 0)
            at_limit = action.kind == "limit" or (spent.isdigit() and int(spent) >= global_limit)
            held.append(Held(sid, BLOCKED, reason, at_limit=at_limit))
            continue
        if action.kind == "done" and fm.get("status") == "done":
            continue
        unmet = unmet_dependencies(fm, by_id.get, done_means)
        if action.kind == "waiting":
            held.append(Held(sid, APPROVAL, action.reason))
        elif unmet:
            which = ", ".join(u.describe(done_means) for u in unmet)
            waits = tuple(u.story_id for u in unmet)
            behind = _blocked_behind(waits, by_id, gates, global_limit, done_means)
            held.append(Held(sid, DEPENDENCY, f"waits on {which}", waits, behind))
        elif ready_only and fm.get("status") == "backlog":
            why = f"in the backlog: watch runs it once ready ('ai-sdlc set {sid} status=ready')"
            held.append(Held(sid, BACKLOG, why))
    return Idle(held)


def _blocked_behind(
    waits: Iterable[str],
    by_id: Mapping[str, Mapping[str, Any]],
    gates: Mapping[str, Any],
    global_limit: int,
    done_means: str,
) -> tuple[tuple[str, str], ...]:
    """(id, block reason) of the blocked stories among `waits` and the dependencies, not
    done, they wait on in turn."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    todo = list(waits)
    while todo:
        sid = todo.pop(0)
        fm = by_id.get(sid)
        if sid in seen or fm is None:
            continue
        seen.add(sid)
        action = assess(fm, gates=gates, global_limit=global_limit)
        if action.kind in ("blocked", "limit"):
            found[sid] = action.reason.removeprefix("blocked: ")
            continue
        todo.extend(u.story_id for u in unmet_dependencies(fm, by_id.get, done_means))
    return tuple(found.items())


def startable(graph: G.Graph, story_ids: Iterable[str], done_means: str) -> list[str]:
    """The stories of `story_ids` a run of them could start: each dependency met, or itself
    one of them that could start (a run waits for it). The rest would only be skipped."""
    picked = dict.fromkeys(story_ids)
    changed = True
    while changed:
        changed = False
        for sid in list(picked):
            if any(
                dep not in picked and not G.is_met(graph.nodes.get(dep), done_means)
                for dep in graph.dependencies(sid)
            ):
                del picked[sid]
                changed = True
    return list(picked)


def idle_of(
    store: Any,
    config: Any,
    *,
    epic: str | None = None,
    ready_only: bool = False,
    only: Collection[str] | None = None,
    unreadable: bool = False,
) -> Idle:
    """`why_idle` over a project's stories (`epic`: only that epic's, named by the user;
    `only`: just these; `unreadable`: with the story files that cannot be read)."""
    scan = store.scan()
    stories = [s.frontmatter for s in scan.stories]
    if epic is not None:
        only = set(G.build((str(fm.get("id")), fm) for fm in stories).in_epic(epic))
    idle = why_idle(
        stories,
        gates=config.section("gates"),
        global_limit=int(config.get("limits.global_recovery")),
        done_means=str(config.get("run.done_means")),
        only=only,
        ready_only=ready_only,
    )
    if unreadable:
        idle.unreadable.extend((e.message, e.hint) for e in scan.errors)
    return replace(idle, named=epic is not None)


def held_outside(state: RunState, store: Any, config: Any) -> Idle | None:
    """The stories a completed `--auto`/`--epic` run skipped because they wait on a story
    blocked outside it (exit 5 under `--epic`, a note under `--auto`); None when there are
    none. A `--batch` that skipped a story already fails (exit 1)."""
    if state.run_status != COMPLETED or state.mode == "batch":
        return None
    skipped = {s.story_id for s in state.stories if s.status == SKIPPED}
    if not skipped:
        return None
    idle = replace(idle_of(store, config, only=skipped), named=state.epic is not None)
    return idle if idle.stuck else None


__all__ = [
    "APPROVAL",
    "BACKLOG",
    "BLOCKED",
    "DEPENDENCY",
    "Held",
    "Idle",
    "held_outside",
    "idle_of",
    "startable",
    "unreadable_json",
    "unreadable_of",
    "why_idle",
]
