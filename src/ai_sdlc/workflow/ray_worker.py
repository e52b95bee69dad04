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
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue as queue_mod
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, BusyError, RunHaltedError, StoryBlockedError
from ai_sdlc.workflow.executors import StopRequested

#: Files of a story folder a snapshot carries (the runner reads nothing else).
SNAPSHOT_FILES = ("story.md", "research.md", "plan.md", "review.md")
#: Environment variables a worker adopts from the coordinator (config overrides, git identity).
#: API keys are not shipped: each worker node has its own.
SHIPPED_ENV_PREFIXES = ("AI_SDLC_", "GIT_AUTHOR_", "GIT_COMMITTER_", "GIT_CONFIG_")
#: Concurrent clones kept per remote on one node.
MAX_SLOTS = 64


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
    #: Where workers keep their clones (default: ~/.cache/ai-sdlc/ray).
    cache_dir: str | None = None


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

    def call(self, target: str, op: str, *args: Any, **kwargs: Any) -> Any:
        answer = self.link.ask(target, {"op": op, "args": args, "kwargs": kwargs})
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
            from ai_sdlc.workflow.transitions import Ticket

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
        from ai_sdlc.workflow.checkpoint import ARTIFACTS, Checkpoint

        self._tell("take", story_id, phase, taken_at=taken_at)
        present = tuple(n for n in ARTIFACTS if (self.owner.replica.folder / n).is_file())
        return Checkpoint(story_id, phase, taken_at, present, Path())

    def _tell(self, op: str, *args: Any, **kwargs: Any) -> None:
        data = {"op": op, "args": args, "kwargs": kwargs}
        self.owner.link.send("tell", {"kind": "checkpoints", "data": data})

    def pending(self, story_id: str) -> Any:
        return self.owner.call("checkpoints", "pending", story_id)

    def discard(self, story_id: str) -> None:
        """Told, not asked, like `take`."""
        self._tell("discard", story_id)

    def restore(self, checkpoint: Any, _owner: Any, reason: str) -> Any:
        return self.owner.call("checkpoints", "restore", checkpoint, reason)


# --- the workspace: a cached clone per slot ------------------------------------------------------


def _git(cwd: Path, *args: str, check: bool = True) -> Any:
    from ai_sdlc.git.run import git

    return git(cwd, *args, check=check)


@contextlib.contextmanager
def clone_slot(spec: RaySpec) -> Iterator[Path]:
    """A clone of `spec.remote_url` no other task on this node uses meanwhile (flock per slot);
    cloned once, fetched on every use."""
    from ai_sdlc.git.run import REMOTE_TIMEOUT, run

    base = Path(spec.cache_dir or Path.home() / ".cache" / "ai-sdlc" / "ray").expanduser()
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


def run_story(spec: RaySpec, story_id: str, token: int, mailbox: Any) -> dict[str, Any]:
    """The Ray task: run one story to its next stop; returns the `Finished` fields."""
    life = uuid.uuid4().hex[:12]
    ends = MailboxLink(mailbox, token, life)
    ends.put((token, "hello", {"node": node_name()}))
    link: Any = None

    def finish(kind: str, result: str | None = None, reason: str = "") -> dict[str, Any]:
        usage = link.usage_delta() if link is not None else {}
        ends.flush()
        return {"kind": kind, "result": result, "reason": reason, "usage": usage}

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


def _open(spec: RaySpec, clone: Path, story_id: str, token: int, ends: MailboxLink) -> Any:
    from ai_sdlc.config import CONFIG_RELPATH
    from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text
    from ai_sdlc.git.workspace import GitWorkspace
    from ai_sdlc.providers.scripted import RULES_FILE
    from ai_sdlc.store import StoryStore
    from ai_sdlc.workflow.executors import _Link
    from ai_sdlc.workflow.session import Session

    project = clone / spec.prefix
    (project / ".ai-sdlc").mkdir(parents=True, exist_ok=True)
    atomic_write_text(project / CONFIG_RELPATH, spec.config_json + "\n")
    if spec.scripted_rules is not None:
        atomic_write_bytes(project / RULES_FILE, spec.scripted_rules)
    # The coordinator's effective config is the whole truth: no user layer of this node.
    os.environ["AI_SDLC_CONFIG_HOME"] = str(clone.parent / "no-user-config")
    store = StoryStore(project)
    session = Session.open(store, provider_name=spec.provider, emit=lambda _event: None)
    runner = session.runner
    link = _timed_link(_Link)(token, ends, ends, _NeverSet(), runner)
    session.relay.watcher = link
    first = link.ask("snapshot", {"story": story_id})
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

        def ask(self, kind: str, data: dict[str, Any]) -> Any:
            started = time.perf_counter()
            try:
                return super().ask(kind, data)
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
                    "by_kind": self.by_kind,
                    "phases": self.phases,
                }
            )

    return TimedLink


def _run(link: Any, story_id: str) -> tuple[str, str | None, str]:
    from ai_sdlc.workflow.executors import _run as run_locally

    return run_locally(link, story_id)


def config_json(data: dict[str, Any]) -> str:
    """The effective config as a project layer for workers (YAML is a superset of JSON); the
    worktrees live inside the worker's clone whatever the coordinator's setting."""
    copy = json.loads(json.dumps(data, default=str))
    copy.setdefault("git", {})["worktrees_dir"] = ".ai-sdlc/worktrees"
    return json.dumps(copy, indent=1)


__all__ = ["RaySpec", "RemoteCheckpoints", "RemoteOwner", "config_json", "run_story"]
