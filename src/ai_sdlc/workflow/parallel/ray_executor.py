"""The Ray executor: a parallel run's stories on a Ray cluster, one ledger in the coordinator.

This module is the executor protocol and the pump that feeds the scheduler; the ledger it serves
is `ray_ledger`, the ways workers reach it `ray_mailbox`, what a worker is given `ray_spec`.

The coordinator (the `ai-sdlc run` process, in the project checkout) stays the only writer of
story files. Each story runs as a Ray task (`ray_worker.run_story`) with the whole
`StoryRunner` logic on the worker, but its state owner and checkpoints are remote: every state
change and every recovery is an `Ask` that the worker sends to the coordinator, over a direct
connection (`Endpoint`: one socket round trip) or, when the worker cannot reach this node,
through a mailbox actor owned by the coordinator (which also tells the coordinator that the
cluster is alive). The coordinator applies owner and checkpoint asks itself on the project's
real `StoryState` (under the story's file lock, as on one machine) and hands the scheduler
only what it decides on (`before_phase`, `usage`, events, results). So the global
recovery limit, `api_retry` counting (the worker waits for the count before it sleeps and
retries), the run's budgets, stop conditions and failure-loop detection are the same code paths
as on one machine, in one process.

Workspaces travel through git (see `ray_worker`): a worker clones `git.remote`, resets the story
branch to the remote's, pushes each passing attempt's commit; the coordinator fetches the story
branch when the story returns.

Faults: a task whose worker process dies is retried once (`max_retries=1`) on any worker; the
retry starts like a resumed run (the phase's checkpoint is restored, the dead attempt counts as
the ledger's crash rule says: one recovery, once). A commit pushed by the dead attempt before
the coordinator recorded it is dropped first. Losing the cluster (any call to it failing, or
none answering for `CLUSTER_GRACE`) halts the run like a Ctrl-C: the coordinator releases each
running story's open attempt uncounted and restores its phase checkpoint itself (its workers
are gone), then the run stops with exit 6, resumable, its reason naming the cluster's address.
The coordinator makes no Ray call after that but one `ray.shutdown()` (without it the process
crashes in Ray's teardown at exit; its task-event flush is cut to `SHUTDOWN_FLUSH_MS`).
`verify.resources` is passed to Ray as each story task's resources (the task runs the
verification).
"""

from __future__ import annotations

import contextlib
import os
import queue as queue_mod
import threading
import time
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, ExitCode
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.parallel.executors import Answer, Ask, Event, Handle, Message, WorkerDone
from ai_sdlc.workflow.parallel.ray_ledger import LedgerServer
from ai_sdlc.workflow.parallel.ray_ledger import first_line as _first
from ai_sdlc.workflow.parallel.ray_mailbox import TAKES_IN_FLIGHT, Endpoint, Mailbox
from ai_sdlc.workflow.parallel.ray_spec import (
    RaySpec,
    ray_available,
    ray_spec_for,
    require_ray,
)

#: Seconds a mailbox read may take beyond its own timeout before the cluster counts as lost.
CLUSTER_GRACE = 10.0
#: Seconds the pump thread waits in the mailbox for news before it looks at finished tasks.
PUMP_WAIT = 0.2
#: Seconds between two looks at finished tasks while the mailbox keeps the pump busy.
FINISHED_EVERY = 0.1
#: Milliseconds the coordinator's `ray.shutdown()` waits to flush task events (Ray's default,
#: 5000, is spent in full when the cluster is gone).
SHUTDOWN_FLUSH_MS = "500"


class ClusterUnavailableError(AiSdlcError):
    """The Ray cluster cannot be reached (the run halts, resumable)."""

    exit_code = ExitCode.HALTED


class RayExecutor:
    """Stories as Ray tasks; owner and checkpoint asks answered here (module docstring)."""

    name = "ray"

    def __init__(
        self,
        spec: RaySpec,
        *,
        store: StoryStore,
        owner: Any,
        address: str | None,
        resources: dict[str, float] | None = None,
        direct: bool = True,
    ) -> None:
        import ray

        self.spec = spec
        self.store = store
        #: Owner and checkpoint asks, breaker and metrics tells, applied on the project.
        self.ledger = LedgerServer(store, owner)
        self.address = address or "a local Ray instance"
        _keep_stdout_clean()
        os.environ.setdefault("RAY_task_events_shutdown_flush_timeout_ms", SHUTDOWN_FLUSH_MS)
        try:
            if not ray.is_initialized():
                options: dict[str, Any] = {
                    "namespace": "ai-sdlc",
                    "log_to_driver": False,
                    "configure_logging": False,
                }
                if address:
                    options["address"] = address
                else:
                    options["include_dashboard"] = False
                ray.init(**options)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError from ray.init
            raise ClusterUnavailableError(
                f"cannot reach the Ray cluster at {self.address}: {_first(exc)}",
                hint="start it (ray start --head) or fix run.ray.address / --ray-address; "
                "then 'ai-sdlc run --continue'",
            ) from None
        self._ray = ray
        # An async actor: it runs many calls at once (waiting takes and answers).
        self.mailbox: Any = ray.remote(num_cpus=0)(Mailbox).remote()
        task_resources = dict(resources or {})
        cpus = float(task_resources.pop("CPU", 0) or 0)
        from ai_sdlc.workflow.parallel.ray_worker import run_story

        self._task = ray.remote(run_story).options(
            num_cpus=cpus,
            resources=task_resources or None,
            max_retries=1,
            retry_exceptions=False,
            scheduling_strategy="SPREAD",
        )
        self._refs: dict[int, Any] = {}
        self._handles: dict[int, Handle] = {}
        self._lives: dict[int, str] = {}
        self._nodes: dict[int, str] = {}
        self._next = 0
        self._lost: str | None = None
        #: What the scheduler decides on, in arrival order (filled by the pump thread).
        self._out: queue_mod.Queue[Message] = queue_mod.Queue()
        #: Guards the running tasks; held while a mailbox item is applied to the ledger and
        #: while a lost cluster's stories are settled (nothing is served after that).
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._beat = time.monotonic()
        self._told_errors: dict[int, dict[str, Any]] = {}
        self._looked = 0.0
        #: The takes waiting in the mailbox, batches that came back early, the next to apply.
        self._takes: list[Any] = []
        self._early: dict[int, list[tuple[int, str, str, Any]]] = {}
        self._next_batch = 1
        #: Seconds spent applying each task's ledger operations (told or asked): every answer
        #: carries its task's total, so the worker can tell this work from the transport.
        self._ledger_seconds: dict[int, float] = {}
        #: Direct links to workers (`run.ray.direct`, on by default); None: the mailbox only.
        self.endpoint = self._listen() if direct else None
        self._pump = threading.Thread(target=self._run_pump, name="ai-sdlc-ray-pump", daemon=True)
        self._pump.start()

    def _listen(self) -> Endpoint | None:
        try:
            host = self._ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
            return Endpoint(str(host), self._deliver)
        except OSError:  # workers then use the mailbox actor
            return None

    # --- the executor protocol ---------------------------------------------------------------
    def start(self, story_id: str) -> Handle:
        with self._lock:
            self._next += 1
            token = self._next
            handle = Handle(story_id, f"ray:task-{token}", token)
            self._handles[token] = handle
            if self._lost is None:
                try:
                    endpoint = self.endpoint.spec if self.endpoint is not None else None
                    self._refs[token] = self._task.remote(
                        self.spec, story_id, token, self.mailbox, endpoint
                    )
                except Exception as exc:
                    self._cluster_lost(exc)
        return handle

    def next_message(self, timeout: float | None) -> Message | None:
        try:
            return self._out.get(timeout=timeout)
        except queue_mod.Empty:
            pass
        if time.monotonic() - self._beat > PUMP_WAIT + CLUSTER_GRACE:
            with self._lock:  # the pump is stuck in a call to a cluster that is gone
                self._cluster_lost(TimeoutError(f"no answer within {CLUSTER_GRACE:.0f} s"))
            with contextlib.suppress(queue_mod.Empty):
                return self._out.get_nowait()
        return None

    def reply(self, handle: Handle, answer: Answer) -> None:
        life = self._lives.get(handle.token)
        if life is not None and self._lost is None:
            ledger = round(self._ledger_seconds.get(handle.token, 0.0), 6)
            answer = {**answer, "breakers": self.ledger.breakers(), "ledger_seconds": ledger}
            self._post_answer(handle.token, life, answer)

    def request_stop(self) -> None:
        """Workers hear it in the answer to their next `before_phase`."""

    def interrupt(self) -> None:
        """Ctrl-C: Ray raises KeyboardInterrupt in each running task (its phase is released and
        rolled back through the coordinator, whose pump keeps serving), then reports it."""
        for ref in list(self._refs.values()):
            with contextlib.suppress(Exception):
                self._ray.cancel(ref)

    def close(self) -> None:
        self._closing.set()
        if self.endpoint is not None:
            self.endpoint.close()
        if self._lost is None:
            for ref in list(self._refs.values()):
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref)
        self._pump.join(timeout=PUMP_WAIT + 5)
        if not self._pump.is_alive():  # a call still in flight would crash in the teardown
            with contextlib.suppress(Exception):
                self._ray.shutdown()

    # --- the pump: drains the mailbox, serves the ledger, notices finished tasks ----------------
    def _run_pump(self) -> None:
        while not self._closing.is_set() and self._lost is None:
            self._drain(PUMP_WAIT)
            now = time.monotonic()
            if now - self._looked >= FINISHED_EVERY:  # busy mailbox: look now and then
                self._looked = now
                self._collect_finished()
            self._beat = now

    def _drain(self, wait: float) -> None:
        """Apply what the mailbox holds: wait up to `wait` for news; with no wait, everything
        posted so far is applied before this returns."""
        ray = self._ray
        try:
            if wait <= 0:
                number, items = ray.get(self.mailbox.take.remote(0.0), timeout=CLUSTER_GRACE)
                self._early[number] = items
                while self._next_batch <= number:  # the batches before it are on their way
                    self._apply_batches()
                    if self._next_batch <= number:
                        self._receive(CLUSTER_GRACE)
                self._apply_batches()
                return
            while len(self._takes) < TAKES_IN_FLIGHT:
                self._takes.append(self.mailbox.take.remote(wait))
            self._receive(wait + CLUSTER_GRACE)
        except Exception as exc:
            with self._lock:
                self._cluster_lost(exc)
            return
        self._apply_batches()

    def _receive(self, timeout: float) -> None:
        """Wait for at least one waiting take to come back; keep every one that did."""
        ray = self._ray
        if not self._takes:
            raise RuntimeError("a batch of the mailbox went missing")
        ready, self._takes = ray.wait(self._takes, num_returns=1, timeout=timeout)
        if not ready:
            raise TimeoutError(f"no answer within {timeout:.0f} s")
        if self._takes:
            more, self._takes = ray.wait(self._takes, num_returns=len(self._takes), timeout=0)
            ready += more
        for number, items in ray.get(ready, timeout=CLUSTER_GRACE):
            self._early[number] = items

    def _apply_batches(self) -> None:
        while self._next_batch in self._early:
            items = self._early.pop(self._next_batch)
            self._next_batch += 1
            for token, life, kind, payload in items:
                self._deliver(token, life, kind, payload)

    def _deliver(self, token: int, life: str, kind: str, payload: Any) -> None:
        """One message of a worker (from the mailbox or its connection), applied in order."""
        with self._lock:
            if self._lost is None:
                self._item(token, life, kind, payload)

    def _item(self, token: int, life: str, kind: str, payload: Any) -> None:
        handle = self._handles.get(token)
        if handle is None or token not in self._refs:
            return
        if kind == "hello":
            node = f"ray:{payload.get('node')}"
            old = self._nodes.get(token)
            self._lives[token], self._nodes[token] = life, node
            if old is not None:  # Ray re-ran the task: its first worker died
                lost = {"event": "worker_lost", "story": handle.story_id, "worker": old}
                self._out.put(Event(handle, {**lost, "node": old, "retried_on": node}))
            return
        if life != self._lives.get(token):
            return  # a message of a dead incarnation that arrived late
        node = self._nodes.get(token, handle.worker)
        if kind == "event":
            self._out.put(Event(handle, {**payload, "worker": node, "node": node}))
            return
        ask_kind, data = payload["kind"], payload["data"]
        if kind == "tell":  # a ledger operation nobody waits on: a failure fails the next ask
            started = time.perf_counter()
            if ask_kind == "checkpoints":
                error = self.ledger.serve(handle.story_id, ask_kind, data).get("error")
            elif ask_kind == "metrics":
                error = self.ledger.add_metrics(handle.story_id, data)
            else:
                return
            self._count_ledger(token, started)
            if error and token not in self._told_errors:
                self._told_errors[token] = error
            return
        if ask_kind in ("owner", "checkpoints", "snapshot", "breaker"):
            started = time.perf_counter()
            error = self._told_errors.pop(token, None)
            answer: Answer
            if error is not None:
                answer = {"error": error, "snapshot": self.ledger.snapshot(handle.story_id)}
            else:
                answer = self.ledger.serve(handle.story_id, ask_kind, data)
            answer["ledger_seconds"] = self._count_ledger(token, started)
            self._post_answer(token, life, answer)
            return
        self._out.put(Ask(handle, ask_kind, data))

    def _count_ledger(self, token: int, started: float) -> float:
        total = self._ledger_seconds.get(token, 0.0) + time.perf_counter() - started
        self._ledger_seconds[token] = total
        return round(total, 6)

    def _post_answer(self, token: int, life: str, answer: Answer) -> None:
        if self.endpoint is not None and self.endpoint.answer(token, life, answer):
            return
        try:
            self.mailbox.answer.remote(token, life, answer)
        except Exception as exc:
            with self._lock:
                self._cluster_lost(exc)

    def _collect_finished(self) -> None:
        ray = self._ray
        with self._lock:
            refs = {ref: token for token, ref in self._refs.items()}
        if not refs:
            return
        try:
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        except Exception as exc:
            with self._lock:
                self._cluster_lost(exc)
            return
        if ready:
            self._drain(0.0)  # what the tasks posted before they returned comes first
        for ref in ready:
            token = refs[ref]
            handle = self._handles[token]
            try:
                done = dict(ray.get(ref, timeout=CLUSTER_GRACE))
                sent = done.pop("sent", None)
                if sent is not None and self.endpoint is not None:
                    self.endpoint.settle(token, str(sent[0]), int(sent[1]), CLUSTER_GRACE)
                message = WorkerDone(handle, **done)
            except ray.exceptions.TaskCancelledError:
                message = WorkerDone(handle, "interrupted", reason="interrupted (Ctrl-C)")
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
                message = WorkerDone(
                    handle, "crashed", reason=f"Ray worker died twice: {_first(exc)}"
                )
            except ray.exceptions.RayTaskError as exc:
                message = WorkerDone(handle, "crashed", reason=f"worker failed: {_first(exc)}")
            except Exception as exc:
                with self._lock:
                    self._cluster_lost(exc)
                return
            with self._lock:
                self._refs.pop(token, None)
            self._fetch_branch(handle.story_id)
            self._out.put(message)

    def _cluster_lost(self, exc: BaseException) -> None:
        """The cluster is gone, and every worker with it: settle each running story here as
        its worker would on Ctrl-C (the open attempt released uncounted, the phase's checkpoint
        restored), then it returns "lost" and the scheduler halts the run (exit 6, resumable).
        """
        with self._lock:
            if self._lost is not None:
                return
            self._lost = f"lost the Ray cluster at {self.address}: {_first(exc)}"
            for token in sorted(self._refs):
                handle = self._handles[token]
                self._settle_abandoned(handle)
                self._out.put(WorkerDone(handle, "lost", reason=self._lost))
            self._refs.clear()

    def _settle_abandoned(self, handle: Handle) -> None:
        """Roll back the phase of a worker that can no longer do it (`LedgerServer.abandon`)."""
        event = self.ledger.abandon(handle.story_id, str(self._lost))
        if event is not None:
            node = self._nodes.get(handle.token, handle.worker)
            self._out.put(Event(handle, {**event, "worker": node, "node": node}))

    def _fetch_branch(self, story_id: str) -> None:
        """Bring the story branch the workers pushed into the project's remote-tracking refs."""
        from ai_sdlc.git.run import REMOTE_TIMEOUT, run

        with contextlib.suppress(Exception):
            branch = self.store.get(story_id).frontmatter.get("branch")
            if isinstance(branch, str) and branch.startswith("ai-sdlc/"):
                remote = self.spec.remote_name
                run(
                    (
                        "git",
                        "fetch",
                        "--quiet",
                        remote,
                        f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
                    ),
                    Path(self.store.root),
                    remote=True,
                    timeout=REMOTE_TIMEOUT,
                )


def _keep_stdout_clean() -> None:
    """Ray's driver prints cluster messages ("a worker died...") to stdout, where `--json`
    writes its event stream: send them to stderr (still shown, never mixed into the JSON)."""
    import ray._private.worker as ray_worker

    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "ai_sdlc_stderr", False):
        return

    def to_stderr(data: Any, ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.ai_sdlc_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


__all__ = [
    "ClusterUnavailableError",
    "Mailbox",
    "RayExecutor",
    "ray_available",
    "ray_executor_for",
    "ray_spec_for",
    "require_ray",
]


def ray_executor_for(session: Any, address: str | None, spec: RaySpec) -> RayExecutor:
    """The Ray executor for a session's parallel run (`spec`: its `ray_spec_for`): its ledger
    the session's own store."""
    from ai_sdlc.workflow.state.transitions import StoryState

    config = session.config
    runner = session.runner
    owner = StoryState(session.store, limit=runner.limit, clock=runner.deps.clock)
    typed = config.typed()
    return RayExecutor(
        spec,
        store=session.store,
        owner=owner,
        address=address or typed.run.ray.address,
        resources=dict(typed.verify.resources),
        direct=typed.run.ray.direct,
    )
