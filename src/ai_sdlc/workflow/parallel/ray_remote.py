"""A Ray worker's state, owned by the coordinator: the story's ledger and checkpoints
(`RemoteOwner`, `RemoteCheckpoints`: every operation an `Ask` applied on the project's real
`StoryState`, its answer carrying a snapshot of the story's files for the worker's `Replica`),
and the run-wide circuit breakers and metrics (`SharedBreakerStore`, `SharedMetricsStore`:
the coordinator's `.ai-sdlc/state` files, replicated from every answer). See `ray_worker`."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, BusyError, RunHaltedError, StoryBlockedError
from ai_sdlc.resilience.breaker import BreakerSnapshot
from ai_sdlc.resilience.persistence import BreakerStore

#: Files of a story folder a snapshot carries (the runner reads nothing else).
SNAPSHOT_FILES = ("story.md", "research.md", "plan.md", "review.md")
#: The project's breaker file (under `.ai-sdlc/state/`), as the coordinator keeps it.
BREAKERS_FILE = "breakers.json"


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

    def await_review(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "await_review", *a, **k)

    def pr_round(self, *a: Any, **k: Any) -> Any:
        return self.call("owner", "pr_round", *a, **k)

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


__all__ = [
    "BREAKERS_FILE",
    "SNAPSHOT_FILES",
    "RemoteCheckpoints",
    "RemoteOwner",
    "Replica",
    "SharedBreakerStore",
    "SharedMetricsStore",
    "rebuild_error",
    "share_resilience_state",
    "sync_file",
]
