"""The retry engine on a manual clock: hints, stops, timeouts, hooks, budget, async."""

from __future__ import annotations

import asyncio
import email.utils
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderLimitError,
    ProviderRequestError,
    TransientProviderError,
)
from ai_sdlc.resilience import (
    AttemptTimeoutError,
    BudgetConfig,
    RetryBudget,
    RetryConfig,
    RetryEngine,
)
from ai_sdlc.resilience.classify import classify
from ai_sdlc.resilience.clock import ManualClock

WALL_NOW = 1_700_000_000.0


class FakeSdkError(Exception):
    """Shaped like anthropic/openai APIStatusError: status_code, response.headers, body."""

    def __init__(self, status: int, headers: dict[str, str] | None = None, body: Any = None):
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = type("Response", (), {"headers": headers or {}})()
        self.body = body


def scripted(
    *outcomes: BaseException | str, clock: ManualClock | None = None, duration: float = 0.0
) -> Callable[[], str]:
    """A call that raises or returns each outcome in turn, taking `duration` clock seconds."""
    queue: Iterator[BaseException | str] = iter(outcomes)

    def call() -> str:
        if clock is not None:
            clock.advance(duration)
        outcome = next(queue)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return call


def engine(clock: ManualClock, **config: Any) -> RetryEngine:
    config.setdefault("jitter", "none")
    return RetryEngine(RetryConfig(**config), clock=clock, sleep=clock.sleep, rand=lambda: 0.5)


def rate_limited(retry_after: float | None = None) -> TransientProviderError:
    return TransientProviderError("429", kind="rate_limit", retry_after=retry_after, status=429)


def test_success_after_retries_records_every_attempt() -> None:
    clock = ManualClock()
    overloaded = TransientProviderError("busy", kind="overloaded", status=529)
    call = scripted(overloaded, overloaded, "ok", clock=clock, duration=2.0)
    result = engine(clock, max_attempts=3).execute(call)
    assert result.success and result.result == "ok" and result.error is None
    assert [(a.number, a.delay, a.duration) for a in result.attempts] == [
        (1, 0.0, 2.0),
        (2, 1.0, 2.0),
        (3, 2.0, 2.0),
    ]
    assert result.attempts[0].error is overloaded and result.attempts[2].error is None
    assert result.total_duration == 9.0 and result.retries == 2 and result.retry_delay == 3.0
    assert result.unwrap() == "ok"


def test_retry_after_is_honoured_exactly_and_capped_by_max_delay() -> None:
    clock = ManualClock()
    engine(clock, max_attempts=3, max_delay=30).execute(
        scripted(rate_limited(7), rate_limited(120), "ok")
    )
    assert clock.sleeps == [7.0, 30.0]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "12"}, 12.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": email.utils.formatdate(WALL_NOW + 20, usegmt=True)}, 20.0),
        ({"retry-after": "soon"}, 1.0),  # unparsable: the strategy decides
    ],
)
def test_retry_after_header_from_sdk_errors(headers: dict[str, str], expected: float) -> None:
    clock = ManualClock()
    retry = RetryEngine(
        RetryConfig(
            max_attempts=2,
            jitter="none",
            classifier=lambda exc: classify(exc, now=lambda: WALL_NOW),
        ),
        clock=clock,
        sleep=clock.sleep,
    )
    result = retry.execute(scripted(FakeSdkError(429, headers), "ok"))
    assert result.success
    assert clock.sleeps == [pytest.approx(expected)]


@pytest.mark.parametrize(
    "error",
    [
        ProviderAuthError("bad key", status=401),
        ProviderConfigError("no model"),
        ProviderRequestError("prompt too long", status=400),
        ProviderLimitError("spend cap", status=429),
        FakeSdkError(429, {}, {"type": "error", "error": {"type": "billing_error"}}),
        FakeSdkError(
            429, {}, {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}
        ),
        FakeSdkError(401, {"retry-after": "1"}),
        FakeSdkError(400, {}, {"error": {"type": "invalid_request_error"}}),
        ValueError("a bug, not an outage"),
    ],
)
def test_non_retryable_errors_stop_at_once(error: Exception) -> None:
    clock = ManualClock()
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        raise error

    result = engine(clock, max_attempts=5, retryable_statuses=frozenset({400, 401, 429})).execute(
        call
    )
    assert not result.success and result.error is error
    assert result.stop_reason == "non_retryable"
    assert len(calls) == 1 and clock.sleeps == []
    with pytest.raises(type(error)):
        result.unwrap()


def test_overloaded_in_a_200_stream_and_529_are_retried() -> None:
    clock = ManualClock()
    stream_overload = FakeSdkError(
        200, {}, {"type": "error", "error": {"type": "overloaded_error"}}
    )
    result = engine(clock, max_attempts=3).execute(
        scripted(stream_overload, FakeSdkError(529), "ok")
    )
    assert result.success and len(result.attempts) == 3


def test_429_with_quota_type_but_a_retry_hint_is_a_rate_limit() -> None:
    clock = ManualClock()
    error = FakeSdkError(429, {"retry-after": "3"}, {"error": {"type": "quota_exceeded"}})
    result = engine(clock, max_attempts=2).execute(scripted(error, "ok"))
    assert result.success and clock.sleeps == [3.0]


def test_exhausted_after_max_attempts() -> None:
    clock = ManualClock()
    error = TransientProviderError("down", kind="server", status=503)
    result = engine(clock, max_attempts=3).execute(scripted(error, error, error, "never"))
    assert result.stop_reason == "exhausted" and len(result.attempts) == 3
    assert clock.sleeps == [1.0, 2.0]


def test_overall_timeout_never_starts_a_sleep_that_crosses_it() -> None:
    clock = ManualClock()
    error = TransientProviderError("down", kind="timeout")
    retry = engine(clock, max_attempts=10, initial_delay=10, max_delay=100, overall_timeout=25)
    result = retry.execute(scripted(*[error] * 10, clock=clock, duration=1.0))
    # t=1 fails, sleep 10 (ends at 11 < 25); t=12 fails, sleep 20 would end at 32: stop.
    assert clock.sleeps == [10.0]
    assert result.stop_reason == "overall_timeout" and len(result.attempts) == 2
    assert clock.now == 12.0


def test_attempt_timeout_abandons_a_hung_sync_call() -> None:
    release = threading.Event()
    calls: list[int] = []

    def hung() -> str:
        calls.append(1)
        release.wait(60)  # released as soon as the retry gave up on it
        return "late"

    clock = ManualClock()
    retry = engine(clock, max_attempts=2, initial_delay=0, attempt_timeout=0.05)
    try:
        result = retry.execute(hung)
    finally:
        release.set()
    assert not result.success and result.stop_reason == "exhausted"
    assert len(calls) == 2
    assert all(isinstance(a.error, AttemptTimeoutError) for a in result.attempts)


def test_attempt_timeout_passes_fast_results_and_errors_through() -> None:
    clock = ManualClock()
    retry = engine(clock, max_attempts=2, initial_delay=0, attempt_timeout=60)
    ok = retry.execute(scripted(TransientProviderError("x", kind="connection"), "fine"))
    assert ok.success and ok.result == "fine" and len(ok.attempts) == 2
    with pytest.raises(StoryBlockedError):
        retry.execute(scripted(StoryBlockedError("stop", story_id="S-0001")))


def test_on_retry_runs_before_each_sleep_with_attempt_delay_error_reason() -> None:
    clock = ManualClock()
    seen: list[tuple[int, float, str, float, int]] = []

    def on_retry(attempt: int, delay: float, error: BaseException, reason: str) -> None:
        seen.append((attempt, delay, reason, clock.now, len(clock.sleeps)))
        assert isinstance(error, TransientProviderError)

    engine(clock, max_attempts=3).execute(
        scripted(rate_limited(5), TransientProviderError("x", kind="server", status=502), "ok"),
        on_retry=on_retry,
    )
    assert seen == [
        (1, 5.0, "rate_limit (HTTP 429), server asked to wait 5 s", 0.0, 0),
        (2, 2.0, "server (HTTP 502)", 5.0, 1),
    ]


def test_story_blocked_from_the_hook_propagates_unchanged_without_sleeping() -> None:
    clock = ManualClock()
    blocked = StoryBlockedError("global recovery limit reached", story_id="S-0007")
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        raise rate_limited(3)

    def on_retry(attempt: int, delay: float, error: BaseException, reason: str) -> None:
        raise blocked

    with pytest.raises(StoryBlockedError) as caught:
        engine(clock, max_attempts=5).execute(call, on_retry=on_retry)
    assert caught.value is blocked
    assert calls == [1] and clock.sleeps == []


def test_story_blocked_raised_by_the_call_is_never_retried() -> None:
    clock = ManualClock()
    with pytest.raises(StoryBlockedError):
        engine(clock, max_attempts=5).execute(
            scripted(StoryBlockedError("limit", story_id="S-0001"), "ok")
        )
    assert clock.sleeps == []


def test_should_retry_predicate_and_exception_types() -> None:
    clock = ManualClock()
    by_type = engine(clock, max_attempts=2, retryable_errors=(KeyError,))
    assert by_type.execute(scripted(KeyError("k"), "ok")).success
    nothing = engine(clock, max_attempts=3, should_retry=lambda exc: False)
    assert nothing.execute(scripted(rate_limited(1), "ok")).stop_reason == "non_retryable"
    custom = engine(clock, max_attempts=2, should_retry=lambda exc: isinstance(exc, ValueError))
    assert custom.execute(scripted(ValueError("flaky"), "ok")).success


def test_budget_refuses_retries_once_spent() -> None:
    clock = ManualClock()
    budget = RetryBudget(BudgetConfig(ratio=0.0, floor_per_second=0.0, burst=2), clock=clock)
    error = TransientProviderError("down", kind="server", status=500)
    retry = RetryEngine(
        RetryConfig(max_attempts=5, jitter="none"), clock=clock, sleep=clock.sleep, budget=budget
    )
    first = retry.execute(scripted(*[error] * 5))
    assert first.stop_reason == "budget" and len(first.attempts) == 3
    second = retry.execute(scripted(*[error] * 5))
    assert second.stop_reason == "budget" and len(second.attempts) == 1
    stats = budget.stats()
    assert (stats.calls, stats.retries_allowed, stats.retries_refused) == (2, 2, 2)


def test_budget_share_of_calls_and_time_floor_refill_it() -> None:
    clock = ManualClock()
    budget = RetryBudget(BudgetConfig(ratio=0.5, floor_per_second=0.1, burst=3), clock=clock)
    for _ in range(3):
        assert budget.try_spend()
    assert not budget.try_spend()
    budget.record_call()
    budget.record_call()  # two calls at 50 % buy one retry
    assert budget.try_spend() and not budget.try_spend()
    clock.advance(10)  # the floor: 0.1 token per second
    assert budget.try_spend() and not budget.try_spend()
    clock.advance(1000)  # never above burst
    assert budget.stats().balance == 3.0


def test_aexecute_retries_with_the_async_sleep() -> None:
    clock = ManualClock()
    outcomes = iter([rate_limited(4), TransientProviderError("x", kind="overloaded"), "done"])

    async def call() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    retry = RetryEngine(
        RetryConfig(max_attempts=3, jitter="none"),
        clock=clock,
        sleep=lambda s: pytest.fail("sync sleep used in aexecute"),
        async_sleep=clock.async_sleep,
    )
    result = asyncio.run(retry.aexecute(call))
    assert result.success and result.result == "done" and clock.sleeps == [4.0, 2.0]


def test_aexecute_attempt_timeout_cancels_and_blocked_propagates() -> None:
    clock = ManualClock()
    cancelled: list[bool] = []

    async def hung() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    retry = RetryEngine(
        RetryConfig(max_attempts=2, initial_delay=0, attempt_timeout=0.05),
        clock=clock,
        async_sleep=clock.async_sleep,
    )
    result = asyncio.run(retry.aexecute(hung))
    assert result.stop_reason == "exhausted" and cancelled == [True, True]
    assert isinstance(result.error, AttemptTimeoutError)

    async def own_timeout() -> str:
        raise TimeoutError("the call's own timeout")

    own = asyncio.run(retry.aexecute(own_timeout))
    assert type(own.error) is TimeoutError  # not mistaken for the attempt timeout

    async def blocked() -> str:
        raise StoryBlockedError("limit", story_id="S-0002")

    with pytest.raises(StoryBlockedError):
        asyncio.run(retry.aexecute(blocked))


def test_invalid_configs_are_refused() -> None:
    for bad in (
        {"max_attempts": 0},
        {"multiplier": 0.5},
        {"strategy": "random"},
        {"jitter": 1.5},
        {"jitter": "some"},
        {"attempt_timeout": 0},
        {"initial_delay": -1},
    ):
        with pytest.raises(ValueError):
            RetryConfig(**bad)


# --- `aexecute` decides exactly as `execute` does ---------------------------------------------

#: (outcomes, each call's clock duration, config): every stop reason and hook.
SAME_SCENARIOS: dict[str, tuple[list[BaseException | str], float, dict[str, Any]]] = {
    "success after retries": (
        [rate_limited(3), TransientProviderError("busy", kind="overloaded"), "done"],
        0.25,
        {"max_attempts": 4, "initial_delay": 0.5},
    ),
    "exhausted": ([rate_limited(), rate_limited(), rate_limited()], 1.0, {"max_attempts": 3}),
    "non retryable": ([ProviderAuthError("no key", status=401)], 0.5, {"max_attempts": 5}),
    "overall timeout": (
        [rate_limited(), rate_limited(), "late"],
        2.0,
        {"max_attempts": 5, "initial_delay": 3.0, "overall_timeout": 6.0},
    ),
    "budget": (
        [rate_limited(), rate_limited(), "never"],
        0.0,
        {"max_attempts": 5, "initial_delay": 1.0},
    ),
}


def _run_both_ways(name: str, how: str) -> tuple[Any, list[Any], list[Any], list[float]]:
    outcomes, duration, config = SAME_SCENARIOS[name]
    clock = ManualClock(start=100.0)
    budget = RetryBudget(BudgetConfig(ratio=0.0, floor_per_second=0.0, burst=1.0), clock=clock)
    retry = RetryEngine(
        RetryConfig(jitter="none", **config),
        clock=clock,
        sleep=clock.sleep,
        async_sleep=clock.async_sleep,
        rand=lambda: 0.5,
        budget=budget if name == "budget" else None,
    )
    attempts: list[Any] = []
    retries: list[Any] = []
    sync_call = scripted(*outcomes, clock=clock, duration=duration)

    async def async_call() -> str:
        return sync_call()

    hooks: dict[str, Any] = {
        "on_attempt": attempts.append,
        "on_retry": lambda *args: retries.append(args),
    }
    if how == "sync":
        result = retry.execute(sync_call, **hooks)
    else:
        result = asyncio.run(retry.aexecute(async_call, **hooks))
    return result, attempts, retries, clock.sleeps


@pytest.mark.parametrize("name", sorted(SAME_SCENARIOS))
def test_aexecute_decides_exactly_as_execute(name: str) -> None:
    sync, sync_attempts, sync_retries, sync_sleeps = _run_both_ways(name, "sync")
    async_, async_attempts, async_retries, async_sleeps = _run_both_ways(name, "async")

    def shape(result: Any) -> tuple[Any, ...]:
        records = [(a.number, a.delay, a.duration, repr(a.error)) for a in result.attempts]
        return (
            result.success,
            result.result,
            repr(result.error),
            records,
            result.total_duration,
            result.stop_reason,
        )

    assert shape(async_) == shape(sync)
    assert [(a.number, a.delay, a.duration) for a in async_attempts] == [
        (a.number, a.delay, a.duration) for a in sync_attempts
    ]
    assert len(async_attempts) == len(sync.attempts)
    assert repr(async_retries) == repr(sync_retries) and async_sleeps == sync_sleeps
    # ... and what both decided is what the scenario means
    expected_stop = {
        "success after retries": "success",
        "exhausted": "exhausted",
        "non retryable": "non_retryable",
        "overall timeout": "overall_timeout",
        "budget": "budget",
    }[name]
    assert sync.stop_reason == expected_stop, shape(sync)
    assert sync.total_duration > 0 or name == "budget"


@pytest.mark.parametrize("how", ["sync", "async"])
def test_an_attempt_timeout_is_shortened_to_what_is_left_overall(how: str) -> None:
    """attempt_timeout 30 s, overall 1.05 s: the second attempt starts 1 s in (after the first
    failed and the 1 s delay), so it may run only the 0.05 s left; a hung one is abandoned
    then, and its error says so."""
    release = threading.Event()
    clock = ManualClock(start=100.0)
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise rate_limited()
        release.wait(60)  # hung until the test ends it
        return "late"

    async def async_attempt() -> str:
        if len(calls) == 0:
            return attempt()
        calls.append(1)
        await asyncio.Event().wait()  # hung until cancelled
        return "late"

    retry = RetryEngine(
        RetryConfig(
            max_attempts=2,
            initial_delay=1.0,
            jitter="none",
            attempt_timeout=30.0,
            overall_timeout=1.05,
        ),
        clock=clock,
        sleep=clock.sleep,
        async_sleep=clock.async_sleep,
    )
    try:
        if how == "sync":
            result = retry.execute(attempt)
        else:
            result = asyncio.run(retry.aexecute(async_attempt))
    finally:
        release.set()
    assert len(calls) == 2 and not result.success
    error = result.attempts[-1].error
    assert isinstance(error, AttemptTimeoutError), result.attempts
    assert error.timeout == pytest.approx(0.05), error.timeout


#: Runs a call that hangs past its attempt timeout, then returns from main: the abandoned
#: attempt's thread must not keep the process alive.
_ABANDONS = """
import threading
from ai_sdlc.resilience import RetryConfig, RetryEngine
forever = threading.Event()
retry = RetryEngine(RetryConfig(max_attempts=1, attempt_timeout=0.05, jitter="none"))
result = retry.execute(lambda: forever.wait())
print(type(result.attempts[0].error).__name__, flush=True)
"""


def test_an_abandoned_attempt_does_not_keep_the_process_alive() -> None:
    import subprocess
    import sys

    from tests.support.waits import GUARD

    done = subprocess.run(
        [sys.executable, "-c", _ABANDONS], capture_output=True, text=True, timeout=GUARD
    )
    assert done.returncode == 0 and done.stdout == "AttemptTimeoutError\n", done


def test_a_timed_attempt_runs_in_a_daemon_thread() -> None:
    """What keeps an abandoned attempt from holding the process open at exit."""
    seen: list[bool] = []
    retry = engine(ManualClock(), max_attempts=1, attempt_timeout=30)
    result = retry.execute(lambda: seen.append(threading.current_thread().daemon))
    assert result.success and seen == [True]


# --- the defaults the product runs with: the real async sleep, the attempt thread, the budget --


def test_the_default_async_sleep_is_asyncios_and_lets_other_tasks_run() -> None:
    from ai_sdlc.resilience.retry import real_async_sleep

    order: list[str] = []

    async def scenario() -> None:
        async def other() -> None:
            order.append("other task")

        task = asyncio.ensure_future(other())
        await real_async_sleep(0)  # a zero sleep still yields to the loop
        order.append("after the sleep")
        await task

    asyncio.run(scenario())
    assert order == ["other task", "after the sleep"]


def test_aexecute_retries_with_the_real_async_sleep_by_default() -> None:
    retry = RetryEngine(RetryConfig(max_attempts=2, initial_delay=0.0, jitter="none"))
    outcomes = iter([TransientProviderError("x", kind="overloaded"), "done"])

    async def call() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    result = asyncio.run(retry.aexecute(call))
    assert result.success and result.result == "done" and result.retry_delay == 0.0


def test_a_timed_attempt_runs_in_a_thread_named_for_stack_dumps() -> None:
    """An abandoned attempt keeps running: its thread says what it is in a dump or a
    `threading.enumerate()`."""
    names: list[str] = []
    retry = engine(ManualClock(), max_attempts=1, attempt_timeout=30)
    result = retry.execute(lambda: names.append(threading.current_thread().name))
    assert result.success and names == ["ai-sdlc-attempt"]


def test_the_budget_floor_refills_within_a_second() -> None:
    clock = ManualClock()
    budget = RetryBudget(BudgetConfig(ratio=0.0, floor_per_second=2.0, burst=1), clock=clock)
    assert budget.try_spend() and not budget.try_spend()
    clock.advance(0.5)  # 2 tokens a second: one token after half a second
    assert budget.try_spend()
    assert budget.stats().balance == 0.0


def test_a_clock_that_steps_back_takes_no_token_away() -> None:
    clock = ManualClock(start=100.0)
    budget = RetryBudget(BudgetConfig(ratio=0.0, floor_per_second=1.0, burst=2), clock=clock)
    assert budget.try_spend()  # one token left
    clock.advance(-0.5)
    assert budget.stats().balance == 1.0
    assert budget.try_spend()


# --- the verdict and the delay, exactly -----------------------------------------------------------


def test_a_guardrail_stop_is_never_retryable_whatever_the_predicate_says() -> None:
    retry = engine(ManualClock(), should_retry=lambda exc: True)
    blocked = StoryBlockedError("limit", story_id="S-0001")
    assert retry.is_retryable(blocked, classify(blocked)) is False
    assert retry.is_retryable(ValueError("x"), classify(ValueError("x"))) is True


def test_retryable_exception_types_retry_only_those_types() -> None:
    clock = ManualClock()
    retry = engine(clock, max_attempts=3, retryable_errors=(ValueError,))
    assert retry.execute(scripted(ValueError("flaky"), "ok")).success
    other = retry.execute(scripted(KeyError("missing"), "ok"))
    assert other.stop_reason == "non_retryable" and len(other.attempts) == 1


def test_a_retry_after_under_a_second_is_honoured_exactly() -> None:
    clock = ManualClock()
    retry = engine(clock, max_attempts=2)
    assert retry.execute(scripted(rate_limited(0.25), "ok")).success
    assert clock.sleeps == [0.25]
    assert retry.next_delay(1, 0.0, -3.0) == 0.0  # a negative hint is no wait, never negative


def test_a_sleep_that_would_end_exactly_at_the_overall_timeout_is_not_started() -> None:
    clock = ManualClock()
    retry = engine(clock, max_attempts=5, initial_delay=1.0, multiplier=2.0, overall_timeout=3.0)
    error = TransientProviderError("down", kind="server", status=500)
    result = retry.execute(scripted(*[error] * 5))
    # slept 1 s after the first attempt; 1 s + the next 2 s reach the 3 s limit: stop there
    assert result.stop_reason == "overall_timeout" and clock.sleeps == [1.0]
    assert len(result.attempts) == 2


# --- what a bad retry or budget config is told, and the edges that are allowed --------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be >= 1"),
        ({"initial_delay": -1}, "delays must be >= 0"),
        ({"max_delay": -0.5}, "delays must be >= 0"),
        ({"multiplier": 0.5}, "multiplier must be >= 1"),
        (
            {"strategy": "random"},
            "strategy must be one of exponential, linear, fixed, decorrelated or a callable",
        ),
        ({"jitter": "some"}, "jitter must be one of none, full, equal or a factor"),
        ({"jitter": 1.5}, "a jitter factor must be between 0 and 1"),
        ({"attempt_timeout": 0}, "timeouts must be > 0"),
        ({"overall_timeout": -1}, "timeouts must be > 0"),
    ],
)
def test_a_bad_retry_config_says_which_value_is_wrong(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        RetryConfig(**bad)
    assert str(caught.value) == message


def test_no_delay_at_all_is_a_valid_retry_config() -> None:
    clock = ManualClock()
    for max_delay in (0.0, 0.5):
        retry = engine(clock, max_attempts=2, initial_delay=0.0, max_delay=max_delay)
        assert retry.execute(scripted(rate_limited(9), "ok")).success
    assert clock.sleeps == [0.0, 0.5]  # the hint, capped by max_delay


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"ratio": 1.5}, "ratio must be between 0 and 1"),
        ({"ratio": -0.1}, "ratio must be between 0 and 1"),
        ({"floor_per_second": -1}, "floor_per_second must be >= 0"),
        ({"burst": 0.5}, "burst must be >= 1 (one retry)"),
    ],
)
def test_a_bad_budget_config_says_which_value_is_wrong(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        BudgetConfig(**bad)
    assert str(caught.value) == message


def test_a_budget_may_give_a_whole_retry_per_call() -> None:
    budget = RetryBudget(
        BudgetConfig(ratio=1.0, floor_per_second=0.0, burst=1), clock=ManualClock()
    )
    assert budget.try_spend() and not budget.try_spend()
    budget.record_call()
    assert budget.try_spend()
