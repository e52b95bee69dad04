"""The Ray executor: a parallel run's stories on a Ray cluster, one ledger in the coordinator.

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

import asyncio
import contextlib
import os
import pickle
import queue as queue_mod
import threading
import time
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, ExitCode, ProviderUnavailableError
from ai_sdlc.resilience.persistence import BreakerStore, StateDir
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.parallel.executors import Answer, Ask, Event, Handle, Message, WorkerDone
from ai_sdlc.workflow.parallel.ray_worker import BREAKERS_FILE, SNAPSHOT_FILES, RaySpec, no_delay

#: The StoryState operations a worker may ask for (nothing else is ever called by name).
OWNER_OPS = frozenset(
    {
        "ensure_can_act",
        "begin_action",
        "record_recovery",
        "complete_phase",
        "fail_attempt",
        "release",
        "block",
        "finish",
        "add_usage",
        "record_fields",
        "note",
    }
)
CHECKPOINT_OPS = frozenset({"take", "pending", "interrupted", "discard", "restore"})
#: The operations that end a phase: the runner's next question is always `ensure_can_act`, so
#: its answer travels with theirs (`RemoteOwner.prefetched`; dropped if anything else comes).
PREFETCH_AFTER = frozenset({"complete_phase", "fail_attempt"})
#: Seconds a mailbox read may take beyond its own timeout before the cluster counts as lost.
CLUSTER_GRACE = 10.0
#: Seconds the pump thread waits in the mailbox for news before it looks at finished tasks.
PUMP_WAIT = 0.2
#: Seconds between two looks at finished tasks while the mailbox keeps the pump busy.
FINISHED_EVERY = 0.1
#: Takes the pump keeps waiting in the mailbox (see `Mailbox`).
TAKES_IN_FLIGHT = 2
#: Milliseconds the coordinator's `ray.shutdown()` waits to flush task events (Ray's default,
#: 5000, is spent in full when the cluster is gone).
SHUTDOWN_FLUSH_MS = "500"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def require_ray() -> None:
    """Exit 4 with the install command when the `ray` extra is missing."""
    if not ray_available():
        from ai_sdlc import install_command

        raise ProviderUnavailableError(
            "--executor ray needs the Ray package, which is not installed",
            hint="install it: " + install_command("ray"),
        )


class ClusterUnavailableError(AiSdlcError):
    """The Ray cluster cannot be reached (the run halts, resumable)."""

    exit_code = ExitCode.HALTED


class Mailbox:
    """The coordinator's mailbox (an async Ray actor owned by the coordinator, so it dies with
    it): workers post events, questions and hellos; the coordinator takes them in each worker's
    posting order (sequence numbers: actor calls may run out of order) and answers.

    The coordinator keeps `TAKES_IN_FLIGHT` takes waiting here, so a post is on its way back
    at once, never waiting for the coordinator to send its next take; each take returns a
    numbered batch (numbers in the order batches left here), which the coordinator applies in
    that order."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str, str, Any]] = []
        self.batches = 0
        self.expected: dict[tuple[int, str], int] = {}
        self.held: dict[tuple[int, str, int], tuple[str, Any]] = {}
        self.answers: dict[tuple[int, str], asyncio.Queue[Any]] = {}
        self.arrived: asyncio.Event | None = None

    def _signal(self) -> asyncio.Event:
        if self.arrived is None:
            self.arrived = asyncio.Event()
        return self.arrived

    async def post(self, token: int, life: str, seq: int, kind: str, payload: Any) -> None:
        key = (token, life)
        self.held[(token, life, seq)] = (kind, payload)
        nxt = self.expected.get(key, 0)
        while (token, life, nxt) in self.held:
            k, p = self.held.pop((token, life, nxt))
            self.items.append((token, life, k, p))
            nxt += 1
        self.expected[key] = nxt
        self._signal().set()

    async def take(self, timeout: float) -> tuple[int, list[tuple[int, str, str, Any]]]:
        """The next batch (possibly empty after `timeout`), and its number."""
        signal = self._signal()
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.items:  # another waiting take may have taken what woke this one
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            signal.clear()
            try:
                await asyncio.wait_for(signal.wait(), remaining)
            except TimeoutError:
                break
        items, self.items = self.items, []
        self.batches += 1
        return self.batches, items

    def _queue(self, token: int, life: str) -> asyncio.Queue[Any]:
        return self.answers.setdefault((token, life), asyncio.Queue())

    async def answer(self, token: int, life: str, answer: Any) -> None:
        self._queue(token, life).put_nowait(answer)

    async def ask(self, token: int, life: str, seq: int, payload: Any, timeout: float) -> Any:
        """Post a question and wait for its answer in one call (one round trip fewer)."""
        await self.post(token, life, seq, "ask", payload)
        return await self.wait_answer(token, life, timeout)

    async def wait_answer(self, token: int, life: str, timeout: float) -> Any:
        try:
            return await asyncio.wait_for(self._queue(token, life).get(), timeout)
        except TimeoutError:
            return None


class Endpoint:
    """Where workers reach the coordinator directly: a listener on this node's Ray address (Ray
    already needs workers to reach the driver there), authenticated by a key made for the run.
    Each worker's connection has a reader thread handing its messages, in order, to `deliver`;
    `answer` sends back on the connection the message came from."""

    def __init__(self, host: str, deliver: Any) -> None:
        import secrets
        from multiprocessing.connection import Listener

        self.key = secrets.token_bytes(32)
        self.listener = Listener((host, 0), authkey=self.key)
        self.address: tuple[str, int] = self.listener.address
        self.deliver = deliver
        self._conns: dict[tuple[int, str], Any] = {}
        self._send_lock = threading.Lock()
        #: Messages delivered per (task, incarnation); a finished task says how many it sent.
        self._delivered: dict[tuple[int, str], int] = {}
        self._progress = threading.Condition()
        self._closed = False
        threading.Thread(target=self._accept, name="ai-sdlc-ray-accept", daemon=True).start()

    @property
    def spec(self) -> tuple[str, int, bytes]:
        return self.address[0], self.address[1], self.key

    def _accept(self) -> None:
        from multiprocessing import AuthenticationError

        while not self._closed:
            try:
                conn = self.listener.accept()
            except (AuthenticationError, EOFError, ConnectionError):
                continue  # a stranger, or a worker that went away while connecting
            except OSError:
                return  # closed
            no_delay(conn)
            threading.Thread(
                target=self._read, args=(conn,), name="ai-sdlc-ray-link", daemon=True
            ).start()

    def _read(self, conn: Any) -> None:
        key: tuple[int, str] | None = None
        try:
            while True:
                token, life, kind, payload = pickle.loads(conn.recv_bytes())
                if key is None:
                    key = (int(token), str(life))
                    self._conns[key] = conn
                self.deliver(token, life, kind, payload)
                with self._progress:
                    self._delivered[key] = self._delivered.get(key, 0) + 1
                    self._progress.notify_all()
        except (EOFError, OSError):
            pass  # the worker finished (or died): what it sent has all been delivered
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def answer(self, token: int, life: str, answer: Any) -> bool:
        """False when the worker is not on a connection of its own (it uses the mailbox)."""
        conn = self._conns.get((token, life))
        if conn is None:
            return False
        from ray import cloudpickle

        data = cloudpickle.dumps(answer)  # type: ignore[no-untyped-call]
        with self._send_lock, contextlib.suppress(OSError):
            conn.send_bytes(data)
        return True

    def settle(self, token: int, life: str, sent: int, timeout: float) -> None:
        """Wait until the `sent` messages of a finished task have all been delivered."""
        key = (token, life)
        with self._progress:
            self._progress.wait_for(lambda: self._delivered.get(key, 0) >= sent, timeout)
        self._conns.pop(key, None)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()


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

        from ai_sdlc.workflow.state.checkpoint import Checkpoints

        self.spec = spec
        self.store = store
        self.owner = owner
        self.checkpoints = Checkpoints(store)
        self._breaker_store = BreakerStore(StateDir(Path(store.root)))
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
            answer = {**answer, "breakers": self._breakers(), "ledger_seconds": ledger}
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
                error = self._serve(handle.story_id, ask_kind, data).get("error")
            elif ask_kind == "metrics":
                error = self._add_metrics(handle.story_id, data)
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
                answer = {"error": error, "snapshot": self._snapshot(handle.story_id)}
            else:
                answer = self._serve(handle.story_id, ask_kind, data)
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
        """What `StoryRunner._execute_checkpointed` does for an interrupted phase, done by the
        coordinator for a worker that can no longer do it."""
        from ai_sdlc.providers.base import Phase

        story_id, reason = handle.story_id, str(self._lost)
        node = self._nodes.get(handle.token, handle.worker)
        try:
            open_ = self.owner.ledger(story_id).open
            if open_ is None:  # no phase in flight (none began, or it completed): nothing to undo
                self.checkpoints.discard(story_id)
                return
            self.owner.release(story_id, Phase(str(open_.get("phase"))), reason)
            checkpoint = self.checkpoints.pending(story_id)
            if checkpoint is None:
                return
            restored = self.checkpoints.restore(checkpoint, self.owner, reason)
            self.checkpoints.discard(story_id)
        except Exception as exc:  # left as a crash: the resumed run counts and restores it
            failed = {"event": "rollback_failed", "story": story_id, "reason": _first(exc)}
            self._out.put(Event(handle, {**failed, "worker": node, "node": node}))
            return
        event: dict[str, Any] = {
            "event": "rollback_initiated",
            "story": story_id,
            "phase": checkpoint.phase,
            "reason": reason[:500],
            "restored": restored,
        }
        self._out.put(Event(handle, {**event, "worker": node, "node": node}))

    # --- the ledger, served here ---------------------------------------------------------------
    def _serve(self, story_id: str, kind: str, data: dict[str, Any]) -> Answer:
        if kind == "snapshot":
            return {
                "snapshot": self._snapshot(story_id),
                "folder": self.store.folder(story_id).name,
                "limit": self.owner.limit,
                "open": self.owner.ledger(story_id).open,
                "breakers": self._breakers(),
            }
        if kind == "breaker":
            try:
                return {"breaker_file": self._save_breaker(data)}
            except Exception as exc:
                return {"error": _error(exc, story_id)}
        op = str(data.get("op"))
        args, kwargs = _undelete(tuple(data.get("args") or ())), _undelete(data.get("kwargs") or {})
        recoveries: list[dict[str, Any]] = []
        self.owner.on_recovery = lambda _story, event: recoveries.append(event)
        answer: Answer = {}
        try:
            if kind == "owner" and op in OWNER_OPS:
                result = getattr(self.owner, op)(*args, **kwargs)
            elif kind == "checkpoints" and op in CHECKPOINT_OPS:
                if op == "restore":  # the coordinator's own checkpoint (the worker's is a name)
                    checkpoint = self.checkpoints.pending(story_id)
                    if checkpoint is None:
                        raise AiSdlcError(f"no checkpoint of {story_id} to restore")
                    result = self.checkpoints.restore(checkpoint, self.owner, args[1])
                else:
                    result = getattr(self.checkpoints, op)(*args, **kwargs)
            else:
                raise AiSdlcError(f"unknown operation {kind}.{op}")
            answer["result"] = _encode(result)
        except Exception as exc:
            answer["error"] = _error(exc, story_id)
        answer["recoveries"] = recoveries
        if kind == "owner" and op in PREFETCH_AFTER and "error" not in answer:
            answer["prefetched"] = self._ensure(story_id)
        answer["snapshot"] = self._snapshot(story_id)
        answer["breakers"] = self._breakers()
        return answer

    def _add_metrics(self, story_id: str, data: dict[str, Any]) -> dict[str, Any] | None:
        """A worker's policy metrics, added to the project's as a local worker adds them."""
        from ai_sdlc.resilience.persistence import MetricsStore

        try:
            store = MetricsStore(self._breaker_store.state)
            store.add(dict(data.get("policies") or {}), dict(data.get("breakers") or {}))
        except Exception as exc:
            return _error(exc, story_id)
        return None

    def _breakers(self) -> bytes | None:
        """The project's breaker file, as every answer carries it (`ray_worker`)."""
        try:
            return self._breaker_store.state.file(BREAKERS_FILE).read_bytes()
        except FileNotFoundError:
            return None

    def _save_breaker(self, data: dict[str, Any]) -> bytes | None:
        """A worker's breaker changed state: store it as `PersistentBreaker.save` does, under
        the file's lock (an open state another worker stored since this one read it wins);
        returns the file as it now is."""
        from ai_sdlc.resilience.breaker import BreakerSnapshot, CircuitState

        store = self._breaker_store
        name, revision = str(data["name"]), int(data["revision"])
        remaining = data.get("open_remaining")
        snapshot = BreakerSnapshot(
            CircuitState(str(data["state"])),
            float(remaining) if remaining is not None else None,
            bool(data.get("forced")),
        )
        with store.locked():
            stored = store.load(name)
            newer = stored is not None and stored.revision >= revision
            if not (
                newer
                and stored is not None
                and stored.still_open(store.wall_clock())
                and snapshot.state is not CircuitState.OPEN
            ):
                store.write(name, snapshot, max(revision, stored.revision + 1 if stored else 1))
        return self._breakers()

    def _ensure(self, story_id: str) -> Answer:
        """`ensure_can_act` now, for the worker's next question (see `PREFETCH_AFTER`)."""
        recoveries: list[dict[str, Any]] = []
        self.owner.on_recovery = lambda _story, event: recoveries.append(event)
        answer: Answer = {"recoveries": recoveries}
        try:
            answer["result"] = _encode(self.owner.ensure_can_act(story_id))
        except Exception as exc:
            answer["error"] = _error(exc, story_id)
        return answer

    def _snapshot(self, story_id: str) -> dict[str, bytes | None]:
        folder = self.store.folder(story_id)
        out: dict[str, bytes | None] = {}
        for name in SNAPSHOT_FILES:
            try:
                out[name] = (folder / name).read_bytes()
            except FileNotFoundError:
                out[name] = None
        return out

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


def _error(exc: BaseException, story_id: str) -> dict[str, Any]:
    """A refusal (or failure) of the ledger, as the worker raises it again (`rebuild_error`)."""
    if isinstance(exc, AiSdlcError):
        return {
            "type": type(exc).__name__,
            "message": exc.message,
            "hint": exc.hint,
            "story_id": getattr(exc, "story_id", story_id),
        }
    return {"type": "crash", "message": _first(exc)}


def _encode(result: Any) -> tuple[str, Any]:
    from ai_sdlc.store import Story
    from ai_sdlc.workflow.state.transitions import Ticket

    if isinstance(result, Story):
        return "story", None
    if isinstance(result, Ticket):
        return "ticket", {
            "attempt": result.attempt,
            "last_failure": result.last_failure,
            "verified": result.verified,
        }
    return "value", result


def _undelete(value: Any) -> Any:
    """`DELETE` is compared by identity: a pickled copy becomes the coordinator's marker."""
    from ai_sdlc.workflow.state.transitions import DELETE

    if type(value) is type(DELETE):
        return DELETE
    if isinstance(value, dict):
        return {k: _undelete(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_undelete(v) for v in value)
    return value


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


__all__ = [
    "ClusterUnavailableError",
    "Mailbox",
    "RayExecutor",
    "ray_executor_for",
    "ray_spec_for",
    "require_ray",
]


def ray_executor_for(session: Any, address: str | None, spec: RaySpec | None = None) -> RayExecutor:
    """The Ray executor for a session's parallel run: its ledger the session's own store."""
    from ai_sdlc.workflow.state.transitions import StoryState

    spec = spec or ray_spec_for(session)
    config = session.config
    runner = session.runner
    owner = StoryState(session.store, limit=runner.limit, clock=runner.deps.clock)
    resources = config.get("verify.resources") or {}
    return RayExecutor(
        spec,
        store=session.store,
        owner=owner,
        address=address or config.get("run.ray.address"),
        resources={str(k): float(v) for k, v in dict(resources).items()},
        direct=bool(config.get("run.ray.direct")),
    )


def ray_spec_for(session: Any) -> RaySpec:
    """What the workers need, from the project (remote, effective config, scripted rules);
    refuses a project the workers could not work on (checked before a run is created)."""
    import os

    from ai_sdlc.errors import UsageError
    from ai_sdlc.git import repo
    from ai_sdlc.providers.scripted import RULES_FILE
    from ai_sdlc.workflow.parallel.ray_worker import SHIPPED_ENV_PREFIXES, config_json

    require_ray()
    config = session.config
    root = Path(session.store.root).resolve()
    if session.no_worktree:
        raise UsageError(
            "--executor ray works through git worktrees: --no-worktree cannot be used with it"
        )
    top = repo.toplevel(root)
    remote = str(config.get("git.remote"))
    url = repo.remote_url(top, remote) if top is not None else None
    if top is None or not url:
        raise UsageError(
            f"--executor ray needs a git remote {remote!r} the workers can clone and push to",
            hint=f"add it (git remote add {remote} URL) or set git.remote",
        )
    rules = root / RULES_FILE
    return RaySpec(
        remote_url=url,
        remote_name=remote,
        prefix=root.relative_to(top).as_posix() if root != top else "",
        provider=session.provider_name,
        config_json=config_json(config.data),
        scripted_rules=rules.read_bytes() if rules.is_file() else None,
        environ={k: v for k, v in os.environ.items() if k.startswith(SHIPPED_ENV_PREFIXES)},
        cache_dir=config.get("run.ray.cache_dir"),
        no_sandbox=session.no_sandbox,
    )
