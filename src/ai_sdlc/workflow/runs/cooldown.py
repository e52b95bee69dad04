"""Cooldown after a story's phase crashed: the same story is not retried before `cooldown_until`.

Deadlines are wall-clock ISO times in the run state, so they hold across a resume. Clock and
sleep are injected: tests pass a fake pair, the CLI the real ones.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from ai_sdlc.workflow.state.events import Clock, iso

Sleep = Callable[[float], None]
#: Called with the seconds left before each sleep (for a countdown on screen).
Tick = Callable[[float], None]

#: Longest single sleep, so the countdown moves and Ctrl-C is never far away.
TICK_SECONDS = 1.0


def cooldown_until(now: dt.datetime, seconds: float) -> str:
    return iso(now + dt.timedelta(seconds=seconds))


def parse(moment: str) -> dt.datetime:
    return dt.datetime.fromisoformat(moment.replace("Z", "+00:00"))


def seconds_left(until: str | None, now: dt.datetime) -> float:
    if not until:
        return 0.0
    return max(0.0, (parse(until) - now).total_seconds())


def wait_until(until: str, *, clock: Clock, sleep: Sleep, tick: Tick) -> None:
    """Sleep until `until`, reporting the seconds left before each step."""
    while True:
        left = seconds_left(until, clock())
        if left <= 0:
            return
        tick(left)
        sleep(min(TICK_SECONDS, left))
