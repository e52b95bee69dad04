"""Named policies composed for use: retry around breaker, a run-wide budget, counted metrics.

`PolicyManager.execute_with_policy("llm", fn, on_retry=...)` is the one way the product calls
an external service. It refreshes the shared breaker state, runs `fn` under the policy's
retry engine with each attempt passing the breaker, records the outcome in the policy's
metrics and, when a project root is given, flushes metrics to `.ai-sdlc/state/`.

Flushing is a locked, fsynced read-modify-write of `metrics.json`. By default it follows every
operation; with `flush_interval` > 0 it follows an operation only when that much time (on the
injected monotonic clock) has passed since the last flush, and the owner of the manager flushes
at its own boundaries (a story run flushes at its end, also when stopped or halted). A process
killed in between loses at most the counts of the operations it finished within
`flush_interval` seconds after its last flush; a guardrail stop always flushes at once.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import msgspec

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.resilience.backoff import RandomSource
from ai_sdlc.resilience.breaker import BreakerStats, CircuitBreaker
from ai_sdlc.resilience.budget import RetryBudget
from ai_sdlc.resilience.config import POLICY_NAMES, Policy, ResilienceSettings, load_settings
from ai_sdlc.resilience.metrics import (
    PolicyMetrics,
    breaker_delta,
    is_empty,
    summarize_policy,
)
from ai_sdlc.resilience.persistence import (
    BreakerStore,
    MetricsStore,
    PersistentBreaker,
    StateDir,
)
from ai_sdlc.resilience.retry import (
    ABORT_ERRORS,
    AttemptHook,
    CallAttempt,
    RetryEngine,
    RetryHook,
    RetryResult,
    real_async_sleep,
)

T = TypeVar("T")

#: Called with the final error when an operation fails; its return value replaces the result.
Fallback = Callable[[BaseException], T]


class MetricsSink(Protocol):
    """Where a manager adds its metric deltas: `MetricsStore` (the project's `metrics.json`),
    or a cluster worker's link to its coordinator."""

    def add(
        self,
        policies: Mapping[str, Mapping[str, Any]],
        breakers: Mapping[str, Mapping[str, Any]],
    ) -> None: ...


class _Entry(msgspec.Struct):
    """One policy's live parts: its retry engine, breakers and metrics."""

    policy: Policy
    engine: RetryEngine
    breaker: CircuitBreaker | None
    persistent: PersistentBreaker | None
    metrics: PolicyMetrics
    flushed_breaker: BreakerStats | None = None


class PolicyManager:
    """Owns one engine, breaker and metrics per named policy; share one per run.

    `budget`: True builds the run's `RetryBudget` from the settings (none when disabled),
    False disables it, or pass a `RetryBudget` to share one across managers.
    """

    def __init__(
        self,
        settings: ResilienceSettings | None = None,
        *,
        project_root: Path | None = None,
        budget: RetryBudget | bool = True,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = real_async_sleep,
        rand: RandomSource = random.random,
        wall_clock: Callable[[], float] = time.time,
        auto_flush: bool = True,
        flush_interval: float = 0.0,
    ) -> None:
        settings = settings or load_settings(None)
        if budget is True:
            self.budget = RetryBudget(settings.budget, clock=clock) if settings.budget else None
        elif budget is False:
            self.budget = None
        else:
            self.budget = budget
        self._state = StateDir(project_root) if project_root is not None else None
        self._metrics_store: MetricsSink | None = (
            MetricsStore(self._state, wall_clock=wall_clock) if self._state else None
        )
        breaker_store = BreakerStore(self._state, wall_clock=wall_clock) if self._state else None
        self.auto_flush = auto_flush
        #: Seconds between automatic flushes (0: after every operation); see the module doc.
        self.flush_interval = flush_interval
        self._clock = clock
        self._flushed_at = clock()
        self._flush_lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        for name, policy in settings.policies.items():
            engine = RetryEngine(
                policy.retry,
                clock=clock,
                sleep=sleep,
                async_sleep=async_sleep,
                rand=rand,
                budget=self.budget,
            )
            breaker = None
            persistent = None
            if policy.breaker is not None:
                breaker = CircuitBreaker(policy.breaker, name=name, clock=clock)
                if breaker_store is not None:
                    persistent = PersistentBreaker(breaker, breaker_store)
            self._entries[name] = _Entry(policy, engine, breaker, persistent, PolicyMetrics())

    @classmethod
    def from_config(
        cls,
        section: Mapping[str, Any] | None,
        *,
        source: str | None = None,
        **options: Any,
    ) -> PolicyManager:
        """Build from config.yaml's `resilience` section; `source` names the file in errors."""
        return cls(load_settings(section, source=source), **options)

    # --- lookups --------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def policy(self, name: str) -> Policy:
        return self._entry(name).policy

    def engine(self, name: str) -> RetryEngine:
        return self._entry(name).engine

    def breaker(self, name: str) -> CircuitBreaker | None:
        return self._entry(name).breaker

    def persistent_breaker(self, name: str) -> PersistentBreaker | None:
        return self._entry(name).persistent

    def metrics(self) -> dict[str, dict[str, Any]]:
        """This process's totals per policy, with derived figures (for a live display)."""
        return {name: summarize_policy(e.metrics.totals()) for name, e in self._entries.items()}

    # --- running --------------------------------------------------------------------------
    def run(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        on_retry: RetryHook | None = None,
        on_attempt: AttemptHook | None = None,
        failed: Callable[[T], bool] | None = None,
    ) -> RetryResult[T]:
        """Run `fn` under policy `name` and return every detail; never raises fn's errors
        except guardrail stops (StoryBlockedError, RunHaltedError), which propagate as is.
        `failed(value)`: whether a value `fn` returned reports a failure (counted as one in
        the metrics, never retried: a verification whose tests failed)."""
        entry = self._entry(name)
        if entry.persistent is not None:
            entry.persistent.refresh()
        breaker = entry.breaker
        guarded = fn if breaker is None else (lambda: breaker.execute(fn))
        seen: list[CallAttempt] = []
        try:
            result = entry.engine.execute(
                guarded, on_retry=on_retry, on_attempt=_collecting(seen, on_attempt)
            )
        except ABORT_ERRORS:
            self._finish(entry, seen, "aborted")
            raise
        bad = result.success and failed is not None and failed(cast(T, result.result))
        entry.metrics.record(result, failed=bad)
        self._after_operation()
        return result

    def execute_with_policy(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        on_retry: RetryHook | None = None,
        on_attempt: AttemptHook | None = None,
        fallback: Fallback[T] | None = None,
        failed: Callable[[T], bool] | None = None,
    ) -> T:
        """`fn()`'s result, the fallback's result, or the last error raised unchanged."""
        result = self.run(name, fn, on_retry=on_retry, on_attempt=on_attempt, failed=failed)
        return self._conclude(name, result, fallback)

    async def arun(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        on_retry: RetryHook | None = None,
        on_attempt: AttemptHook | None = None,
    ) -> RetryResult[T]:
        """`run` for a coroutine function."""
        entry = self._entry(name)
        if entry.persistent is not None:
            entry.persistent.refresh()
        breaker = entry.breaker

        async def guarded() -> T:
            if breaker is None:
                return await fn()
            return await breaker.aexecute(fn)

        seen: list[CallAttempt] = []
        try:
            result = await entry.engine.aexecute(
                guarded, on_retry=on_retry, on_attempt=_collecting(seen, on_attempt)
            )
        except ABORT_ERRORS:
            self._finish(entry, seen, "aborted")
            raise
        entry.metrics.record(result)
        self._after_operation()
        return result

    async def aexecute_with_policy(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        on_retry: RetryHook | None = None,
        on_attempt: AttemptHook | None = None,
        fallback: Fallback[T] | None = None,
    ) -> T:
        result = await self.arun(name, fn, on_retry=on_retry, on_attempt=on_attempt)
        return self._conclude(name, result, fallback)

    def send_metrics_to(self, store: MetricsSink) -> None:
        """Add this manager's counts to `store` instead of the project's `metrics.json` (a
        cluster worker tells its coordinator, which adds them there). Only a manager with a
        project has metrics to send."""
        if self._metrics_store is not None:
            self._metrics_store = store

    def flush(self) -> None:
        """Add this process's new counts to `.ai-sdlc/state/metrics.json` (no-op without a
        project root or when nothing changed)."""
        if self._metrics_store is None:
            return
        with self._flush_lock:
            self._flush(self._metrics_store)
            self._flushed_at = self._clock()

    def flush_if_due(self) -> None:
        """`flush` when `flush_interval` has passed since the last one (a boundary of the
        caller's, e.g. the end of a phase)."""
        if self._clock() - self._flushed_at >= self.flush_interval:
            self.flush()

    def _flush(self, store: MetricsSink) -> None:
        policies: dict[str, dict[str, Any]] = {}
        breakers: dict[str, dict[str, Any]] = {}
        taken: list[tuple[_Entry, dict[str, float], BreakerStats | None]] = []
        for name, entry in self._entries.items():
            delta = entry.metrics.take_delta()
            stats = entry.breaker.stats() if entry.breaker is not None else None
            taken.append((entry, delta, stats))
            if not is_empty(delta):
                policies[name] = delta
            if stats is not None:
                breaker_change = breaker_delta(stats, entry.flushed_breaker)
                # Time alone is no news: an unused breaker stays out of the file.
                counters = {k: v for k, v in breaker_change.items() if k != "time_in_state"}
                if not is_empty(counters):
                    breakers[name] = breaker_change
        if not policies and not breakers:
            return
        try:
            store.add(policies, breakers)
        except BaseException:
            for entry, delta, _ in taken:
                entry.metrics.restore_delta(delta)
            raise
        for entry, _, stats in taken:
            if stats is not None and entry.policy.name in breakers:
                entry.flushed_breaker = stats

    # --- internals ------------------------------------------------------------------------
    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(
                f"unknown resilience policy {name!r}; known: {', '.join(POLICY_NAMES)}"
            ) from None

    def _conclude(self, name: str, result: RetryResult[T], fallback: Fallback[T] | None) -> T:
        if result.success or fallback is None:
            return result.unwrap()
        assert result.error is not None
        value = fallback(result.error)
        self._entry(name).metrics.record_fallback()
        self._after_operation()
        return value

    def _finish(self, entry: _Entry, attempts: list[CallAttempt], outcome: str) -> None:
        """Count an operation a guardrail stopped. The stop must reach the caller unchanged, so
        a failing metrics write here is left for the next flush (its counts stay pending)."""
        entry.metrics.record_attempts(attempts, outcome)
        if self.auto_flush:
            with contextlib.suppress(AiSdlcError):
                self.flush()

    def _after_operation(self) -> None:
        if self.auto_flush:
            self.flush_if_due()


def _collecting(seen: list[CallAttempt], hook: AttemptHook | None) -> AttemptHook:
    def collect(record: CallAttempt) -> None:
        seen.append(record)
        if hook is not None:
            hook(record)

    return collect
