"""Breaker state and metrics in `<project>/.ai-sdlc/state/`, shared by every ai-sdlc process.

JSON files written atomically, read-modify-write under a sidecar lock (`<file>.lock`).
Breaker state is loaded at the start of an operation (a `stat` when nothing changed) and saved
on each state change, so separate processes see each other's open breakers and a restart does
not close one. Timestamps on disk are wall-clock epochs; the in-process breaker keeps its own
monotonic clock.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ai_sdlc.errors import BusyError, InvalidInputError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.locks import LockTimeout, SidecarLock
from ai_sdlc.resilience.breaker import BreakerSnapshot, CircuitBreaker, CircuitState
from ai_sdlc.resilience.errors import StateError
from ai_sdlc.resilience.metrics import merge_counts
from ai_sdlc.untrusted import read_regular

T = TypeVar("T")

STATE_RELPATH = Path(".ai-sdlc") / "state"
BREAKERS_FILE = "breakers.json"
METRICS_FILE = "metrics.json"
LOCK_TIMEOUT = 30.0
_REBUILD_HINT = "delete the file; ai-sdlc rebuilds it (breaker state and metrics start over)"


def _utc_now_iso(wall: float) -> str:
    return _dt.datetime.fromtimestamp(wall, _dt.UTC).isoformat(timespec="seconds")


class StateDir:
    """The project's `.ai-sdlc/state/` folder: locked, atomic JSON documents."""

    def __init__(self, project_root: Path) -> None:
        self.path = Path(project_root) / STATE_RELPATH
        self._thread_lock = threading.RLock()

    def file(self, name: str) -> Path:
        return self.path / name

    def read(self, name: str) -> dict[str, Any]:
        """The document, {} when missing; a clear error when it is not a JSON object."""
        path = self.file(name)
        try:
            text = read_regular(path).decode("utf-8", "replace")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StateError("read", path, exc) from exc
        try:
            data = json.loads(text)
        except RecursionError:
            raise InvalidInputError(
                "nested too deeply to be a state file", path=str(path), hint=_REBUILD_HINT
            ) from None
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"not valid JSON: {exc.msg}",
                path=str(path),
                line=exc.lineno,
                column=exc.colno,
                hint=_REBUILD_HINT,
            ) from exc
        if not isinstance(data, dict):
            raise InvalidInputError("expected a JSON object", path=str(path), hint=_REBUILD_HINT)
        return data

    def write(self, name: str, data: Mapping[str, Any]) -> None:
        """Atomic (old or new, also for a killed process); fsynced except the metrics, which are
        statistics: a power loss may cost their last flush, never a breaker's state."""
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.file(name), text, durable=name != METRICS_FILE)
        except OSError as exc:
            raise StateError("write", self.file(name), exc) from exc

    def stamp(self, name: str) -> tuple[int, int, int] | None:
        """Changes whenever the file is replaced: lets readers skip re-reading it."""
        try:
            info = os.stat(self.file(name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError("read", self.file(name), exc) from exc
        return info.st_ino, info.st_mtime_ns, info.st_size

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Hold the file's lock (threads and processes) across a read-modify-write."""
        lock = SidecarLock(str(self.file(name)) + ".lock", timeout=LOCK_TIMEOUT)
        with self._thread_lock:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                lock.acquire()
            except LockTimeout as exc:  # a TimeoutError, so an OSError: catch it first
                raise BusyError(
                    f"{self.file(name)} stayed locked for {LOCK_TIMEOUT:g} s",
                    hint="another ai-sdlc process holds it; retry when it is done",
                ) from exc
            except OSError as exc:
                raise StateError("lock", self.file(name), exc) from exc
            try:
                yield
            finally:
                lock.release()

    def update(self, name: str, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        with self.locked(name):
            data = self.read(name)
            mutate(data)
            self.write(name, data)
            return data


class BreakerRecord(msgspec.Struct, frozen=True):
    """One breaker as stored: state, wall-clock end of the open period, revision counter."""

    state: CircuitState
    open_until: float | None
    forced: bool
    revision: int

    def snapshot(self, wall_now: float) -> BreakerSnapshot:
        remaining = None
        if self.state is CircuitState.OPEN and not self.forced:
            remaining = max(0.0, (self.open_until or wall_now) - wall_now)
        return BreakerSnapshot(self.state, remaining, self.forced)

    def still_open(self, wall_now: float) -> bool:
        if self.state is not CircuitState.OPEN:
            return False
        return self.forced or (self.open_until or 0.0) > wall_now


class BreakerStore:
    """`breakers.json`: {"breakers": {name: {state, open_until, forced, revision, ...}}}."""

    def __init__(self, state: StateDir, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.wall_clock = wall_clock

    def stamp(self) -> tuple[int, int, int] | None:
        return self.state.stamp(BREAKERS_FILE)

    def load(self, name: str) -> BreakerRecord | None:
        return self._record(self.state.read(BREAKERS_FILE), name)

    def load_all(self) -> dict[str, BreakerRecord]:
        data = self.state.read(BREAKERS_FILE)
        breakers = data.get("breakers")
        names = list(breakers) if isinstance(breakers, dict) else []
        records = {name: self._record(data, name) for name in names}
        return {name: record for name, record in records.items() if record is not None}

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self.state.locked(BREAKERS_FILE):
            yield

    def write(self, name: str, snapshot: BreakerSnapshot, revision: int) -> None:
        """Store `snapshot` as `revision`; call with `locked()` held."""
        wall = self.wall_clock()
        data = self.state.read(BREAKERS_FILE)
        breakers = data.get("breakers")
        if not isinstance(breakers, dict):
            breakers = {}
            data["breakers"] = breakers
        open_until = None
        if snapshot.open_remaining is not None:
            open_until = wall + snapshot.open_remaining
        breakers[name] = {
            "state": snapshot.state.value,
            "open_until": open_until,
            "forced": snapshot.forced,
            "revision": revision,
            "changed_at": _utc_now_iso(wall),
            "changed_by_pid": os.getpid(),
        }
        data["version"] = 1
        self.state.write(BREAKERS_FILE, data)

    def _record(self, data: Mapping[str, Any], name: str) -> BreakerRecord | None:
        breakers = data.get("breakers")
        raw = breakers.get(name) if isinstance(breakers, dict) else None
        if not isinstance(raw, dict):
            return None
        try:
            state = CircuitState(str(raw.get("state")))
        except ValueError:
            return None
        open_until = raw.get("open_until")
        revision = raw.get("revision")
        return BreakerRecord(
            state,
            float(open_until) if isinstance(open_until, int | float) else None,
            raw.get("forced") is True,
            revision if isinstance(revision, int) else 0,
        )


class PersistentBreaker:
    """A `CircuitBreaker` whose state changes are shared through a `BreakerStore`.

    Call `refresh()` at the start of each operation (cheap when nothing changed); `execute`
    itself never touches the disk. When another process opened the breaker while this one
    was closing it, the open state wins.
    """

    def __init__(self, breaker: CircuitBreaker, store: BreakerStore) -> None:
        self.breaker = breaker
        self.store = store
        self.name = breaker.name
        self._lock = threading.Lock()
        self._revision = 0
        self._stamp: tuple[int, int, int] | None = None
        self._suspend_save = False
        breaker.add_listener(self._on_transition)
        self.refresh()

    def refresh(self) -> None:
        """Adopt the stored state if another process changed it since we last looked."""
        stamp = self.store.stamp()
        if stamp is None or stamp == self._stamp:
            return
        with self._lock:
            record = self.store.load(self.name)
            self._stamp = stamp
            if record is not None and record.revision != self._revision:
                self.breaker.restore(record.snapshot(self.store.wall_clock()))
                self._revision = record.revision

    def execute(self, fn: Callable[[], T]) -> T:
        return self.breaker.execute(fn)

    async def aexecute(self, fn: Callable[[], Awaitable[T]]) -> T:
        return await self.breaker.aexecute(fn)

    def force_open(self, duration: float | None = None) -> None:
        with self._saving_once():
            self.breaker.force_open(duration)

    def reset(self) -> None:
        with self._saving_once():
            self.breaker.reset()

    def save(self) -> None:
        """Write the breaker's state under the lock (an open state stored by others wins)."""
        with self._lock, self.store.locked():
            stored = self.store.load(self.name)
            stored_revision = stored.revision if stored else 0
            snapshot = self.breaker.snapshot()
            wall = self.store.wall_clock()
            if (
                stored is not None
                and stored_revision != self._revision
                and stored.still_open(wall)
                and snapshot.state is not CircuitState.OPEN
            ):
                self.breaker.restore(stored.snapshot(wall))
                self._revision = stored_revision
            else:
                self._revision = stored_revision + 1
                self.store.write(self.name, snapshot, self._revision)
            self._stamp = self.store.stamp()

    @contextmanager
    def _saving_once(self) -> Iterator[None]:
        self._suspend_save = True
        try:
            yield
        finally:
            self._suspend_save = False
        self._force_save()

    def _force_save(self) -> None:
        """Manual force_open/reset always win: no open-wins check."""
        with self._lock, self.store.locked():
            stored = self.store.load(self.name)
            self._revision = (stored.revision if stored else 0) + 1
            self.store.write(self.name, self.breaker.snapshot(), self._revision)
            self._stamp = self.store.stamp()

    def _on_transition(self, name: str, old: CircuitState, new: CircuitState) -> None:
        if not self._suspend_save:
            self.save()


class MetricsStore:
    """`metrics.json`: cumulative counters per policy and breaker, summed over processes."""

    def __init__(self, state: StateDir, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.wall_clock = wall_clock

    def load(self) -> dict[str, Any]:
        return self.state.read(METRICS_FILE)

    def add(
        self,
        policies: Mapping[str, Mapping[str, Any]],
        breakers: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """Add these deltas to the stored totals under the lock."""

        def mutate(data: dict[str, Any]) -> None:
            data["version"] = 1
            data["updated_at"] = _utc_now_iso(self.wall_clock())
            for section, deltas in (("policies", policies), ("breakers", breakers)):
                node = data.get(section)
                if not isinstance(node, dict):
                    node = {}
                    data[section] = node
                merge_counts(node, {name: dict(delta) for name, delta in deltas.items()})

        self.state.update(METRICS_FILE, mutate)
