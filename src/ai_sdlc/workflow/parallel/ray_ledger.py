"""The ledger a Ray run's workers use, served by the coordinator (`ray_executor`): owner and
checkpoint operations applied on the project's real `StoryState` and `Checkpoints` (only the
operations named here, never anything else by name), the project's breaker file and metrics;
every answer carries the story's files for the worker's replica (`ray_remote`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.resilience.persistence import BreakerStore, StateDir
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.parallel.ray_remote import BREAKERS_FILE, SNAPSHOT_FILES
from ai_sdlc.workflow.parallel.worker import Answer

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
        "await_review",
        "pr_round",
        "add_usage",
        "record_fields",
        "note",
    }
)
CHECKPOINT_OPS = frozenset({"take", "pending", "interrupted", "discard", "restore"})
#: The operations that end a phase: the runner's next question is always `ensure_can_act`, so
#: its answer travels with theirs (`RemoteOwner.prefetched`; dropped if anything else comes).
PREFETCH_AFTER = frozenset({"complete_phase", "fail_attempt"})


class LedgerServer:
    """The coordinator's side of `RemoteOwner`/`RemoteCheckpoints`/`SharedBreakerStore`."""

    def __init__(self, store: StoryStore, owner: Any) -> None:
        from ai_sdlc.workflow.state.checkpoint import Checkpoints

        self.store = store
        self.owner = owner
        self.checkpoints = Checkpoints(store)
        self.breaker_store = BreakerStore(StateDir(Path(store.root)))

    def serve(self, story_id: str, kind: str, data: dict[str, Any]) -> Answer:
        if kind == "snapshot":
            return {
                "snapshot": self.snapshot(story_id),
                "folder": self.store.folder(story_id).name,
                "limit": self.owner.limit,
                "open": self.owner.ledger(story_id).open,
                "breakers": self.breakers(),
            }
        if kind == "breaker":
            try:
                return {"breaker_file": self.save_breaker(data)}
            except Exception as exc:
                return {"error": error_answer(exc, story_id)}
        op = str(data.get("op"))
        args, kwargs = undelete(tuple(data.get("args") or ())), undelete(data.get("kwargs") or {})
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
            answer["result"] = encode(result)
        except Exception as exc:
            answer["error"] = error_answer(exc, story_id)
        answer["recoveries"] = recoveries
        if kind == "owner" and op in PREFETCH_AFTER and "error" not in answer:
            answer["prefetched"] = self.ensure(story_id)
        answer["snapshot"] = self.snapshot(story_id)
        answer["breakers"] = self.breakers()
        return answer

    def add_metrics(self, story_id: str, data: dict[str, Any]) -> dict[str, Any] | None:
        """A worker's policy metrics, added to the project's as a local worker adds them."""
        from ai_sdlc.resilience.persistence import MetricsStore

        try:
            store = MetricsStore(self.breaker_store.state)
            store.add(dict(data.get("policies") or {}), dict(data.get("breakers") or {}))
        except Exception as exc:
            return error_answer(exc, story_id)
        return None

    def breakers(self) -> bytes | None:
        """The project's breaker file, as every answer carries it (`ray_worker`)."""
        try:
            return self.breaker_store.state.file(BREAKERS_FILE).read_bytes()
        except FileNotFoundError:
            return None

    def save_breaker(self, data: dict[str, Any]) -> bytes | None:
        """A worker's breaker changed state: store it as `PersistentBreaker.save` does, under
        the file's lock (an open state another worker stored since this one read it wins);
        returns the file as it now is."""
        from ai_sdlc.resilience.breaker import BreakerSnapshot, CircuitState

        store = self.breaker_store
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
        return self.breakers()

    def ensure(self, story_id: str) -> Answer:
        """`ensure_can_act` now, for the worker's next question (see `PREFETCH_AFTER`)."""
        recoveries: list[dict[str, Any]] = []
        self.owner.on_recovery = lambda _story, event: recoveries.append(event)
        answer: Answer = {"recoveries": recoveries}
        try:
            answer["result"] = encode(self.owner.ensure_can_act(story_id))
        except Exception as exc:
            answer["error"] = error_answer(exc, story_id)
        return answer

    def snapshot(self, story_id: str) -> dict[str, bytes | None]:
        folder = self.store.folder(story_id)
        out: dict[str, bytes | None] = {}
        for name in SNAPSHOT_FILES:
            try:
                out[name] = (folder / name).read_bytes()
            except FileNotFoundError:
                out[name] = None
        return out

    def abandon(self, story_id: str, reason: str) -> dict[str, Any] | None:
        """What `StoryRunner._execute_checkpointed` does for an interrupted phase, done by the
        coordinator for a worker that can no longer do it: the open attempt released uncounted,
        the phase's checkpoint restored. The event to report, if any."""
        from ai_sdlc.providers.base import Phase

        try:
            open_ = self.owner.ledger(story_id).open
            if open_ is None:  # no phase in flight (none began, or it completed): nothing to undo
                self.checkpoints.discard(story_id)
                return None
            self.owner.release(story_id, Phase(str(open_.get("phase"))), reason)
            checkpoint = self.checkpoints.pending(story_id)
            if checkpoint is None:
                return None
            restored = self.checkpoints.restore(checkpoint, self.owner, reason)
            self.checkpoints.discard(story_id)
        except Exception as exc:  # left as a crash: the resumed run counts and restores it
            return {"event": "rollback_failed", "story": story_id, "reason": first_line(exc)}
        return {
            "event": "rollback_initiated",
            "story": story_id,
            "phase": checkpoint.phase,
            "reason": reason[:500],
            "restored": restored,
        }


def error_answer(exc: BaseException, story_id: str) -> dict[str, Any]:
    """A refusal (or failure) of the ledger, as the worker raises it again (`rebuild_error`)."""
    if isinstance(exc, AiSdlcError):
        return {
            "type": type(exc).__name__,
            "message": exc.message,
            "hint": exc.hint,
            "story_id": getattr(exc, "story_id", story_id),
        }
    return {"type": "crash", "message": first_line(exc)}


def encode(result: Any) -> tuple[str, Any]:
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


def undelete(value: Any) -> Any:
    """`DELETE` is compared by identity: a pickled copy becomes the coordinator's marker."""
    from ai_sdlc.workflow.state.transitions import DELETE

    if type(value) is type(DELETE):
        return DELETE
    if isinstance(value, dict):
        return {k: undelete(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(undelete(v) for v in value)
    return value


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


__all__ = ["CHECKPOINT_OPS", "OWNER_OPS", "PREFETCH_AFTER", "LedgerServer", "first_line"]
