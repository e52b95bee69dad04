"""Every circuit-breaker transition on a manual clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.resilience import (
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitBreakerOpenError,
    CircuitState,
)
from ai_sdlc.resilience.clock import ManualClock
from ai_sdlc.resilience.window import TIME_SLICES, CountWindow, TimeWindow


class Boom(Exception):
    pass


def ok() -> str:
    return "ok"


def boom() -> str:
    raise Boom("service down")


def make(clock: ManualClock, **config: Any) -> tuple[CircuitBreaker, list[tuple[str, str]]]:
    breaker = CircuitBreaker(CircuitBreakerConfig(**config), name="svc", clock=clock)
    changes: list[tuple[str, str]] = []
    breaker.add_listener(lambda name, old, new: changes.append((old.value, new.value)))
    return breaker, changes


def fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        with pytest.raises(Boom):
            breaker.execute(boom)


def test_full_cycle_closed_open_half_open_closed() -> None:
    clock = ManualClock()
    breaker, changes = make(clock, failure_threshold=3, open_timeout=30)
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED
    fail(breaker, 1)
    assert breaker.state is CircuitState.OPEN and changes == [("closed", "open")]

    clock.advance(29)
    assert breaker.retry_in() == pytest.approx(1.0)
    clock.advance(1)
    assert breaker.state is CircuitState.HALF_OPEN  # reported; the transition happens on a call
    assert breaker.execute(ok) == "ok"
    assert breaker.state is CircuitState.CLOSED
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


def test_open_breaker_rejects_without_calling() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=60)
    fail(breaker, 1)
    called: list[int] = []
    clock.advance(15)
    with pytest.raises(CircuitBreakerOpenError) as caught:
        breaker.execute(lambda: called.append(1))
    assert called == []
    assert caught.value.retry_in == pytest.approx(45.0) and caught.value.name == "svc"
    assert breaker.stats().rejected == 1


def test_half_open_failure_reopens_for_a_full_timeout() -> None:
    clock = ManualClock()
    breaker, changes = make(clock, failure_threshold=1, open_timeout=10)
    fail(breaker, 1)
    clock.advance(10)
    fail(breaker, 1)  # the trial fails
    assert breaker.state is CircuitState.OPEN
    assert breaker.retry_in() == pytest.approx(10.0)
    assert changes[-2:] == [("open", "half_open"), ("half_open", "open")]


def test_half_open_admits_at_most_max_calls_and_needs_success_threshold() -> None:
    clock = ManualClock()
    breaker, _ = make(
        clock, failure_threshold=1, open_timeout=5, half_open_max_calls=2, success_threshold=2
    )
    fail(breaker, 1)
    clock.advance(5)
    inner_results: list[Any] = []

    def trial_that_probes() -> str:
        # While this trial runs, one more trial fits, the third is rejected without a call.
        inner_results.append(breaker.execute(ok))
        with pytest.raises(CircuitBreakerOpenError):
            breaker.execute(lambda: inner_results.append("must not run"))
        return "ok"

    assert breaker.execute(trial_that_probes) == "ok"
    assert inner_results == ["ok"]
    assert breaker.state is CircuitState.CLOSED


def test_half_open_stays_half_open_until_enough_successes() -> None:
    clock = ManualClock()
    breaker, _ = make(
        clock, failure_threshold=1, open_timeout=5, half_open_max_calls=3, success_threshold=2
    )
    fail(breaker, 1)
    clock.advance(5)
    breaker.execute(ok)
    assert breaker.state is CircuitState.HALF_OPEN
    breaker.execute(ok)
    assert breaker.state is CircuitState.CLOSED


def test_count_window_forgets_failures_pushed_out_by_successes() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=3, window="count", window_size=4)
    fail(breaker, 2)
    for _ in range(4):
        breaker.execute(ok)  # both failures leave the last-4 window
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED
    fail(breaker, 1)
    assert breaker.state is CircuitState.OPEN


def test_time_window_forgets_old_failures() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=3, window="time", window_size=60)
    fail(breaker, 2)
    clock.advance(61)
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED
    clock.advance(30)
    fail(breaker, 1)  # 3 failures within the last 60 s
    assert breaker.state is CircuitState.OPEN


def test_failure_rate_threshold_and_minimum_calls() -> None:
    clock = ManualClock()
    breaker, _ = make(
        clock,
        failure_threshold=2,
        window="count",
        window_size=10,
        minimum_calls=6,
        failure_rate_threshold=0.5,
    )
    fail(breaker, 4)  # 4 of 4 failed, but fewer than 6 calls: no verdict yet
    assert breaker.state is CircuitState.CLOSED
    for _ in range(4):
        breaker.execute(ok)  # 4 of 8 = 50 %: trips on the next failure's judgement
    fail(breaker, 1)
    assert breaker.state is CircuitState.OPEN

    clock2 = ManualClock()
    low_rate, _ = make(
        clock2, failure_threshold=2, window="count", window_size=10, failure_rate_threshold=0.5
    )
    for _ in range(8):
        low_rate.execute(ok)
    fail(low_rate, 2)  # 2 of 10 = 20 %: not enough
    assert low_rate.state is CircuitState.CLOSED


def test_ignored_errors_do_not_count_and_guardrail_stops_never_count() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(
        CircuitBreakerConfig(failure_threshold=1, is_failure=lambda e: not isinstance(e, KeyError)),
        clock=clock,
    )
    for _ in range(3):
        with pytest.raises(KeyError):
            breaker.execute(lambda: {}["missing"])
    assert breaker.state is CircuitState.CLOSED

    default = CircuitBreaker(CircuitBreakerConfig(failure_threshold=1), clock=clock)

    def blocked() -> None:
        raise StoryBlockedError("limit", story_id="S-0001")

    with pytest.raises(StoryBlockedError):
        default.execute(blocked)
    assert default.state is CircuitState.CLOSED


def test_force_open_and_reset() -> None:
    clock = ManualClock()
    breaker, changes = make(clock)
    breaker.force_open()
    clock.advance(10_000)
    with pytest.raises(CircuitBreakerOpenError) as caught:
        breaker.execute(ok)
    assert caught.value.retry_in is None and "forced open" in str(caught.value)
    breaker.reset()
    assert breaker.execute(ok) == "ok"
    breaker.force_open(duration=3)
    clock.advance(3)
    assert breaker.execute(ok) == "ok" and breaker.state is CircuitState.CLOSED
    assert changes[:2] == [("closed", "open"), ("open", "closed")]


def test_stats_count_calls_and_time_in_each_state() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=2, open_timeout=20)
    breaker.execute(ok)
    clock.advance(5)
    fail(breaker, 2)  # opens at t=5
    clock.advance(20)
    breaker.execute(ok)  # half-open then closed at t=25
    clock.advance(7)
    stats = breaker.stats()
    assert (stats.calls, stats.successful, stats.failed, stats.rejected) == (4, 2, 2, 0)
    assert stats.state_changes == 3
    assert stats.time_in_state == {"closed": 12.0, "open": 20.0, "half_open": 0.0}


def test_snapshot_and_restore_keep_the_remaining_open_time() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=60)
    fail(breaker, 1)
    clock.advance(20)
    snap = breaker.snapshot()
    assert snap.state is CircuitState.OPEN and snap.open_remaining == pytest.approx(40)

    other_clock = ManualClock(start=1000)
    other, changes = make(other_clock)
    other.restore(snap)
    assert other.state is CircuitState.OPEN and changes == []  # adoption is silent
    other_clock.advance(39)
    with pytest.raises(CircuitBreakerOpenError):
        other.execute(ok)
    other_clock.advance(1)
    assert other.execute(ok) == "ok"


def test_aexecute_follows_the_same_rules() -> None:
    clock = ManualClock()
    breaker, changes = make(clock, failure_threshold=1, open_timeout=5)

    async def afail() -> str:
        raise Boom("down")

    async def aok() -> str:
        return "ok"

    async def scenario() -> None:
        with pytest.raises(Boom):
            await breaker.aexecute(afail)
        with pytest.raises(CircuitBreakerOpenError):
            await breaker.aexecute(aok)
        clock.advance(5)
        assert await breaker.aexecute(aok) == "ok"

    asyncio.run(scenario())
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


def test_invalid_breaker_configs() -> None:
    for bad in (
        {"failure_threshold": 0},
        {"window": "sliding"},
        {"window": "count", "window_size": 2.5},
        {"success_threshold": 2, "half_open_max_calls": 1},
        {"failure_rate_threshold": 0},
        {"open_timeout": -1},
    ):
        with pytest.raises(ValueError):
            CircuitBreakerConfig(**bad)


events = st.lists(
    st.tuples(st.floats(min_value=0, max_value=20, allow_nan=False), st.booleans()), max_size=80
)


@given(events=events, seconds=st.sampled_from([1.0, 10.0, 60.0]))
def test_time_window_matches_a_reference_that_keeps_every_call(
    events: list[tuple[float, bool]], seconds: float
) -> None:
    window = TimeWindow(seconds)
    width = seconds / TIME_SLICES
    now = 0.0
    kept: list[tuple[int, bool]] = []
    for gap, failed in events:
        now += gap
        window.record(failed, now)
        kept.append((int(now // width), failed))
        newest = int(now // width)
        inside = [f for epoch, f in kept if epoch > newest - TIME_SLICES]
        assert window.counts(now) == (len(inside), sum(inside))


@given(outcomes=st.lists(st.booleans(), max_size=60), size=st.integers(min_value=1, max_value=8))
def test_count_window_matches_the_last_n_calls(outcomes: list[bool], size: int) -> None:
    window = CountWindow(size)
    for index, failed in enumerate(outcomes):
        window.record(failed, 0.0)
        last = outcomes[max(0, index + 1 - size) : index + 1]
        assert window.counts(0.0) == (len(last), sum(last))


# --- half-open trials, counted exactly, through `execute` and `aexecute` alike -----------------


class NotTheService(Exception):
    """An error that says nothing about the service (`is_failure` says no)."""


def _call(breaker: CircuitBreaker, how: str, outcome: BaseException | None) -> str:
    """One call through `execute` or `aexecute` that returns "ok" or raises `outcome`."""

    def sync() -> str:
        if outcome is not None:
            raise outcome
        return "ok"

    async def coro() -> str:
        return sync()

    if how == "sync":
        return breaker.execute(sync)
    return asyncio.run(breaker.aexecute(coro))


def _counts(breaker: CircuitBreaker) -> tuple[int, int, int, int, int]:
    s = breaker.stats()
    return s.calls, s.successful, s.failed, s.rejected, s.state_changes


def _trial_breaker(clock: ManualClock, **config: Any) -> tuple[CircuitBreaker, list[Any]]:
    return make(
        clock,
        failure_threshold=1,
        open_timeout=5,
        is_failure=lambda exc: isinstance(exc, Boom),
        **config,
    )


@pytest.mark.parametrize("how", ["sync", "async"])
def test_half_open_needs_success_threshold_trials_and_counts_each(how: str) -> None:
    clock = ManualClock()
    breaker, changes = _trial_breaker(clock, half_open_max_calls=2, success_threshold=2)
    with pytest.raises(Boom):
        _call(breaker, how, Boom("down"))
    assert _counts(breaker) == (1, 0, 1, 0, 1)
    with pytest.raises(CircuitBreakerOpenError):
        _call(breaker, how, None)
    assert _counts(breaker) == (1, 0, 1, 1, 1)
    clock.advance(5)
    assert _call(breaker, how, None) == "ok"  # the first trial: still half-open
    assert breaker.state is CircuitState.HALF_OPEN
    assert _counts(breaker) == (2, 1, 1, 1, 2)
    assert _call(breaker, how, None) == "ok"  # the second closes it
    assert breaker.state is CircuitState.CLOSED
    assert _counts(breaker) == (3, 2, 1, 1, 3)
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_trial_error_that_is_not_the_services_frees_the_slot(how: str) -> None:
    clock = ManualClock()
    breaker, changes = _trial_breaker(clock, half_open_max_calls=1)
    with pytest.raises(Boom):
        _call(breaker, how, Boom("down"))
    clock.advance(5)
    with pytest.raises(NotTheService):
        _call(breaker, how, NotTheService("bad input"))
    # counted as a call that succeeded as far as the service goes; still half-open, and the
    # only trial slot is free again
    assert breaker.state is CircuitState.HALF_OPEN
    assert _counts(breaker) == (2, 1, 1, 0, 2)
    with pytest.raises(Boom):  # the next trial fails: open again
        _call(breaker, how, Boom("still down"))
    assert breaker.state is CircuitState.OPEN
    assert _counts(breaker) == (3, 1, 2, 0, 3)
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "open")]
    with pytest.raises(CircuitBreakerOpenError):
        _call(breaker, how, None)


@pytest.mark.parametrize("how", ["sync", "async"])
def test_an_interrupted_trial_counts_no_call_and_frees_the_slot(how: str) -> None:
    clock = ManualClock()
    breaker, _ = _trial_breaker(clock, half_open_max_calls=1)
    with pytest.raises(Boom):
        _call(breaker, how, Boom("down"))
    clock.advance(5)
    with pytest.raises(KeyboardInterrupt):
        _call(breaker, how, KeyboardInterrupt())
    assert breaker.state is CircuitState.HALF_OPEN
    assert _counts(breaker) == (1, 0, 1, 0, 2)
    assert _call(breaker, how, None) == "ok"  # the slot was freed: a trial, which closes it
    assert breaker.state is CircuitState.CLOSED
    assert _counts(breaker) == (2, 1, 1, 0, 3)


@pytest.mark.parametrize("how", ["sync", "async"])
def test_closed_calls_are_counted_and_a_non_failure_never_trips(how: str) -> None:
    clock = ManualClock()
    breaker, changes = _trial_breaker(clock)
    assert _call(breaker, how, None) == "ok"
    with pytest.raises(NotTheService):
        _call(breaker, how, NotTheService("bad input"))
    with pytest.raises(KeyboardInterrupt):
        _call(breaker, how, KeyboardInterrupt())
    assert breaker.state is CircuitState.CLOSED and changes == []
    assert _counts(breaker) == (2, 2, 0, 0, 0)


def test_a_trial_of_an_earlier_generation_decides_nothing() -> None:
    """Two trials at once; the first fails and re-opens the breaker; the second, finishing
    after, is counted but neither closes nor re-opens what the first decided."""
    clock = ManualClock()
    breaker, changes = _trial_breaker(clock, half_open_max_calls=2, success_threshold=2)
    with pytest.raises(Boom):
        _call(breaker, "sync", Boom("down"))
    clock.advance(5)

    async def scenario() -> None:
        first_may_end, second_may_end = asyncio.Event(), asyncio.Event()

        async def failing() -> str:
            await first_may_end.wait()
            raise Boom("down again")

        async def passing() -> str:
            await second_may_end.wait()
            return "ok"

        first = asyncio.ensure_future(breaker.aexecute(failing))
        second = asyncio.ensure_future(breaker.aexecute(passing))
        await asyncio.sleep(0)  # both admitted as trials
        first_may_end.set()
        with pytest.raises(Boom):
            await first
        assert breaker.state is CircuitState.OPEN
        second_may_end.set()
        assert await second == "ok"

    asyncio.run(scenario())
    assert breaker.state is CircuitState.OPEN
    assert _counts(breaker) == (3, 1, 2, 0, 3)
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "open")]
    clock.advance(5)
    assert _call(breaker, "sync", None) == "ok"
    assert breaker.state is CircuitState.HALF_OPEN  # a fresh generation needs two trials again


def test_a_forced_open_survives_restore_and_time_until_reset() -> None:
    from ai_sdlc.resilience.breaker import BreakerSnapshot

    clock = ManualClock()
    forced, _ = make(clock, open_timeout=5)
    forced.force_open()
    snap = forced.snapshot()
    assert snap.forced and snap.state is CircuitState.OPEN and snap.open_remaining is None
    other, _ = make(clock, open_timeout=5)
    other.restore(snap)
    clock.advance(1000)
    assert other.state is CircuitState.OPEN and other.snapshot().forced
    with pytest.raises(CircuitBreakerOpenError):
        other.execute(ok)
    other.reset()
    assert other.execute(ok) == "ok"
    # "forced" means nothing for a breaker that is not open
    closed, _ = make(clock)
    closed.restore(BreakerSnapshot(CircuitState.CLOSED, None, True))
    assert not closed.snapshot().forced and closed.state is CircuitState.CLOSED


@pytest.mark.parametrize("how", ["sync", "async"])
def test_every_closed_success_is_counted_and_pushes_failures_out_of_a_count_window(
    how: str,
) -> None:
    clock = ManualClock()
    breaker, changes = make(clock, failure_threshold=2, window="count", window_size=3)
    names: list[str] = []
    breaker.add_listener(lambda name, old, new: names.append(name))
    with pytest.raises(Boom):
        _call(breaker, how, Boom("down"))
    for _ in range(3):
        assert _call(breaker, how, None) == "ok"
    with pytest.raises(Boom):  # the first failure left the window: one failure in the last 3
        _call(breaker, how, Boom("down again"))
    assert breaker.state is CircuitState.CLOSED and changes == []
    assert _counts(breaker) == (5, 3, 2, 0, 0)
    with pytest.raises(Boom):  # two in the last three: open
        _call(breaker, how, Boom("and again"))
    assert breaker.state is CircuitState.OPEN and names == ["svc"]


def test_retry_in_is_zero_unless_open_and_never_negative() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=5)
    assert breaker.retry_in() == 0.0
    fail(breaker, 1)
    clock.advance(2)
    assert breaker.retry_in() == pytest.approx(3.0)
    clock.advance(10)  # past the timeout, not yet asked: still open, nothing left to wait
    assert breaker.retry_in() == 0.0


def test_calls_beyond_the_half_open_trials_are_rejected_and_counted() -> None:
    """One trial slot; while its trial runs, two more calls are rejected (and counted); a
    non-failure error of a trial frees exactly its own slot."""
    clock = ManualClock()
    breaker, _ = _trial_breaker(clock, half_open_max_calls=1)
    assert _call(breaker, "async", None) == "ok"
    assert _call(breaker, "async", None) == "ok"
    with pytest.raises(Boom):
        _call(breaker, "async", Boom("down"))
    clock.advance(5)

    async def scenario() -> None:
        may_end = asyncio.Event()

        async def trial() -> str:
            await may_end.wait()
            raise NotTheService("bad input")

        running = asyncio.ensure_future(breaker.aexecute(trial))
        await asyncio.sleep(0)
        for _ in range(2):
            with pytest.raises(CircuitBreakerOpenError):
                await breaker.aexecute(trial)
        may_end.set()
        with pytest.raises(NotTheService):
            await running
        # its slot is free again, and only one: a second concurrent trial is rejected
        again = asyncio.Event()

        async def slow_ok() -> str:
            await again.wait()
            return "ok"

        first = asyncio.ensure_future(breaker.aexecute(slow_ok))
        await asyncio.sleep(0)
        with pytest.raises(CircuitBreakerOpenError):
            await breaker.aexecute(slow_ok)
        again.set()
        assert await first == "ok"

    asyncio.run(scenario())
    assert breaker.state is CircuitState.CLOSED
    # calls: 2 ok + 1 failure + the trial's non-failure + the closing trial
    assert _counts(breaker) == (5, 4, 1, 3, 3)


# --- exact edges: thresholds met exactly, short open times, what a rejection says --------------


class CountingClock(ManualClock):
    """A manual clock that counts how often it is read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def test_a_closed_success_reads_no_clock_while_a_time_window_holds_a_failure() -> None:
    """The module's promise: the closed success path takes a lock and bumps counters, no clock
    read, also with a failure in a time window (no rate, no minimum above the threshold)."""
    clock = CountingClock()
    breaker, _ = make(clock, failure_threshold=3, window="time", window_size=10)
    with pytest.raises(Boom):
        _call(breaker, "async", Boom("down"))
    before = clock.reads
    for _ in range(3):
        assert _call(breaker, "async", None) == "ok"
        assert _call(breaker, "sync", None) == "ok"
    assert clock.reads == before


def test_a_closed_async_success_with_nothing_in_the_window_reads_no_clock() -> None:
    clock = CountingClock()
    breaker, _ = make(clock, failure_threshold=3, window="count", window_size=10)
    before = clock.reads
    for _ in range(3):
        assert _call(breaker, "async", None) == "ok"
    assert clock.reads == before


def test_the_breaker_trips_when_the_minimum_of_calls_is_reached_exactly() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, window="count", window_size=10, minimum_calls=3)
    breaker.execute(ok)
    fail(breaker, 1)  # 1 failure of 2 calls: fewer than the minimum
    assert breaker.state is CircuitState.CLOSED
    fail(breaker, 1)  # the third call: judged now
    assert breaker.state is CircuitState.OPEN


def test_a_failure_rate_exactly_at_the_threshold_trips() -> None:
    clock = ManualClock()
    breaker, _ = make(
        clock, failure_threshold=1, window="count", window_size=4, failure_rate_threshold=0.5
    )
    breaker.execute(ok)
    breaker.execute(ok)
    fail(breaker, 1)  # 1 of 3: below half
    assert breaker.state is CircuitState.CLOSED
    fail(breaker, 1)  # 2 of 4 = 50 %: at the threshold, which trips
    assert breaker.state is CircuitState.OPEN


@pytest.mark.parametrize("duration", [0.0, 0.5])
def test_a_short_forced_open_lasts_exactly_its_duration(duration: float) -> None:
    clock = ManualClock()
    breaker, _ = make(clock, open_timeout=60)
    breaker.force_open(duration=duration)
    assert breaker.retry_in() == pytest.approx(duration)
    clock.advance(duration)
    assert breaker.execute(ok) == "ok" and breaker.state is CircuitState.CLOSED


def test_a_snapshot_keeps_an_open_time_under_a_second() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=10)
    fail(breaker, 1)
    clock.advance(9.75)
    assert breaker.snapshot().open_remaining == pytest.approx(0.25)
    clock.advance(5)
    assert breaker.snapshot().open_remaining == 0.0


def test_every_rejection_of_an_open_breaker_is_counted() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=10)
    fail(breaker, 1)
    for _ in range(3):
        with pytest.raises(CircuitBreakerOpenError):
            breaker.execute(ok)
    assert breaker.stats().rejected == 3


def test_a_call_beyond_the_trials_is_told_a_trial_may_come_at_once() -> None:
    """Half-open with its trial slots taken: the next trial may come as soon as one ends."""
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=5)
    fail(breaker, 1)
    clock.advance(5)
    caught: list[CircuitBreakerOpenError] = []

    def trial() -> str:
        with pytest.raises(CircuitBreakerOpenError) as rejected:
            breaker.execute(ok)
        caught.append(rejected.value)
        return "ok"

    assert breaker.execute(trial) == "ok"
    assert caught[0].retry_in == 0.0
    assert caught[0].message == "circuit breaker 'svc' is open; next trial call in 0.0 s"


def test_time_in_each_state_adds_up_over_repeated_visits() -> None:
    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=1, open_timeout=20)
    clock.advance(5)
    fail(breaker, 1)  # closed 5 s, then open
    clock.advance(20)
    breaker.execute(ok)  # open 20 s; half-open for no time; closed again
    clock.advance(7)
    fail(breaker, 1)  # closed another 7 s: 12 in all; open again
    clock.advance(0.5)  # half a second into this open: counted as it is
    assert breaker.stats().time_in_state == {"closed": 12.0, "open": 20.5, "half_open": 0.0}


def test_reset_forgets_the_failures_of_a_closed_breaker() -> None:
    clock = ManualClock()
    breaker, changes = make(clock, failure_threshold=3)
    fail(breaker, 2)
    breaker.reset()  # already closed: no state change, but the failures are forgotten
    assert changes == []
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED
    fail(breaker, 1)
    assert breaker.state is CircuitState.OPEN


def test_restoring_closed_forgets_the_failures_seen_here() -> None:
    from ai_sdlc.resilience.breaker import BreakerSnapshot

    clock = ManualClock()
    breaker, _ = make(clock, failure_threshold=3)
    fail(breaker, 2)
    breaker.restore(BreakerSnapshot(CircuitState.CLOSED, None, False))
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"failure_threshold": 0}, "failure_threshold must be >= 1"),
        ({"window": "sliding"}, "window must be 'count' or 'time'"),
        ({"window_size": 0}, "window_size must be > 0"),
        ({"minimum_calls": 0}, "minimum_calls must be >= 1"),
        ({"open_timeout": -1}, "open_timeout must be >= 0"),
        ({"half_open_max_calls": 0}, "half_open_max_calls must be >= 1"),
        ({"success_threshold": 0}, "success_threshold must be >= 1"),
        (
            {"success_threshold": 2, "half_open_max_calls": 1},
            "success_threshold must be <= half_open_max_calls",
        ),
        ({"failure_rate_threshold": 0}, "failure_rate_threshold must be in (0, 1]"),
        ({"failure_rate_threshold": 1.5}, "failure_rate_threshold must be in (0, 1]"),
        (
            {"window": "count", "window_size": 2.5},
            "a count window_size must be a whole number of calls",
        ),
    ],
)
def test_a_bad_breaker_config_says_which_value_is_wrong(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        CircuitBreakerConfig(**bad)
    assert str(caught.value) == message


def test_the_smallest_allowed_breaker_settings_work() -> None:
    """A time window under a second, no open time at all, a rate of every call failing."""
    clock = ManualClock()
    breaker, _ = make(
        clock, failure_threshold=1, window="time", window_size=0.5, failure_rate_threshold=1.0
    )
    breaker.execute(ok)
    fail(breaker, 1)  # 1 of 2 failed: under the 100 % rate
    assert breaker.state is CircuitState.CLOSED
    clock.advance(1)  # the half-second window has moved past both calls
    fail(breaker, 1)  # 1 of 1: every call in the window failed
    assert breaker.state is CircuitState.OPEN
    for open_timeout in (0.0, 0.5):
        quick, _ = make(clock, failure_threshold=1, open_timeout=open_timeout)
        fail(quick, 1)
        clock.advance(open_timeout)
        assert quick.execute(ok) == "ok" and quick.state is CircuitState.CLOSED
