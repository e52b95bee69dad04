"""In-process circuit breaker: closed → open → half-open → closed, fast on the success path.

A closed breaker's success path takes one lock and touches a few counters (no clock read unless
the window needs it), so guarding a call costs well under a microsecond more than the call.
Persistence across processes is a separate layer (`ai_sdlc.resilience.persistence`) that
snapshots and restores this object, so the hot path never touches the disk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Literal, TypeVar

import msgspec

from ai_sdlc.errors import RunHaltedError, StoryBlockedError
from ai_sdlc.resilience.errors import CircuitBreakerOpenError
from ai_sdlc.resilience.window import CountWindow, TimeWindow

T = TypeVar("T")


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


#: Called after every state change with (breaker name, old state, new state).
StateListener = Callable[[str, CircuitState, CircuitState], None]

#: Errors that never say anything about the guarded service's health.
NEVER_FAILURES: tuple[type[BaseException], ...] = (StoryBlockedError, RunHaltedError)


def _default_is_failure(exc: BaseException) -> bool:
    return not isinstance(exc, NEVER_FAILURES)


class CircuitBreakerConfig(msgspec.Struct, frozen=True):
    """When to trip and how to recover. Every field has a usable default.

    Trips when, among the calls in the rolling window (the last `window_size` calls for
    "count", the last `window_size` seconds for "time"), there are at least `minimum_calls`
    calls and at least `failure_threshold` failures, and, if `failure_rate_threshold` is set,
    failures make up at least that share of the calls.
    """

    failure_threshold: int = 5
    window: Literal["count", "time"] = "time"
    window_size: float = 60.0
    minimum_calls: int = 1
    failure_rate_threshold: float | None = None
    open_timeout: float = 60.0
    half_open_max_calls: int = 1
    success_threshold: int = 1
    #: Which errors count against the service; None = every Exception but guardrail stops.
    is_failure: Callable[[BaseException], bool] | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.failure_threshold >= 1, "failure_threshold must be >= 1"),
            (self.window in ("count", "time"), "window must be 'count' or 'time'"),
            (self.window_size > 0, "window_size must be > 0"),
            (self.minimum_calls >= 1, "minimum_calls must be >= 1"),
            (self.open_timeout >= 0, "open_timeout must be >= 0"),
            (self.half_open_max_calls >= 1, "half_open_max_calls must be >= 1"),
            (self.success_threshold >= 1, "success_threshold must be >= 1"),
            (
                self.success_threshold <= self.half_open_max_calls,
                "success_threshold must be <= half_open_max_calls",
            ),
            (
                self.failure_rate_threshold is None or 0 < self.failure_rate_threshold <= 1,
                "failure_rate_threshold must be in (0, 1]",
            ),
        ]
        if self.window == "count" and self.window_size != int(self.window_size):
            checks.append((False, "a count window_size must be a whole number of calls"))
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


class BreakerSnapshot(msgspec.Struct, frozen=True):
    """The part of a breaker's state that other processes must see."""

    state: CircuitState
    #: Seconds until an open breaker admits a trial; None when not open or forced open.
    open_remaining: float | None
    forced: bool


class BreakerStats(msgspec.Struct, frozen=True):
    """A breaker's counters for metrics and `status`."""

    calls: int
    successful: int
    failed: int
    rejected: int
    state_changes: int
    time_in_state: dict[str, float]


class CircuitBreaker:
    """Guards calls to one service; see `CircuitBreakerConfig` for the rules."""

    def __init__(
        self,
        config: CircuitBreakerConfig | None = None,
        *,
        name: str = "breaker",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or CircuitBreakerConfig()
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._is_failure = self.config.is_failure or _default_is_failure
        size = self.config.window_size
        self._window: CountWindow | TimeWindow = (
            CountWindow(int(size)) if self.config.window == "count" else TimeWindow(size)
        )
        # Successes matter to the window only for a rate, a minimum above the threshold, or
        # to push old failures out of a count window: otherwise the success path skips it.
        self._track_successes = (
            self.config.failure_rate_threshold is not None
            or self.config.minimum_calls > self.config.failure_threshold
        )
        self._count_window = self.config.window == "count"
        self._listeners: list[StateListener] = []
        self._state = CircuitState.CLOSED
        self._generation = 0
        self._open_until = 0.0
        self._forced = False
        self._trials_admitted = 0
        self._trial_successes = 0
        self._calls = 0
        self._successful = 0
        self._failed = 0
        self._rejected = 0
        self._state_changes = 0
        self._entered_at = clock()
        self._time_in_state = {state.value: 0.0 for state in CircuitState}

    # --- public API ---------------------------------------------------------------------
    @property
    def state(self) -> CircuitState:
        """The current state; an open breaker whose timeout passed reports half-open."""
        with self._lock:
            if self._state is CircuitState.OPEN and self._open_elapsed(self._clock()):
                return CircuitState.HALF_OPEN
            return self._state

    def add_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    def execute(self, fn: Callable[[], T]) -> T:
        """Call `fn` unless the breaker is open; record its outcome."""
        if self._state is not CircuitState.CLOSED:
            trial = self._admit()
            if trial is not None:
                return self._run_trial(fn, trial)
        try:
            result = fn()
        except Exception as exc:
            self._closed_failure(exc)
            raise
        with self._lock:
            self._calls += 1
            self._successful += 1
            if self._track_successes or (self._count_window and self._window.failures):
                self._window.record(False, self._clock())
        return result

    async def aexecute(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`execute` for a coroutine function."""
        trial = self._admit() if self._state is not CircuitState.CLOSED else None
        try:
            result = await fn()
        except BaseException as exc:
            if trial is not None:
                self._trial_error(trial, exc)
            elif isinstance(exc, Exception):
                self._closed_failure(exc)
            raise
        if trial is not None:
            self._trial_success(trial)
        else:
            with self._lock:
                self._calls += 1
                self._successful += 1
                if self._track_successes or (self._count_window and self._window.failures):
                    self._window.record(False, self._clock())
        return result

    def force_open(self, duration: float | None = None) -> None:
        """Open now: for `duration` seconds, or until `reset()` when None."""
        with self._lock:
            old = self._state
            self._open(self._clock(), duration=duration)
        self._notify(old, CircuitState.OPEN)

    def reset(self) -> None:
        """Close now and forget recent failures."""
        with self._lock:
            old = self._state
            self._transition(CircuitState.CLOSED, self._clock())
        self._notify(old, CircuitState.CLOSED)

    def retry_in(self) -> float | None:
        """Seconds until an open breaker admits a trial (0 when not open; None when forced)."""
        with self._lock:
            return self._retry_in(self._clock())

    def snapshot(self) -> BreakerSnapshot:
        with self._lock:
            if self._state is CircuitState.OPEN and not self._forced:
                remaining: float | None = max(0.0, self._open_until - self._clock())
            else:
                remaining = None
            return BreakerSnapshot(self._state, remaining, self._forced)

    def restore(self, snapshot: BreakerSnapshot) -> None:
        """Adopt a state another process decided (no listeners, no state-change count)."""
        with self._lock:
            now = self._clock()
            self._switch(snapshot.state, now)
            self._forced = snapshot.forced and snapshot.state is CircuitState.OPEN
            self._open_until = now + (snapshot.open_remaining or 0.0)

    def stats(self) -> BreakerStats:
        with self._lock:
            now = self._clock()
            times = dict(self._time_in_state)
            times[self._state.value] += max(0.0, now - self._entered_at)
            return BreakerStats(
                self._calls,
                self._successful,
                self._failed,
                self._rejected,
                self._state_changes,
                times,
            )

    # --- internals (all `_locked` helpers expect self._lock held) ------------------------
    def _open_elapsed(self, now: float) -> bool:
        return not self._forced and now >= self._open_until

    def _retry_in(self, now: float) -> float | None:
        if self._state is not CircuitState.OPEN:
            return 0.0
        if self._forced:
            return None
        return max(0.0, self._open_until - now)

    def _admit(self) -> int | None:
        """None: run as a normal closed call. An int: a half-open trial of that generation."""
        notify: tuple[CircuitState, CircuitState] | None = None
        with self._lock:
            now = self._clock()
            if self._state is CircuitState.OPEN:
                if not self._open_elapsed(now):
                    self._rejected += 1
                    raise CircuitBreakerOpenError(self.name, self._retry_in(now))
                self._transition(CircuitState.HALF_OPEN, now)
                notify = (CircuitState.OPEN, CircuitState.HALF_OPEN)
            if self._state is CircuitState.HALF_OPEN:
                if self._trials_admitted >= self.config.half_open_max_calls:
                    self._rejected += 1
                    raise CircuitBreakerOpenError(self.name, 0.0)
                self._trials_admitted += 1
                generation: int | None = self._generation
            else:
                generation = None
        if notify is not None:
            self._notify(*notify)
        return generation

    def _run_trial(self, fn: Callable[[], T], generation: int) -> T:
        try:
            result = fn()
        except BaseException as exc:
            self._trial_error(generation, exc)
            raise
        self._trial_success(generation)
        return result

    def _trial_success(self, generation: int) -> None:
        closed = False
        with self._lock:
            self._calls += 1
            self._successful += 1
            if self._generation == generation:
                self._trial_successes += 1
                if self._trial_successes >= self.config.success_threshold:
                    self._transition(CircuitState.CLOSED, self._clock())
                    closed = True
        if closed:
            self._notify(CircuitState.HALF_OPEN, CircuitState.CLOSED)

    def _trial_error(self, generation: int, exc: BaseException) -> None:
        reopened = False
        failed = isinstance(exc, Exception) and self._is_failure(exc)
        with self._lock:
            if isinstance(exc, Exception):
                self._calls += 1
                if failed:
                    self._failed += 1
                else:
                    self._successful += 1
            if self._generation == generation:
                if failed:
                    self._open(self._clock())
                    reopened = True
                else:
                    # Not a verdict on the service: free the slot for another trial.
                    self._trials_admitted -= 1
        if reopened:
            self._notify(CircuitState.HALF_OPEN, CircuitState.OPEN)

    def _closed_failure(self, exc: Exception) -> None:
        failed = self._is_failure(exc)
        tripped = False
        with self._lock:
            self._calls += 1
            if not failed:
                self._successful += 1
                return
            self._failed += 1
            if self._state is not CircuitState.CLOSED:
                return
            now = self._clock()
            self._window.record(True, now)
            if self._should_trip(now):
                self._open(now)
                tripped = True
        if tripped:
            self._notify(CircuitState.CLOSED, CircuitState.OPEN)

    def _should_trip(self, now: float) -> bool:
        calls, failures = self._window.counts(now)
        config = self.config
        if failures < config.failure_threshold:
            return False
        if self._track_successes and calls < config.minimum_calls:
            return False
        rate = config.failure_rate_threshold
        return rate is None or failures >= rate * calls

    def _open(self, now: float, duration: float | None = -1.0) -> None:
        self._transition(CircuitState.OPEN, now)
        if duration is None:
            self._forced = True
        else:
            self._open_until = now + (self.config.open_timeout if duration < 0 else duration)

    def _transition(self, new: CircuitState, now: float) -> None:
        if new is not self._state:
            self._state_changes += 1
        self._switch(new, now)

    def _switch(self, new: CircuitState, now: float) -> None:
        self._time_in_state[self._state.value] += max(0.0, now - self._entered_at)
        self._entered_at = now
        self._state = new
        self._generation += 1
        self._forced = False
        self._trials_admitted = 0
        self._trial_successes = 0
        if new is CircuitState.CLOSED:
            self._window.clear()

    def _notify(self, old: CircuitState, new: CircuitState) -> None:
        if old is new:
            return
        for listener in self._listeners:
            listener(self.name, old, new)
