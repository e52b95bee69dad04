"""The executor seam: where the scheduler's "run this story to its next stop" actually runs.

The coordinator (the `ai-sdlc run` process, `scheduler.ParallelRun`) owns every run-level
decision; an executor only carries stories to workers and messages back. The protocol:

- `start(story_id) -> Handle`: run the story (to done, blocked, waiting or a stop) on a worker.
- `next_message(timeout) -> Message | None`: the next message from any worker, in arrival
  order: `Event` (a runner event, tagged with the worker), `Ask` (a question the worker waits
  on: `before_phase` before every phase, `usage` before every provider call) and `WorkerDone`
  (the worker's result). A worker that dies without a result yields `WorkerDone(kind="crashed")`.
- `reply(handle, answer)`: the coordinator's answer to an `Ask` (the worker blocks until then).
- `request_stop()`: workers stop before their next phase (the phase in flight finishes).
- `interrupt()`: Ctrl-C (or SIGTERM) of the coordinator: workers abandon the phase in flight
  (it is rolled back, as in a one-story run) and report `interrupted`.
- `close()`: wait for (then end) the workers.

Workers ask the coordinator before every phase (the run's attempt cap, bounce counting and the
stop flag are decided there) and before every provider call (they report what they spent and
get the run's total back, so `limits.run_cost_usd` holds across workers: a call may only start
when the total of every worker's booked spend allows it). Story state itself is written by the
worker's own `StoryState` owner under the per-story file lock, so per-story counters (the
global recovery limit) are exact across processes.

`LocalExecutor` runs each story in a local worker process (multiprocessing `forkserver`,
`spawn` where that is missing): each opens its own session/`StoryRunner` on the same project
(through the spec's `open_session`, handed down by the composition root; the worker's end is
`worker.Link`).
Verification commands of all its workers share a cross-process semaphore
(`verify.max_parallel`). Each worker leads its own process group, so a terminal's Ctrl-C reaches
the coordinator alone, which forwards exactly one SIGINT to each worker (`interrupt`): a worker
never gets a second one in the middle of its roll-back. A cluster executor (Ray) implements the
same six calls.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ai_sdlc.workflow.parallel.worker import (
    Answer,
    Link,
    OpenSession,
    StopRequested,
    run_to_stop,
)


@dataclass(frozen=True)
class Handle:
    story_id: str
    #: Names the worker in events and run state (e.g. `local:12345`).
    worker: str
    token: int


@dataclass(frozen=True)
class Event:
    handle: Handle
    event: dict[str, Any]


@dataclass(frozen=True)
class Ask:
    handle: Handle
    #: "before_phase" (data: phase, usage) or "usage" (data: usage delta).
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True)
class WorkerDone:
    handle: Handle
    #: "outcome" (result/reason of the runner), "busy" (another process runs the story),
    #: "halted" (a run budget stopped it), "stopped" (the coordinator asked it to stop),
    #: "interrupted" (Ctrl-C), "crashed" (the worker itself failed) or "lost" (the executor
    #: lost every worker, e.g. its cluster: the run halts, resumable).
    kind: str
    result: str | None = None
    reason: str = ""
    #: Usage spent since the worker's last report (input, output tokens, cost or None).
    usage: dict[str, Any] = field(default_factory=dict)


Message = Event | Ask | WorkerDone


class Executor(Protocol):
    name: str

    def start(self, story_id: str) -> Handle: ...

    def next_message(self, timeout: float | None) -> Message | None: ...

    def reply(self, handle: Handle, answer: Answer) -> None: ...

    def request_stop(self) -> None: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to open its own session on the project."""

    project: str
    provider: str | None
    no_worktree: bool
    #: The coordinator's environment and folder (a forkserver child would otherwise keep the
    #: environment of the moment the server started).
    environ: dict[str, str]
    cwd: str
    #: Opens the worker's own session (a module-level function of the composition root,
    #: pickled by reference: this package never imports the session).
    open_session: OpenSession
    #: `run --no-sandbox`: the workers' children run unconfined too.
    no_sandbox: bool = False


#: Imported once by the fork server (with the module of the spec's `open_session`), so each
#: worker starts without re-importing them.
_PRELOAD = [
    "ai_sdlc.workflow.parallel.executors",
    "ai_sdlc.providers.scripted",
]


def _context(spec: WorkerSpec) -> Any:
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([spec.open_session.__module__, *_PRELOAD])
    return ctx


class LocalExecutor:
    """Each story in its own local worker process (see the module docstring)."""

    name = "local"

    def __init__(self, spec: WorkerSpec, *, verify_slots: int) -> None:
        self.spec = spec
        self._ctx = _context(spec)
        self._inbox: Any = self._ctx.Queue()
        self._stop: Any = self._ctx.Event()
        self._slots: Any = self._ctx.BoundedSemaphore(max(1, verify_slots))
        # The coordinator's lifeline: only this process holds the sending end, so a worker's
        # receiving end reads end-of-file the moment the coordinator dies, however it dies.
        self._lifeline, self._lifeline_end = self._ctx.Pipe(duplex=False)  # the end is kept
        self._procs: dict[int, Any] = {}
        self._replies: dict[int, Any] = {}
        self._handles: dict[int, Handle] = {}
        self._finished: set[int] = set()
        self._next = 0

    def start(self, story_id: str) -> Handle:
        self._next += 1
        token = self._next
        replies = self._ctx.Queue()
        proc = self._ctx.Process(
            target=worker_main,
            args=(
                self.spec,
                story_id,
                token,
                self._inbox,
                replies,
                self._stop,
                self._slots,
                self._lifeline,
            ),
            name=f"ai-sdlc-{story_id}",
            daemon=True,
        )
        proc.start()
        handle = Handle(story_id, f"local:{proc.pid}", token)
        self._procs[token], self._replies[token], self._handles[token] = proc, replies, handle
        return handle

    def next_message(self, timeout: float | None) -> Message | None:
        try:
            item = self._inbox.get(timeout=timeout)
        except queue_mod.Empty:
            return self._dead_worker()
        return self._decode(item)

    def _decode(self, item: Any) -> Message:
        token, kind, payload = item
        handle = self._handles[token]
        if kind == "event":
            return Event(handle, {**payload, "worker": handle.worker})
        if kind == "ask":
            return Ask(handle, payload["kind"], payload["data"])
        self._finish(token)
        return WorkerDone(handle, **payload)

    def _dead_worker(self) -> Message | None:
        """A worker that exited without its result (killed, out of memory...)."""
        for token, proc in list(self._procs.items()):
            if token in self._finished or proc.is_alive():
                continue
            try:  # what it sent before dying comes first
                return self._decode(self._inbox.get_nowait())
            except queue_mod.Empty:
                pass
            self._finish(token)
            return WorkerDone(
                self._handles[token],
                "crashed",
                reason=f"worker process {proc.pid} exited with code {proc.exitcode}",
            )
        return None

    def _finish(self, token: int) -> None:
        self._finished.add(token)
        proc = self._procs.pop(token, None)
        if proc is not None:
            proc.join(timeout=10)
        self._replies.pop(token, None)

    def reply(self, handle: Handle, answer: Answer) -> None:
        replies = self._replies.get(handle.token)
        if replies is not None:
            replies.put(answer)

    def request_stop(self) -> None:
        self._stop.set()

    def interrupt(self) -> None:
        self._stop.set()
        for token, proc in list(self._procs.items()):
            if token not in self._finished and proc.pid is not None and proc.is_alive():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signal.SIGINT)

    def close(self) -> None:
        self._stop.set()
        for proc in list(self._procs.values()):
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self._procs.clear()


# --- the worker side ---------------------------------------------------------------------------


def worker_main(
    spec: WorkerSpec,
    story_id: str,
    token: int,
    outbox: Any,
    replies: Any,
    stop: Any,
    slots: Any,
    lifeline: Any = None,
) -> None:
    """A worker process: open a session on the project, run one story, report the result."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # Ctrl-C reaches the coordinator, which forwards it (`interrupt`)
    os.environ.clear()
    os.environ.update(spec.environ)
    with contextlib.suppress(OSError):
        os.chdir(spec.cwd)
    link: Link | None = None
    lost = threading.Event()
    interrupted = threading.Event()  # a Ctrl-C reached this worker: its roll-back is under way

    def on_interrupt(signum: int, frame: Any) -> None:
        interrupted.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_interrupt)
    if lifeline is not None:
        threading.Thread(
            target=_watch_lifeline,
            args=(lifeline, lost, interrupted, outbox),
            name="lifeline",
            daemon=True,
        ).start()

    def finish(kind: str, result: str | None = None, reason: str = "") -> None:
        usage = link.usage_delta() if link is not None else {}
        outbox.put(
            (token, "finished", {"kind": kind, "result": result, "reason": reason, "usage": usage})
        )

    try:
        session, link = _open(spec, token, outbox, replies, stop, slots)
        link.lost = lost
        try:
            ended = run_to_stop(link, story_id)
        finally:
            session.close()  # its temp folders, before the coordinator hears the end
        finish(*ended)
    except KeyboardInterrupt:
        finish("interrupted", reason="interrupted (Ctrl-C)")
    except BaseException as exc:  # the coordinator must always hear back
        from ai_sdlc.errors import AiSdlcError, disk_full

        full = disk_full(exc, spec.project)
        if full is not None:  # ENOSPC/EDQUOT/EIO: said as such, not as a crash
            finish("outcome", "error", full.message)
        elif isinstance(exc, AiSdlcError):
            finish("outcome", "error", exc.message)
        else:
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            finish("crashed", reason=f"worker failed: {last}")
    finally:
        outbox.close()
        outbox.join_thread()


#: Seconds a worker whose coordinator died has to wind down (its phase rolled back, its agent
#: or verification command ended) before it ends itself at once. Its sandboxed children end
#: with it (their launchers' lifelines), so everything of a killed run is gone within ~5 s.
LOST_GRACE = 3.0


def _watch_lifeline(
    lifeline: Any, lost: threading.Event, interrupted: threading.Event, outbox: Any
) -> None:
    """Wait for the coordinator's death (end-of-file on the lifeline), then end this worker as
    a Ctrl-C would: the phase in flight is rolled back and its children ended (the attempt is
    released, as on Ctrl-C), whatever the worker was doing, even a phase it was asked to
    finish before stopping (no one is left to hear of it). Not a second Ctrl-C when one
    already arrived (a roll-back is not interrupted). Not `getppid` (a worker's parent is the
    fork server, which may outlive the coordinator) and not `PR_SET_PDEATHSIG` (same reason;
    Linux only). After `LOST_GRACE` the worker ends at once."""
    try:
        while True:
            lifeline.recv_bytes()  # nothing is ever sent: this returns only on end-of-file
    except (EOFError, OSError):
        pass
    lost.set()
    outbox.cancel_join_thread()  # nobody reads the results any more: never wait to send them
    if not interrupted.is_set():
        with contextlib.suppress(OSError):
            os.kill(os.getpid(), signal.SIGINT)
    time.sleep(LOST_GRACE)
    os._exit(1)


def _open(
    spec: WorkerSpec, token: int, outbox: Any, replies: Any, stop: Any, slots: Any
) -> tuple[Any, Link]:
    """The worker's session (the worker closes it) and its link to the coordinator."""
    from ai_sdlc.store import StoryStore

    session = spec.open_session(
        StoryStore(Path(spec.project)),
        provider_name=spec.provider,
        no_worktree=spec.no_worktree,
        no_sandbox=spec.no_sandbox,
    )
    runner = session.runner
    link = Link(token, outbox, replies, stop, runner)
    session.relay.watcher = link
    deps = runner.deps
    deps.guard_factory = link.guard_factory(deps.guard_factory)
    verifier = deps.verifier

    def gated(path: Path) -> Any:
        with slots:
            return verifier(path)

    deps.verifier = gated
    return session, link


__all__ = [
    "Answer",
    "Ask",
    "Event",
    "Executor",
    "Handle",
    "LocalExecutor",
    "Message",
    "OpenSession",
    "StopRequested",
    "WorkerDone",
    "WorkerSpec",
    "worker_main",
]
