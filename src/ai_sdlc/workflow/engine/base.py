"""The runner's foundation: its settings and dependencies, and the state every part shares.

`StoryRunner` is one class assembled in layers, one module each, every layer building on the
one before: `base` (this: the records the caller passes in, the runner's per-run state, the
shared moves — emit an event, count a recovery, fail or block an attempt), `children` (after
every child: the workspace's git metadata put back, a change counted), `calls` (the agent
call, its budgets and usage, read-only checks), `judging` (verification and the judge),
`phases` (reserve an attempt and run refine, research, plan, implement), `review` (the review
and publishing a finished story) and `runner` (the phase loop and checkpointed execution).
The layers split one object by responsibility; they are not meant to be used apart.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import msgspec

from ai_sdlc.errors import AiSdlcError, StoryBlockedError
from ai_sdlc.git.seam import InPlace, Prepared, StoryWorkspace
from ai_sdlc.providers.base import CallGuard, Phase, Provider, Usage, direct_call
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.store import Story, StoryStore
from ai_sdlc.verify import VerificationResult
from ai_sdlc.verify.judge import Judge
from ai_sdlc.workflow.state.checkpoint import Checkpoints
from ai_sdlc.workflow.state.events import Clock, iso, utc_now
from ai_sdlc.workflow.state.transitions import StoryState, Ticket

T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]
Verifier = Callable[[Path], VerificationResult]


class Metrics(Protocol):
    """The resilience metrics of the runner's calls (a `PolicyManager`), written at the run's
    boundaries: `flush_if_due` after each phase, `flush` when a story's run ends."""

    def flush(self) -> None: ...

    def flush_if_due(self) -> None: ...


class Limits(msgspec.Struct, frozen=True):
    global_recovery: int = 10
    implementation_retries: int = 3
    review_rejections: int = 3
    refinement_iterations: int = 5
    pr_rounds: int = 10
    phase_timeout: float = 900.0
    #: Budgets (None = no limit), checked before every provider call.
    story_tokens: float | None = None
    story_cost_usd: float | None = None
    run_cost_usd: float | None = None


class StoryOutcome(msgspec.Struct):
    story_id: str
    #: "done", "blocked", "waiting", "stepped" (one --step ran), "idle" (nothing to do)
    result: str
    reason: str
    actions: int = 0
    recoveries: int = 0

    def to_json(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class RunnerDeps(msgspec.Struct):
    """Everything the runner touches, injectable for tests."""

    store: StoryStore
    provider: Provider
    verifier: Verifier
    limits: Limits = msgspec.field(default_factory=Limits)
    gates: dict[str, Any] = msgspec.field(default_factory=dict)
    #: (story id, phase, record an api_retry) -> the guard every provider call runs under
    guard_factory: Callable[[str, Phase, Callable[..., None]], CallGuard] = (
        lambda _story, _phase, _record: direct_call
    )
    workspace: Path | None = None
    #: Where each story's agents work (default: `InPlace` in `workspace` or the project).
    workspaces: StoryWorkspace | None = None
    #: The `ai` config section (model, prices) for usage estimates before a call.
    ai_settings: dict[str, Any] = msgspec.field(default_factory=dict)
    emit: Emit = lambda _event: None
    clock: Clock = utc_now
    monotonic: Callable[[], float] = time.monotonic
    #: False when no `verify.build`/`verify.test` is configured: nothing is verified, the run
    #: says so once and the review is told (never "verification passed").
    verification_configured: bool = True
    #: The baseline, pass-count floor and protected tests (`verify.judge`); None: not judged.
    judge: Judge | None = None
    #: Between two actions, before a phase: a returned reason blocks the story (multi-story
    #: runs count bounces here); raising stops the story before the phase starts.
    before_phase: Callable[[str, Phase], str | None] = lambda _story, _phase: None
    #: Flushed when each story's run ends (also when it stops, is blocked or halted) and after
    #: a phase when due; None: the calls' metrics are written by whoever owns them.
    metrics: Metrics | None = None
    #: The sandbox policy of the children (agents, tools) working in a workspace; None: none.
    sandbox: Callable[[Path], SandboxPolicy | None] = lambda _workspace: None
    #: Why children run without the sandbox the config asks for (said once per story).
    sandbox_missing: str | None = None
    #: Before every phase (when verification is configured), with the story's workspace:
    #: raises when verification there would judge the wrong code (the wrong-tree guard), so
    #: the run stops before any attempt is reserved or any agent called.
    check_workspace: Callable[[Path], None] = lambda _path: None


class RunnerBase:
    """The runner's state and the moves every layer shares (see the module docstring)."""

    def __init__(self, deps: RunnerDeps) -> None:
        self.deps = deps
        self.store = deps.store
        self.owner = StoryState(
            deps.store,
            limit=deps.limits.global_recovery,
            clock=deps.clock,
            on_recovery=self._recovered,
        )
        self.workspaces: StoryWorkspace = deps.workspaces or InPlace(
            deps.workspace or deps.store.root
        )
        self.checkpoints = Checkpoints(deps.store)
        #: Usage of the whole run (all stories this runner served), for `limits.run_cost_usd`.
        self.run_usage = Usage()
        #: Usage reported live (agent turns) by the provider call in flight, not yet persisted.
        self._live = Usage()
        #: Stories told "no verification configured" in this run (said once).
        self._unverified: set[str] = set()
        #: Stories told "no sandbox available" in this run (said once).
        self._unsandboxed: set[str] = set()
        #: Stories told this run that their base gives no pass-count floor.
        self._floor_off: set[str] = set()
        #: Workspaces prepared during the current `run` of each story.
        self._prepared: dict[str, Prepared] = {}
        #: The story whose last read-only check found nothing changed (or whose work was all
        #: just committed), while nothing has run in its workspace since (no agent,
        #: verification, baseline, workspace preparation): that look may stand for the next
        #: one (`StoryWorkspace.fingerprint(checked=)`, `changes(checked=)`).
        self._checked: str | None = None
        #: The story as the last `ensure_can_act` returned it (saves a re-read per phase).
        self._story: Story | None = None
        #: The tag of the checkpoint taken for the phase in flight (its reservation names it).
        self._checkpoint: str | None = None
        #: Usage of the call answered in this phase, not yet written (see `_take_usage`).
        self._pending: Usage | None = None
        #: What the judge checked on the passing verification in flight, by story (recorded
        #: with the attempt as `verified`).
        self._judged: dict[str, dict[str, Any]] = {}
        #: Whether the phase in flight has reserved its attempt yet (`_begin`).
        self._reserved = False
        #: The attempt the phase in flight reserved (`_begin`), for checks after its children.
        self._ticket: Ticket | None = None
        self._phase_t0 = deps.monotonic()

    @property
    def limit(self) -> int:
        return self.owner.limit

    def _sandbox(self, story_id: str, path: Path) -> SandboxPolicy | None:
        """The sandbox of `path`'s children; where the config wants one and none is
        available, the story's log and the display are told once per run."""
        missing = self.deps.sandbox_missing
        if missing is not None and story_id not in self._unsandboxed:
            self._unsandboxed.add(story_id)
            self._emit("sandbox_unavailable", story_id, reason=missing)
            self.owner.note(story_id, "sandbox_unavailable", reason=missing)
        return self.deps.sandbox(path)

    def _recover(self, story_id: str, kind: str, phase: Phase, **details: Any) -> None:
        """Count a recovery before it runs (raises StoryBlockedError at the global limit)."""
        try:
            self.owner.record_recovery(story_id, kind, phase=phase.value, **details)
        except StoryBlockedError as exc:
            self._emit("story_blocked", story_id, phase=phase.value, reason=exc.message)
            raise

    def _recovered(self, story_id: str, event: dict[str, Any]) -> None:
        """Every recovery the owner counted (after it is written): tell the display and the
        multi-story run, including the one that blocks the story."""
        counters = event.get("counters") or {}
        self._emit(
            "recovery",
            story_id,
            phase=event.get("phase"),
            recovery_kind=event.get("recovery_kind"),
            total=counters.get("total_recovery_attempts"),
            limit=self.limit,
            blocked=event.get("outcome") == "blocked",
            **{k: event[k] for k in ("reason", "delay", "attempt") if k in event},
        )

    def _block(
        self, story_id: str, reason: str, *, artifact: tuple[str, str] | None = None
    ) -> NoReturn:
        # Redacted where it goes out (terminal, event log, run state), like every event.
        self._emit("story_blocked", story_id, reason=reason)
        self.owner.block(story_id, reason, artifact=artifact)

    def _fail(self, story_id: str, phase: Phase, kind: str, **kwargs: Any) -> None:
        try:
            self.owner.fail_attempt(story_id, phase, kind, usage=self._take_usage(), **kwargs)
        except StoryBlockedError as exc:
            self._emit("story_blocked", story_id, phase=phase.value, reason=exc.message)
            raise

    def _persist_usage(self, story_id: str, usage: Usage, *, calls: int) -> None:
        """Add usage to the story's `usage` now (a call that failed or was stopped) and to
        the run's total."""
        self._live = Usage()
        if not usage.total_tokens and usage.cost_usd is None:
            return
        self.run_usage.add(usage)
        self.owner.add_usage(story_id, usage, calls=calls)

    def _take_usage(self) -> Usage | None:
        """The answered call's usage, written with the phase's outcome (one transaction)."""
        usage, self._pending = self._pending, None
        return usage

    def _attempt_of(self, story: Any, phase: Phase) -> tuple[int, int | None]:
        """(this attempt within the phase's limit, how many that limit allows) for display."""
        limits = self.deps.limits
        counter, limit = {
            Phase.REFINE: ("refinement_count", limits.refinement_iterations),
            Phase.IMPLEMENT: ("implementation_retry_count", limits.implementation_retries),
            Phase.REWORK: ("implementation_retry_count", limits.implementation_retries),
            Phase.REVIEW: ("retry_count", limits.review_rejections),
        }.get(phase, ("", 0))
        if not counter:
            return 1, None
        return story.counter(counter) + 1, limit + 1

    def _emit_phase(
        self, story_id: str, phase: Phase, outcome: str, attempt: int, **data: Any
    ) -> None:
        self._emit(
            "phase_" + outcome,
            story_id,
            phase=phase.value,
            attempt=attempt,
            elapsed=round(self.deps.monotonic() - self._phase_t0, 3),
            **data,
        )

    def _emit(self, name: str, story_id: str, **data: Any) -> None:
        self.deps.emit({"event": name, "story": story_id, "time": iso(self.deps.clock()), **data})


class PhaseRetry(Exception):
    """A read-only violation or an agent's reported failure was counted: the phase ends here
    and the story goes on."""


def plural(count: int, one: str, many: str | None = None) -> str:
    """`1 time`, `3 times`: a count with its noun in the right number."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def with_hint(exc: AiSdlcError) -> str:
    """A block reason that says what to do, too."""
    return f"{exc.message}; to go on: {exc.hint}" if exc.hint else exc.message


def describe(exc: BaseException) -> str:
    message = exc.message if isinstance(exc, AiSdlcError) else str(exc)
    return f"{type(exc).__name__}: {message}"


@functools.cache
def _telling() -> tuple[re.Pattern[str], ...]:
    """What makes a failure line telling, best first: pytest's short summary, pytest's `E`
    lines, an exception or assertion line, a generic failure word (compiled on first use: a
    run that passes never needs them)."""
    return (
        re.compile(r"^(FAILED|ERROR) "),
        re.compile(r"^E\s+\S"),
        re.compile(r"\w*Error\b|\bassert\b|error:"),
        re.compile(r"failed|not found"),
    )


def first_line(text: str, limit: int = 200) -> str:
    """The most telling line of a failure (see `_telling`), else its first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    chosen = lines[0] if lines else "no details"
    for pattern in _telling():
        hits = [ln for ln in lines if pattern.search(ln) and not ln.startswith("Traceback")]
        if hits:
            chosen = hits[-1]
            break
    return chosen if len(chosen) <= limit else chosen[: limit - 1] + "…"


def with_trailing_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
