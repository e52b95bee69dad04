"""The worker side of the Ray executor: one story run on a cluster node, with no ledger of its own.

A Ray task (`run_story`) takes a story to its next stop, like a local worker process, with three
differences that keep the coordinator's ledger the only one:

- **State**: the `StoryRunner` keeps its logic, but its state owner and checkpoints are
  `RemoteOwner`/`RemoteCheckpoints`: every call (begin an attempt, count a recovery, complete a
  phase, take or restore a checkpoint...) travels to the coordinator as an `Ask`, runs there on
  the project's real `StoryState`, and comes back with the result and a snapshot of the story's
  files. The snapshot is written into the worker's *replica* (its clone's `.ai-sdlc/stories/`,
  never the project's), which is all the runner ever reads.
- **Workspace**: the worker clones `git.remote` into a cached slot of its own (one slot per
  concurrent task on a node, reused by later tasks), resets the story branch to the remote's,
  runs the phase in a worktree of that clone and pushes every passing attempt's commit at once.
- **Liveness**: every action starts with an `Ask`; a worker whose coordinator is gone (the
  mailbox actor died with it) stops there (`StopRequested`), before acting.
- **Circuit breakers**: run-wide, as between local workers, whose breakers share the project's
  `.ai-sdlc/state/breakers.json`: here that file is the coordinator's. Every answer carries its
  bytes, which the worker keeps as its replica (what each operation's `refresh` reads), and a
  state change is written by the coordinator under the file's lock, an open breaker stored by
  another worker still winning (`SharedBreakerStore`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import queue as queue_mod
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, BusyError, RunHaltedError, StoryBlockedError
from ai_sdlc.resilience.breaker import BreakerSnapshot
from ai_sdlc.resilience.persistence import BreakerStore
from ai_sdlc.workflow.parallel.executors import StopRequested

#: Files of a story folder a snapshot carries (the runner reads nothing else).
SNAPSHOT_FILES = ("story.md", "research.md", "plan.md", "review.md")
#: Environment variables a worker adopts from the coordinator (config overrides, git identity).
#: API keys are not shipped: each worker node has its own.
SHIPPED_ENV_PREFIXES = ("AI_SDLC_", "GIT_AUTHOR_", "GIT_COMMITTER_", "GIT_CONFIG_")
#: Concurrent clones kept per remote on one node.
MAX_SLOTS = 64
#: The project's breaker file (under `.ai-sdlc/state/`), as the coordinator keeps it.
BREAKERS_FILE = "breakers.json"
#: Seconds a worker tries to reach the coordinator directly before using the mailbox actor.
CONNECT_TIMEOUT = 2.0


@dataclass(frozen=True)
class RaySpec:
    """What a cluster worker needs; everything here crosses the network (no local paths of the
    coordinator are used on the worker)."""

    remote_url: str
    remote_name: str
    #: The project folder inside the repository ("" when it is the top).
    prefix: str
    provider: str | None
    #: The coordinator's effective configuration (all layers merged), as JSON.
    config_json: str
    #: The scripted provider's rules file, when the project has one.
    scripted_rules: bytes | None
    environ: dict[str, str] = field(default_factory=dict)
    #: Where workers keep their clones (default: the user state folder's `ray`, which sandboxed
    #: agents cannot write; `~/.cache`, which they can, would let one edit a clone's git config).
    cache_dir: str | None = None
    #: `run --no-sandbox`: the workers' children run unconfined too.
    no_sandbox: bool = False


# --- the link to the coordinator ---------------------------------------------------------------


class MailboxLink:
    """Queue-like ends over the coordinator's mailbox actor: `put` posts (in order, by sequence
    number), `get` waits for the coordinator's answer to this incarnation's question."""

    def __init__(self, mailbox: Any, token: int, life: str) -> None:
        self.mailbox = mailbox
        self.token = token
        self.life = life
        self.seq = 0
        self.posted: list[Any] = []
        self.question: Any = None

    def put(self, item: tuple[int, str, Any]) -> None:
        _token, kind, payload = item
        if kind == "ask":  # sent by `get`, together with the wait for its answer
            self.question = payload
            return
        self.posted.append(self.mailbox.post.remote(self.token, self.life, self.seq, kind, payload))
        self.seq += 1

    def get(self, timeout: float) -> Any:
        import ray

        try:
            if self.question is not None:
                question, self.question = self.question, None
                call = self.mailbox.ask.remote(self.token, self.life, self.seq, question, timeout)
                self.seq += 1
            else:
                call = self.mailbox.wait_answer.remote(self.token, self.life, timeout)
            answer = ray.get(call)
        except (ray.exceptions.RayActorError, ray.exceptions.RaySystemError) as exc:
            raise StopRequested(
                f"the coordinator of the run is gone ({type(exc).__name__})"
            ) from None
        if answer is None:
            raise queue_mod.Empty
        return answer

    def flush(self) -> None:
        """Wait until everything posted is in the mailbox (before the task returns)."""
        import ray

        with contextlib.suppress(Exception):
            ray.get(self.posted, timeout=30)
        self.posted.clear()


def no_delay(conn: Any) -> None:
    """Send each message at once: with Nagle's algorithm a small message written right after
    another waits for the peer's delayed ACK (40 ms on Linux), which is most questions."""
    import socket

    with contextlib.suppress(OSError):
        sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        finally:
            sock.close()  # a duplicate of the connection's descriptor: the connection stays


class SocketLink:
    """The same ends over a direct connection to the coordinator (`ray_executor.Endpoint`): one
    round trip per question instead of four Ray calls through the mailbox actor, in order by
    construction. A connection that fails or closes means the coordinator is gone."""

    def __init__(self, conn: Any, token: int, life: str) -> None:
        self.conn = conn
        self.token = token
        self.life = life
        self.question: Any = None
        #: Messages sent: the task's result says so, and the coordinator waits for them all.
        self.sent = 0

    @classmethod
    def connect(cls, endpoint: Any, token: int, life: str) -> SocketLink | None:
        """A link, or None when the coordinator cannot be reached directly from this node
        (the mailbox actor is used instead)."""
        import socket
        from multiprocessing.connection import Client

        if endpoint is None:
            return None
        host, port, key = endpoint
        try:  # a quick check first: `Client` itself would wait for the OS's connect timeout
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
            conn = Client((host, port), authkey=key)
        except OSError:
            return None
        no_delay(conn)
        return cls(conn, token, life)

    def _send(self, kind: str, payload: Any) -> None:
        from ray import cloudpickle  # as Ray itself sends them (the runner passes callables)

        message = (self.token, self.life, kind, payload)
        try:
            self.conn.send_bytes(cloudpickle.dumps(message))  # type: ignore[no-untyped-call]
            self.sent += 1
        except OSError as exc:
            raise StopRequested(f"the coordinator of the run is gone ({exc})") from None

    def put(self, item: tuple[int, str, Any]) -> None:
        _token, kind, payload = item
        if kind == "ask":  # sent by `get`, which then waits for the answer
            self.question = payload
            return
        self._send(kind, payload)

    def get(self, timeout: float) -> Any:
        if self.question is not None:
            question, self.question = self.question, None
            self._send("ask", question)
        try:
            if not self.conn.poll(timeout):
                raise queue_mod.Empty
            return pickle.loads(self.conn.recv_bytes())
        except (OSError, EOFError) as exc:
            raise StopRequested(f"the coordinator of the run is gone ({exc!r})") from None

    def flush(self) -> None:
        """Everything sent is in the coordinator's hands once the connection is closed."""
        with contextlib.suppress(OSError):
            self.conn.close()


class _NeverSet:
    """The stop flag of a cluster worker: the coordinator says "stop" in its answers instead."""

    def is_set(self) -> bool:
        return False


class Replica:
    """The worker's read-only copy of one story folder, refreshed from every answer."""

    def __init__(self, project: Path, story_id: str, folder_name: str) -> None:
        self.story_id = story_id
        self.folder = project / ".ai-sdlc" / "stories" / folder_name
        self.held: dict[str, bytes | None] = {}

    def write(self, snapshot: dict[str, bytes | None]) -> None:
        """Only what changed, replaced atomically; no fsync (a cache the next answer renews)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in SNAPSHOT_FILES:
            data = snapshot.get(name)
            if name in self.held and self.held[name] == data:
                continue
            target = self.folder / name
            if data is None:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
            else:
                temp = target.with_name(f".{name}.replica")
                temp.write_bytes(data)
                os.replace(temp, target)
            self.held[name] = data


def rebuild_error(error: dict[str, Any]) -> BaseException:
    """The coordinator's refusal, raised again on the worker with the same type and message."""
    kind, message, hint = error["type"], str(error["message"]), error.get("hint")
    if kind == "StoryBlockedError":
        return StoryBlockedError(message, story_id=str(error.get("story_id")), hint=hint)
    if kind == "RunHaltedError":
        return RunHaltedError(message, hint=hint)
    if kind == "BusyError":
        return BusyError(message, hint=hint)
    if kind == "crash":
        return RuntimeError(f"the coordinator failed to apply the change: {message}")
    return AiSdlcError(message, hint=hint)


class RemoteOwner:
    """`StoryState`'s operations, executed by the coordinator (see the module docstring)."""

    def __init__(self, link: Any, replica: Replica, runner: Any, limit: int) -> None:
        self.link = link
        self.replica = replica
        self.runner = runner
        self.limit = limit
        #: The coordinator's answer to the `ensure_can_act` the runner makes right after a
        #: phase ends, computed with the phase's last change (one round trip fewer per phase);
        #: dropped as soon as anything else is asked.
        self.prefetched: dict[str, Any] | None = None

    def call(self, target: str, op: str, *args: Any, **kwargs: Any) -> Any:
        prefetched, self.prefetched = self.prefetched, None
        this_story = (args, kwargs) == ((self.replica.story_id,), {})
        if op == "ensure_can_act" and prefetched is not None and this_story:
            answer = prefetched  # nothing was asked of the ledger since it was computed
        else:
            answer = self.link.ask(target, {"op": op, "args": args, "kwargs": kwargs})
            self.prefetched = answer.get("prefetched")
        snapshot = answer.get("snapshot")
        if snapshot is not None:
            self.replica.write(snapshot)
        for event in answer.get("recoveries") or ():
            self.runner._recovered(self.replica.story_id, event)
        if answer.get("error"):
            raise rebuild_error(answer["error"])
        kind, value = answer["result"]
        if kind == "story":
            return self.runner.store.get(self.replica.story_id)
        if kind == "ticket":
            from ai_sdlc.workflow.state.transitions import Ticket

            story = self.runner.store.get(self.replica.story_id)
            return Ticket(story, value["attempt"], value["last_failure"], value["verified"])
        return value

    # The operations the runner uses, by name (the coordinator accepts only these).
    def ensure_can_act(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "ensure_can_act", *a, **k)

    def begin_action(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "begin_action", *a, **k)

    def record_recovery(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "record_recovery", *a, **k)

    def complete_phase(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "complete_phase", *a, **k)

    def fail_attempt(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "fail_attempt", *a, **k)

    def release(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "release", *a, **k)

    def block(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "block", *a, **k)

    def finish(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "finish", *a, **k)

    def add_usage(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "add_usage", *a, **k)

    def record_fields(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "record_fields", *a, **k)

    def note(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "note", *a, **k)


class RemoteCheckpoints:
    """`Checkpoints`, kept by the coordinator in the project (a restore goes through its owner)."""

    def __init__(self, owner: RemoteOwner) -> None:
        self.owner = owner

    def take(self, story_id: str, phase: str, *, taken_at: str) -> Any:
        """Told, not asked (one round trip fewer per phase): the coordinator takes it before
        this worker's next question, and fails that question if it could not. The runner
        only keeps the returned value to name the phase on a rollback; a restore uses the
        coordinator's own checkpoint."""
        from ai_sdlc.workflow.state.checkpoint import ARTIFACTS, Checkpoint

        self._tell("take", story_id, phase, taken_at=taken_at)
        present = tuple(n for n in ARTIFACTS if (self.owner.replica.folder / n).is_file())
        return Checkpoint(story_id, phase, taken_at, present, Path())

    def _tell(self, op: str, *args: Any, **kwargs: Any) -> None:
        data = {"op": op, "args": args, "kwargs": kwargs}
        self.owner.link.send("tell", {"kind": "checkpoints", "data": data})

    def pending(self, story_id: str) -> Any:
        return self.owner.call("checkpoints", "pending", story_id)

    def interrupted(self, story_id: str) -> Any:
        return self.owner.call("checkpoints", "interrupted", story_id)

    def discard(self, story_id: str) -> None:
        """Told, not asked, like `take`."""
        self._tell("discard", story_id)

    def restore(self, checkpoint: Any, _owner: Any, reason: str) -> Any:
        return self.owner.call("checkpoints", "restore", checkpoint, reason)


# --- circuit breakers, shared through the coordinator -------------------------------------------


def sync_file(path: Path, data: bytes | None) -> None:
    """Make `path` hold `data` (None: absent); replaced atomically, no fsync (a replica)."""
    try:
        current: bytes | None = path.read_bytes()
    except FileNotFoundError:
        current = None
    if current == data:
        return
    if data is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.replica")
    temp.write_bytes(data)
    os.replace(temp, path)


def share_resilience_state(link: Any, manager: Any, state_folder: Path) -> None:
    """Point every persistent breaker of `manager` at the coordinator's breaker file, and its
    metrics at the project's (`ai-sdlc metrics` counts cluster calls as local ones)."""
    from ai_sdlc.resilience.persistence import StateDir

    store = SharedBreakerStore(StateDir(state_folder.parent.parent), link)
    for name in manager.names:
        breaker = manager.persistent_breaker(name)
        if breaker is not None:
            breaker.store = store
            breaker.refresh()
    manager.send_metrics_to(SharedMetricsStore(link))


class SharedMetricsStore:
    """`MetricsStore.add`, told to the coordinator (added to the project's `metrics.json`
    there; a failure fails this worker's next question, as for checkpoints)."""

    def __init__(self, link: Any) -> None:
        self.link = link

    def add(self, policies: Any, breakers: Any) -> None:
        data = {"policies": dict(policies), "breakers": dict(breakers)}
        self.link.send("tell", {"kind": "metrics", "data": data})

    def load(self) -> dict[str, Any]:
        return {}


class SharedBreakerStore(BreakerStore):
    """A `BreakerStore` whose reads are the worker's replica of the coordinator's file and
    whose writes are the coordinator's: it applies the same rule as `PersistentBreaker.save`
    (an open state stored by someone else since this worker read it wins) under the project
    file's lock. The file as written comes back and replaces the replica when the breaker's
    lock is left, after the breaker noted the replica it saved against: so its next `refresh`
    adopts whatever the coordinator kept."""

    def __init__(self, state: Any, link: Any) -> None:
        super().__init__(state)
        self.link = link
        self._lock = threading.RLock()
        self._pending: list[bytes | None] = []

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            finally:
                while self._pending:
                    sync_file(self.state.file(BREAKERS_FILE), self._pending.pop(0))

    def write(self, name: str, snapshot: BreakerSnapshot, revision: int) -> None:
        data = {
            "name": name,
            "state": snapshot.state.value,
            "open_remaining": snapshot.open_remaining,
            "forced": snapshot.forced,
            "revision": revision,
        }
        answer = self.link.ask("breaker", data)
        if answer.get("error"):
            raise rebuild_error(answer["error"])
        self._pending.append(answer.get("breaker_file"))


# --- the workspace: a cached clone per slot ------------------------------------------------------


def _git(cwd: Path, *args: str, check: bool = True) -> Any:
    from ai_sdlc.git.run import git

    return git(cwd, *args, check=check)


@contextlib.contextmanager
def clone_slot(spec: RaySpec) -> Iterator[Path]:
    """A clone of `spec.remote_url` no other task on this node uses meanwhile (flock per slot);
    cloned once, fetched on every use."""
    from ai_sdlc.git.run import REMOTE_TIMEOUT, run
    from ai_sdlc.statehome import user_state_dir

    base = Path(spec.cache_dir or user_state_dir() / "ray").expanduser()
    key = hashlib.sha256(spec.remote_url.encode()).hexdigest()[:16]
    folder = base / key
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(MAX_SLOTS):
        lock = (folder / f"slot-{n}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        try:
            clone = folder / f"slot-{n}"
            if not (clone / ".git").exists():
                run(
                    (
                        "git",
                        "clone",
                        "--quiet",
                        "-o",
                        spec.remote_name,
                        spec.remote_url,
                        str(clone),
                    ),
                    folder,
                    remote=True,
                    timeout=REMOTE_TIMEOUT,
                )
            run(
                ("git", "fetch", "--quiet", "--prune", spec.remote_name),
                clone,
                remote=True,
                timeout=REMOTE_TIMEOUT,
            )
            yield clone
            return
        finally:
            lock.close()
    raise AiSdlcError(f"all {MAX_SLOTS} clone slots under {folder} are busy")


def reset_story_branch(
    clone: Path, remote: str, branch: str, worktree: Path, story_id: str
) -> None:
    """Start from what the remote holds: no worktree, branch or checkpoint left by an earlier
    task in this slot (the pushed branch is the truth; uncommitted work of a dead task is gone)."""
    if worktree.exists():
        _git(clone, "worktree", "remove", "--force", str(worktree), check=False)
    _git(clone, "worktree", "prune", check=False)
    _git(clone, "branch", "-D", branch, check=False)
    _git(clone, "update-ref", "-d", f"refs/ai-sdlc/checkpoints/{story_id}", check=False)
    remote_ref = f"refs/remotes/{remote}/{branch}"
    if _git(clone, "rev-parse", "--verify", "--quiet", remote_ref, check=False).ok:
        _git(clone, "branch", "--no-track", branch, remote_ref)


def drop_unsettled_commit(clone: Path, remote: str, branch: str, story_id: str, open_: Any) -> bool:
    """A task that pushed a passing attempt's commit and died before the coordinator recorded
    the attempt leaves a commit the ledger counts as a crashed attempt: drop it (lease-protected
    force push), so the branch holds exactly one commit per attempt the ledger calls passed."""
    if not isinstance(open_, dict) or open_.get("phase") not in ("implement", "rework"):
        return False
    if not _git(clone, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).ok:
        return False
    message = _git(clone, "log", "-1", "--format=%B", branch).stdout
    wanted = {f"AI-SDLC-Story: {story_id}", f"AI-SDLC-Attempt: {open_.get('attempt')}"}
    if not wanted <= {line.strip() for line in message.splitlines()}:
        return False
    tip = _git(clone, "rev-parse", branch).stdout.strip()
    _git(clone, "branch", "-f", branch, f"{branch}^")
    lease = f"--force-with-lease=refs/heads/{branch}:{tip}"
    _git(clone, "push", "--quiet", lease, remote, f"refs/heads/{branch}:refs/heads/{branch}")
    return True


class PushingWorkspace:
    """The clone's `GitWorkspace`, pushing every passing attempt's commit right away (the
    coordinator and any retry on another node see the work through the remote)."""

    def __init__(self, inner: Any, remote: str) -> None:
        self.inner = inner
        self.remote = remote

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def attempt_passed(self, story: Any, path: Path, *, attempt: int) -> Any:
        from ai_sdlc.git.run import REMOTE_TIMEOUT, run

        record = self.inner.attempt_passed(story, path, attempt=attempt)
        if record.commit:
            branch, _folder = self.inner.location(story)
            run(
                ("git", "push", "--quiet", self.remote, f"HEAD:refs/heads/{branch}"),
                path,
                remote=True,
                timeout=REMOTE_TIMEOUT,
            )
        return record


# --- the task ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def node_name() -> str:
    import ray

    return f"{ray.util.get_node_ip_address()}:{os.getpid()}"  # type: ignore[no-untyped-call]


def run_story(
    spec: RaySpec, story_id: str, token: int, mailbox: Any, endpoint: Any = None
) -> dict[str, Any]:
    """The Ray task: run one story to its next stop; returns the `WorkerDone` fields. It talks
    to the coordinator over `endpoint` (host, port, key) when it can, else through `mailbox`."""
    life = uuid.uuid4().hex[:12]
    ends: Any = SocketLink.connect(endpoint, token, life) or MailboxLink(mailbox, token, life)
    ends.put((token, "hello", {"node": node_name()}))
    link: Any = None

    def finish(kind: str, result: str | None = None, reason: str = "") -> dict[str, Any]:
        usage = link.usage_delta() if link is not None else {}
        ends.flush()
        done = {"kind": kind, "result": result, "reason": reason, "usage": usage}
        if isinstance(ends, SocketLink):
            done["sent"] = (life, ends.sent)
        return done

    try:
        with _environment(spec.environ), clone_slot(spec) as clone:
            link = _open(spec, clone, story_id, token, ends)
            outcome = _run(link, story_id)
            link.report(story_id)
            return finish(*outcome)
    except StopRequested as exc:
        return finish("stopped", reason=str(exc))
    except KeyboardInterrupt:
        return finish("interrupted", reason="interrupted (Ctrl-C)")
    except AiSdlcError as exc:
        return finish("outcome", "error", exc.message)


def _open(spec: RaySpec, clone: Path, story_id: str, token: int, ends: Any) -> Any:
    from ai_sdlc.config import CONFIG_RELPATH
    from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text
    from ai_sdlc.git.workspace import GitWorkspace
    from ai_sdlc.providers.scripted import RULES_FILE
    from ai_sdlc.store import StoryStore
    from ai_sdlc.workflow.parallel.executors import _Link
    from ai_sdlc.workflow.session import Session

    project = clone / spec.prefix
    (project / ".ai-sdlc").mkdir(parents=True, exist_ok=True)
    atomic_write_text(project / CONFIG_RELPATH, spec.config_json + "\n")
    if spec.scripted_rules is not None:
        atomic_write_bytes(project / RULES_FILE, spec.scripted_rules)
    # The coordinator's effective config is the whole truth: no user layer of this node.
    os.environ["AI_SDLC_CONFIG_HOME"] = str(clone.parent / "no-user-config")
    # Breaker state is the coordinator's alone (`shared_breakers`): none left by an earlier task.
    state_folder = project / ".ai-sdlc" / "state"
    sync_file(state_folder / BREAKERS_FILE, None)
    store = StoryStore(project)
    session = Session.open(
        store, provider_name=spec.provider, emit=lambda _event: None, no_sandbox=spec.no_sandbox
    )
    runner = session.runner
    link = _timed_link(_Link)(token, ends, ends, _NeverSet(), runner)
    link.breakers_file = state_folder / BREAKERS_FILE
    session.relay.watcher = link
    first = link.ask("snapshot", {"story": story_id})
    share_resilience_state(link, _policy_manager(runner), state_folder)
    replica = Replica(project, story_id, str(first["folder"]))
    replica.write(first["snapshot"])
    owner = RemoteOwner(link, replica, runner, int(first["limit"]))
    proxied: Any = runner  # the runner takes any object with the owner's operations
    proxied.owner = owner
    proxied.checkpoints = RemoteCheckpoints(owner)
    deps = runner.deps
    deps.guard_factory = link.guard_factory(deps.guard_factory)
    workspaces = runner.workspaces
    if isinstance(workspaces, GitWorkspace):
        story = store.get(story_id)
        branch, folder = workspaces.location(story)
        reset_story_branch(clone, spec.remote_name, branch, folder, story_id)
        if drop_unsettled_commit(clone, spec.remote_name, branch, story_id, first.get("open")):
            link.observe(
                {"event": "worker_note", "story": story_id, "note": "dropped an unsettled commit"}
            )
        runner.workspaces = PushingWorkspace(workspaces, spec.remote_name)
    return link


def _policy_manager(runner: Any) -> Any:
    """The resilience policies of the runner's provider calls (its `GuardFactory`'s)."""
    guards = getattr(runner.deps.guard_factory, "__self__", None)
    manager = getattr(guards, "manager", None)
    if manager is None:
        raise AiSdlcError("the worker's runner has no resilience policies to share")
    return manager


def _timed_link(base: type) -> Any:
    """The local worker's link, counting the time this story waits on the coordinator (the
    coordination overhead `bench/bench_cluster.py` reports per phase)."""

    class TimedLink(base):  # type: ignore[misc]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.asks = 0
            self.waited = 0.0
            self.phases = 0
            self.by_kind: dict[str, float] = {}
            #: The replica of the coordinator's breaker file, renewed by every answer.
            self.breakers_file: Path | None = None
            #: Seconds the coordinator spent applying this story's ledger operations.
            self.ledger = 0.0

        def ask(self, kind: str, data: dict[str, Any]) -> Any:
            started = time.perf_counter()
            try:
                answer = super().ask(kind, data)
                if "breakers" in answer and self.breakers_file is not None:
                    sync_file(self.breakers_file, answer["breakers"])
                self.ledger = float(answer.get("ledger_seconds") or self.ledger)
                return answer
            finally:
                took = time.perf_counter() - started
                self.asks += 1
                self.waited += took
                self.by_kind[kind] = round(self.by_kind.get(kind, 0.0) + took, 6)

        def guard_factory(self, inner: Any) -> Any:
            """The run's spend is synced before each provider call only when a run budget
            (`limits.run_cost_usd`) needs it; otherwise it travels with `before_phase` and the
            result, one round trip per call fewer."""
            if self.runner.deps.limits.run_cost_usd is None:
                return inner
            return super().guard_factory(inner)

        def observe(self, event: dict[str, Any]) -> None:
            if event.get("event") == "phase_started":
                self.phases += 1
            super().observe(event)

        def report(self, story_id: str) -> None:
            super().observe(
                {
                    "event": "coordination",
                    "story": story_id,
                    "asks": self.asks,
                    "seconds": round(self.waited, 6),
                    "ledger_seconds": round(self.ledger, 6),
                    "by_kind": self.by_kind,
                    "phases": self.phases,
                    "link": "direct" if isinstance(self.outbox, SocketLink) else "mailbox",
                }
            )

    return TimedLink


def _run(link: Any, story_id: str) -> tuple[str, str | None, str]:
    from ai_sdlc.workflow.parallel.executors import _run as run_locally

    return run_locally(link, story_id)


def config_json(data: dict[str, Any]) -> str:
    """The effective config as a project layer for workers (YAML is a superset of JSON); the
    worktrees live inside the worker's clone whatever the coordinator's setting."""
    copy = json.loads(json.dumps(data, default=str))
    copy.setdefault("git", {})["worktrees_dir"] = ".ai-sdlc/worktrees"
    return json.dumps(copy, indent=1)


__all__ = ["RaySpec", "RemoteCheckpoints", "RemoteOwner", "config_json", "run_story"]
