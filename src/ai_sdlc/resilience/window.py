"""Rolling windows of call outcomes for the circuit breaker, O(1) per recorded call.

A count window remembers the last N outcomes in a ring; a time window keeps per-slice counters
(1/20 of the window each), so old failures age out without storing every call.
"""

from __future__ import annotations

#: Resolution of a time window: failures age out in steps of window/TIME_SLICES.
TIME_SLICES = 20


class CountWindow:
    """The last `size` outcomes."""

    __slots__ = ("_pos", "_ring", "calls", "failures")

    def __init__(self, size: int) -> None:
        self._ring = [False] * size
        self._pos = 0
        self.calls = 0
        self.failures = 0

    def record(self, failed: bool, now: float) -> None:
        ring = self._ring
        pos = self._pos
        if ring[pos]:
            self.failures -= 1
        ring[pos] = failed
        if failed:
            self.failures += 1
        self._pos = (pos + 1) % len(ring)
        if self.calls < len(ring):
            self.calls += 1

    def counts(self, now: float) -> tuple[int, int]:
        """(calls, failures) currently in the window."""
        return self.calls, self.failures

    def clear(self) -> None:
        self._ring = [False] * len(self._ring)
        self._pos = 0
        self.calls = 0
        self.failures = 0


class TimeWindow:
    """Outcomes of the last `seconds` seconds, in TIME_SLICES slices."""

    __slots__ = ("_calls", "_epoch", "_failures", "_width", "calls", "failures")

    def __init__(self, seconds: float) -> None:
        self._width = seconds / TIME_SLICES
        self._calls = [0] * TIME_SLICES
        self._failures = [0] * TIME_SLICES
        self._epoch: int | None = None
        self.calls = 0
        self.failures = 0

    def _advance(self, now: float) -> int:
        epoch = int(now // self._width)
        last = self._epoch
        if last is None or epoch - last >= TIME_SLICES or epoch < last:
            if self.calls:
                self.clear()
        elif epoch != last:
            for passed in range(last + 1, epoch + 1):
                slot = passed % TIME_SLICES
                self.calls -= self._calls[slot]
                self.failures -= self._failures[slot]
                self._calls[slot] = 0
                self._failures[slot] = 0
        self._epoch = epoch
        return epoch % TIME_SLICES

    def record(self, failed: bool, now: float) -> None:
        slot = self._advance(now)
        self._calls[slot] += 1
        self.calls += 1
        if failed:
            self._failures[slot] += 1
            self.failures += 1

    def counts(self, now: float) -> tuple[int, int]:
        self._advance(now)
        return self.calls, self.failures

    def clear(self) -> None:
        self._calls = [0] * TIME_SLICES
        self._failures = [0] * TIME_SLICES
        self.calls = 0
        self.failures = 0
