"""Delay before each retry: a base strategy, then jitter, always within [0, max_delay].

Pure functions of (retry number, previous delay, random source) so tests can assert exact
sequences with a scripted random source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

StrategyName = Literal["exponential", "linear", "fixed", "decorrelated"]
JitterName = Literal["none", "full", "equal"]
#: A custom strategy maps the 1-based retry number to a delay in seconds.
CustomStrategy = Callable[[int], float]
Strategy = StrategyName | CustomStrategy
#: "none", "full", "equal", or a ± factor in [0, 1] (0.1 = ±10 %).
Jitter = JitterName | float
#: Returns a float in [0, 1), like `random.random`.
RandomSource = Callable[[], float]

STRATEGIES: tuple[StrategyName, ...] = ("exponential", "linear", "fixed", "decorrelated")
JITTERS: tuple[JitterName, ...] = ("none", "full", "equal")

#: AWS "decorrelated jitter": next = uniform(initial, previous * 3).
DECORRELATED_GROWTH = 3.0


def base_delay(
    strategy: Strategy,
    retry: int,
    *,
    initial: float,
    multiplier: float,
    max_delay: float,
    previous: float,
    rand: RandomSource,
) -> float:
    """The strategy's delay before retry number `retry` (1-based), capped at `max_delay`."""
    if callable(strategy):
        delay = float(strategy(retry))
    elif strategy == "exponential":
        try:
            delay = initial * multiplier ** (retry - 1)
        except OverflowError:
            delay = max_delay
    elif strategy == "linear":
        delay = initial * retry
    elif strategy == "fixed":
        delay = initial
    elif strategy == "decorrelated":
        upper = max(initial, previous * DECORRELATED_GROWTH)
        delay = initial + (upper - initial) * rand()
    else:
        raise ValueError(f"unknown backoff strategy {strategy!r}")
    return min(max(delay, 0.0), max_delay)


def jitter_bounds(delay: float, jitter: Jitter) -> tuple[float, float]:
    """The interval a jittered `delay` falls into (before the max_delay cap)."""
    if jitter == "none":
        return delay, delay
    if jitter == "full":
        return 0.0, delay
    if jitter == "equal":
        return delay / 2, delay
    if isinstance(jitter, int | float) and not isinstance(jitter, bool):
        return delay * (1 - jitter), delay * (1 + jitter)
    raise ValueError(f"unknown jitter {jitter!r}")


def apply_jitter(delay: float, jitter: Jitter, rand: RandomSource, max_delay: float) -> float:
    """Spread `delay` randomly so many clients do not retry in lockstep; never above max."""
    if jitter == "none" or delay <= 0:
        return delay
    low, high = jitter_bounds(delay, jitter)
    return min(max(low + (high - low) * rand(), 0.0), max_delay)
