"""The retry engine: call, classify the failure, wait a bounded and jittered delay, call again.

Every retry is visible: `on_retry` runs before each sleep (it may raise to stop at once, e.g.
`StoryBlockedError` when the story's recovery limit is reached) and every attempt is kept in
the `RetryResult`. Clock, sleep and random source are injected so tests are exact and instant.
"""

from __future__ import annotations

import contextvars
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Literal, NamedTuple, TypeVar, cast

import msgspec

from ai_sdlc.errors import TRANSIENT_KINDS, RunHaltedError, StoryBlockedError
from ai_sdlc.resilience.backoff import (
    JITTERS,
    STRATEGIES,
    Jitter,
    RandomSource,
    Strategy,
    apply_jitter,
    base_delay,
)
from ai_sdlc.resilience.budget import RetryBudget
from ai_sdlc.resilience.classify import NEVER_RETRY_KINDS, Classification, classify
from ai_sdlc.resilience.errors import AttemptTimeoutError

T = TypeVar("T")

#: Called before each sleep with (failed attempt number, delay seconds, error, reason).
RetryHook = Callable[[int, float, BaseException, str], None]
#: Called after each attempt, failed or not (for live display).
AttemptHook = Callable[["CallAttempt"], None]

StopReason = Literal["success", "non_retryable", "exhausted", "overall_timeout", "budget"]

#: Errors that end the whole operation at once and propagate unchanged out of `execute`.
ABORT_ERRORS: tuple[type[BaseException], ...] = (StoryBlockedError, RunHaltedError)

DEFAULT_RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504, 529})


class RetryConfig(msgspec.Struct, frozen=True):
    """How to retry one kind of call. Every field has a sensible default."""

    #: Attempts in total, including the first call.
    max_attempts: int = 3
    initial_delay: float = 1.0
    max_delay: float = 30.0
    strategy: Strategy = "exponential"
    multiplier: float = 2.0
    jitter: Jitter = 0.1
    #: Classification kinds (e.g. "rate_limit") or exception types worth retrying.
    retryable_errors: tuple[str | type[BaseException], ...] = TRANSIENT_KINDS
    retryable_statuses: frozenset[int] = DEFAULT_RETRYABLE_STATUSES
    #: When given, the final word on whether an error is retried (guardrail stops excepted).
    should_retry: Callable[[BaseException], bool] | None = None
    #: Abandon an attempt after this many seconds (sync calls run in a worker thread then).
    attempt_timeout: float | None = None
    #: Never start a sleep that would end after this many seconds from the first call.
    overall_timeout: float | None = None
    classifier: Callable[[BaseException], Classification] = msgspec.field(default=classify)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must be >= 0")
        if self.multiplier < 1:
            raise ValueError("multiplier must be >= 1")
        if not callable(self.strategy) and self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)} or a callable")
        if isinstance(self.jitter, str):
            if self.jitter not in JITTERS:
                raise ValueError(f"jitter must be one of {', '.join(JITTERS)} or a factor")
        elif not 0 <= self.jitter <= 1:
            raise ValueError("a jitter factor must be between 0 and 1")
        for timeout in (self.attempt_timeout, self.overall_timeout):
            if timeout is not None and timeout <= 0:
                raise ValueError("timeouts must be > 0")


class CallAttempt(NamedTuple):
    """One call: its 1-based number, the sleep before it, how long it ran, its error."""

    number: int
    delay: float
    duration: float
    error: BaseException | None


class RetryResult(msgspec.Struct, Generic[T]):
    """The outcome of `RetryEngine.execute`: never raises for the guarded call's errors."""

    success: bool
    result: T | None
    error: BaseException | None
    attempts: list[CallAttempt]
    total_duration: float
    stop_reason: StopReason

    @property
    def retries(self) -> int:
        return len(self.attempts) - 1

    @property
    def retry_delay(self) -> float:
        """Seconds spent sleeping between attempts."""
        return sum(attempt.delay for attempt in self.attempts)

    def unwrap(self) -> T:
        """The result, or raise the last error."""
        if self.success:
            return cast(T, self.result)
        assert self.error is not None
        raise self.error


class _Decision(NamedTuple):
    stop: StopReason | None
    delay: float
    reason: str


async def real_async_sleep(seconds: float) -> None:
    """`asyncio.sleep`, imported when first awaited: most commands never touch asyncio, and
    importing it costs ~12 ms of start-up."""
    import asyncio

    await asyncio.sleep(seconds)


class RetryEngine:
    """Runs calls under one `RetryConfig`; reusable and thread-safe."""

    def __init__(
        self,
        config: RetryConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = real_async_sleep,
        rand: RandomSource = random.random,
        budget: RetryBudget | None = None,
    ) -> None:
        self.config = config or RetryConfig()
        self.budget = budget
        self._clock = clock
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._rand = rand
        kinds = [item for item in self.config.retryable_errors if isinstance(item, str)]
        types = [item for item in self.config.retryable_errors if not isinstance(item, str)]
        self._kinds = frozenset(kinds)
        self._types = tuple(types)

    def execute(
        self,
        fn: Callable[[], T],
        *,
        on_retry: RetryHook | None = None,
        on_attempt: AttemptHook | None = None,
    ) -> RetryResult[T]:
        """Call `fn` until it succeeds or the policy says stop; guardrail stops propagate."""
        clock = self._clock
        start = clock()
        if self.budget is not None:
            self.budget.record_call()
        attempts: list[CallAttempt] = []
        timeout = self.config.attempt_timeout
        delay = 0.0
        number = 1
        while True:
            began = clock()
            try:
                if timeout is None:
                    value = fn()
                else:
                    value = _call_in_thread(fn, self._attempt_timeout(start, began))
            except ABORT_ERRORS:
                raise
            except Exception as exc:
                ended = clock()
                record = CallAttempt(number, delay, ended - began, exc)
                attempts.append(record)
                if on_attempt is not None:
                    on_attempt(record)
                decision = self._decide(exc, number, start, ended, delay)
                if decision.stop is not None:
                    return RetryResult(False, None, exc, attempts, ended - start, decision.stop)
                if on_retry is not None:
                    on_retry(number, decision.delay, exc, decision.reason)
                self._sleep(decision.delay)
                delay = decision.delay
                number += 1
                continue
            ended = clock()
            record = CallAttempt(number, delay, ended - began, None)
            attempts.append(record)
            if on_attempt is not None:
                on_attempt(record)
            return RetryResult(True, value, None, attempts, ended - start, "success")

    async def aexecute(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        on_retry: RetryHook | None = None,
        on_attempt: AttemptHook | None = None,
    ) -> RetryResult[T]:
        """`execute` for a coroutine function; `attempt_timeout` cancels the attempt."""
        clock = self._clock
        start = clock()
        if self.budget is not None:
            self.budget.record_call()
        attempts: list[CallAttempt] = []
        timeout = self.config.attempt_timeout
        delay = 0.0
        number = 1
        while True:
            began = clock()
            try:
                if timeout is None:
                    value = await fn()
                else:
                    value = await _await_with_timeout(fn, self._attempt_timeout(start, began))
            except ABORT_ERRORS:
                raise
            except Exception as exc:
                ended = clock()
                record = CallAttempt(number, delay, ended - began, exc)
                attempts.append(record)
                if on_attempt is not None:
                    on_attempt(record)
                decision = self._decide(exc, number, start, ended, delay)
                if decision.stop is not None:
                    return RetryResult(False, None, exc, attempts, ended - start, decision.stop)
                if on_retry is not None:
                    on_retry(number, decision.delay, exc, decision.reason)
                await self._async_sleep(decision.delay)
                delay = decision.delay
                number += 1
                continue
            ended = clock()
            record = CallAttempt(number, delay, ended - began, None)
            attempts.append(record)
            if on_attempt is not None:
                on_attempt(record)
            return RetryResult(True, value, None, attempts, ended - start, "success")

    def is_retryable(self, exc: BaseException, classification: Classification) -> bool:
        """The policy's verdict: never-kinds never; else the predicate, types, statuses, kinds."""
        if isinstance(exc, ABORT_ERRORS):
            return False
        if self.config.should_retry is not None:
            return self.config.should_retry(exc)
        if classification.kind in NEVER_RETRY_KINDS:
            return False
        if self._types and isinstance(exc, self._types):
            return True
        if classification.status in self.config.retryable_statuses:
            return True
        return classification.kind in self._kinds

    def next_delay(self, retry: int, previous: float, retry_after: float | None) -> float:
        """Seconds to sleep before retry number `retry`: the server's hint, else the strategy."""
        config = self.config
        if retry_after is not None:
            return min(max(float(retry_after), 0.0), config.max_delay)
        delay = base_delay(
            config.strategy,
            retry,
            initial=config.initial_delay,
            multiplier=config.multiplier,
            max_delay=config.max_delay,
            previous=previous,
            rand=self._rand,
        )
        if config.strategy == "decorrelated":
            return delay
        return apply_jitter(delay, config.jitter, self._rand, config.max_delay)

    def _decide(
        self, exc: Exception, number: int, start: float, now: float, previous: float
    ) -> _Decision:
        classification = self.config.classifier(exc)
        reason = classification.reason
        if not self.is_retryable(exc, classification):
            return _Decision("non_retryable", 0.0, reason)
        if number >= self.config.max_attempts:
            return _Decision("exhausted", 0.0, reason)
        delay = self.next_delay(number, previous, classification.retry_after)
        overall = self.config.overall_timeout
        if overall is not None and (now - start) + delay >= overall:
            return _Decision("overall_timeout", delay, reason)
        if self.budget is not None and not self.budget.try_spend():
            return _Decision("budget", delay, reason)
        return _Decision(None, delay, reason)

    def _attempt_timeout(self, start: float, began: float) -> float:
        """This attempt's timeout: attempt_timeout, shortened by what is left overall."""
        timeout = self.config.attempt_timeout
        assert timeout is not None
        overall = self.config.overall_timeout
        if overall is not None:
            timeout = min(timeout, max(overall - (began - start), 0.001))
        return timeout


def _call_in_thread(fn: Callable[[], T], timeout: float) -> T:
    """Run `fn` in a daemon thread and stop waiting after `timeout` seconds.

    Python cannot interrupt a running function, so a timed-out call is abandoned (it keeps
    running until it returns): callers should also give their own calls a timeout.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome.append(context.run(fn))
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="ai-sdlc-attempt", daemon=True).start()
    if not done.wait(timeout):
        raise AttemptTimeoutError(timeout)
    if failure:
        raise failure[0]
    return outcome[0]


async def _await_with_timeout(fn: Callable[[], Awaitable[T]], timeout: float) -> T:
    import asyncio

    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await fn()
    except TimeoutError as exc:
        if scope.expired():
            raise AttemptTimeoutError(timeout) from exc
        raise
