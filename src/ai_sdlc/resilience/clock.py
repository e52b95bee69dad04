"""A manual clock for simulations and tests: time moves only when someone sleeps or advances.

Pass `clock` as the clock, `clock.sleep` / `clock.async_sleep` as the sleeps, and a retry
sequence that would take minutes runs in microseconds with exact, inspectable delays.
"""

from __future__ import annotations


class ManualClock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        #: Every sleep requested, in order.
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        import asyncio

        self.sleep(seconds)
        await asyncio.sleep(0)
