"""A run-wide retry budget, so one failing service cannot multiply retries across stories.

Token bucket: it starts with `burst` tokens, every call (first attempt) deposits `ratio` of a
token, time deposits `floor_per_second` (the small floor that lets a quiet run still retry),
the balance never exceeds `burst`, and each retry spends one whole token or is refused. Over a
long outage, retries therefore stay near `ratio` of calls instead of `max_attempts - 1` times
the calls (the SRE book's 10-20 % budgets; Finagle and Envoy default to 20 %).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import msgspec


class BudgetConfig(msgspec.Struct, frozen=True):
    """How many retries the budget allows: a share of calls, a floor per second, a burst."""

    ratio: float = 0.2
    floor_per_second: float = 0.05
    burst: float = 5.0

    def __post_init__(self) -> None:
        if not 0 <= self.ratio <= 1:
            raise ValueError("ratio must be between 0 and 1")
        if self.floor_per_second < 0:
            raise ValueError("floor_per_second must be >= 0")
        if self.burst < 1:
            raise ValueError("burst must be >= 1 (one retry)")


class BudgetStats(msgspec.Struct, frozen=True):
    """The budget's counters for metrics."""

    calls: int
    retries_allowed: int
    retries_refused: int
    balance: float


class RetryBudget:
    """Shared by every policy call of one run; thread-safe."""

    def __init__(
        self, config: BudgetConfig | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config or BudgetConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._balance = self.config.burst
        self._refilled_at = clock()
        self._calls = 0
        self._allowed = 0
        self._refused = 0

    def record_call(self) -> None:
        """A new operation started: deposit `ratio` of a token."""
        with self._lock:
            self._calls += 1
            self._balance = min(self.config.burst, self._balance + self.config.ratio)

    def try_spend(self) -> bool:
        """Take one token for a retry; False (and nothing taken) when the budget is spent."""
        with self._lock:
            self._refill()
            if self._balance >= 1.0:
                self._balance -= 1.0
                self._allowed += 1
                return True
            self._refused += 1
            return False

    def stats(self) -> BudgetStats:
        with self._lock:
            self._refill()
            return BudgetStats(self._calls, self._allowed, self._refused, self._balance)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._refilled_at
        self._refilled_at = now
        if elapsed > 0 and self.config.floor_per_second:
            gained = elapsed * self.config.floor_per_second
            self._balance = min(self.config.burst, self._balance + gained)
