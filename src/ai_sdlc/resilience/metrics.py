"""Counters per policy and per breaker, kept in memory and merged into the persisted totals.

Each process only adds its own deltas to `.ai-sdlc/state/metrics.json`, so parallel runs sum
up instead of overwriting each other. Derived figures (average retry delay, failure rate) are
computed when read, never stored.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ai_sdlc.resilience.breaker import BreakerStats
from ai_sdlc.resilience.errors import CircuitBreakerOpenError
from ai_sdlc.resilience.retry import CallAttempt, RetryResult

POLICY_COUNTERS: tuple[str, ...] = (
    "operations",
    "successes",
    "failures",
    "attempts",
    "retries",
    "first_try_successes",
    "successes_after_retry",
    "exhausted_retries",
    "non_retryable_failures",
    #: Operations that ran to the end and reported a failure (a verification whose tests
    #: failed): not an error to retry, but not a success either.
    "failed_results",
    "timeouts",
    "budget_refusals",
    "breaker_rejections",
    "aborted",
    "fallbacks",
    "total_retry_delay",
)
BREAKER_COUNTERS: tuple[str, ...] = ("calls", "successful", "failed", "rejected", "state_changes")
BREAKER_STATES: tuple[str, ...] = ("closed", "open", "half_open")


class PolicyMetrics:
    """Cumulative counters of one policy in this process; `take_delta` feeds persistence."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, float] = dict.fromkeys(POLICY_COUNTERS, 0)
        self._flushed: dict[str, float] = dict.fromkeys(POLICY_COUNTERS, 0)

    def record(
        self, result: RetryResult[Any], *, fallback_used: bool = False, failed: bool = False
    ) -> None:
        """Count one operation; `failed`: it succeeded as a call but reported a failure."""
        counter = "successes" if result.success else _failure_counter(result)
        if failed and result.success:
            counter = "failed_results"
        self.record_attempts(result.attempts, counter, fallback_used=fallback_used)

    def record_attempts(
        self, attempts: list[CallAttempt], outcome: str, *, fallback_used: bool = False
    ) -> None:
        """Count one operation: its attempts and its outcome counter (see POLICY_COUNTERS)."""
        count = len(attempts)
        with self._lock:
            totals = self._totals
            totals["operations"] += 1
            totals["attempts"] += count
            totals["retries"] += max(count - 1, 0)
            totals["total_retry_delay"] += sum(attempt.delay for attempt in attempts)
            if outcome == "successes":
                totals["successes"] += 1
                key = "first_try_successes" if count <= 1 else "successes_after_retry"
                totals[key] += 1
            else:
                totals["failures"] += 1
                totals[outcome] += 1
            if fallback_used:
                totals["fallbacks"] += 1

    def record_fallback(self) -> None:
        with self._lock:
            self._totals["fallbacks"] += 1

    def totals(self) -> dict[str, float]:
        with self._lock:
            return dict(self._totals)

    def take_delta(self) -> dict[str, float]:
        """What changed since the last call (and mark it flushed)."""
        with self._lock:
            delta = {key: self._totals[key] - self._flushed[key] for key in POLICY_COUNTERS}
            self._flushed = dict(self._totals)
            return delta

    def restore_delta(self, delta: Mapping[str, float]) -> None:
        """Put back a delta whose write failed, so the next flush retries it."""
        with self._lock:
            for key in POLICY_COUNTERS:
                self._flushed[key] -= delta.get(key, 0)


def _failure_counter(result: RetryResult[Any]) -> str:
    if isinstance(result.error, CircuitBreakerOpenError):
        return "breaker_rejections"
    return {
        "exhausted": "exhausted_retries",
        "overall_timeout": "timeouts",
        "budget": "budget_refusals",
    }.get(result.stop_reason, "non_retryable_failures")


def breaker_delta(current: BreakerStats, flushed: BreakerStats | None) -> dict[str, Any]:
    """Counters of `current` minus `flushed` (None: nothing flushed yet)."""
    delta: dict[str, Any] = {}
    for key in BREAKER_COUNTERS:
        delta[key] = getattr(current, key) - (getattr(flushed, key) if flushed else 0)
    delta["time_in_state"] = {
        state: current.time_in_state.get(state, 0.0)
        - (flushed.time_in_state.get(state, 0.0) if flushed else 0.0)
        for state in BREAKER_STATES
    }
    return delta


def is_empty(delta: Mapping[str, Any]) -> bool:
    for value in delta.values():
        if isinstance(value, Mapping):
            if not is_empty(value):
                return False
        elif value:
            return False
    return True


def merge_counts(into: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Add `delta` (nested dicts of numbers) into `into`; unknown or bad values restart at 0."""
    for key, value in delta.items():
        if isinstance(value, Mapping):
            child = into.get(key)
            if not isinstance(child, dict):
                child = {}
                into[key] = child
            merge_counts(child, value)
        else:
            current = into.get(key, 0)
            if not isinstance(current, int | float) or isinstance(current, bool):
                current = 0
            into[key] = current + value


def summarize_policy(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Persisted counters of one policy plus the derived figures, every key present."""
    out: dict[str, Any] = {key: _number(raw.get(key)) for key in POLICY_COUNTERS}
    out["total_retry_delay"] = round(float(out["total_retry_delay"]), 3)
    retries = out["retries"]
    operations = out["operations"]
    out["average_retry_delay"] = round(out["total_retry_delay"] / retries, 3) if retries else 0.0
    out["failure_rate"] = round(out["failures"] / operations, 4) if operations else 0.0
    return out


def summarize_breaker(raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {key: _number(raw.get(key)) for key in BREAKER_COUNTERS}
    times = raw.get("time_in_state")
    times = times if isinstance(times, Mapping) else {}
    out["time_in_state"] = {
        state: round(float(_number(times.get(state))), 3) for state in BREAKER_STATES
    }
    return out


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
