"""Benchmark of the resilience engine.

1. Success-path overhead per call of `RetryEngine.execute` and `CircuitBreaker.execute`
   against tenacity and pybreaker, measured in the same run (best of several repeats, the
   bare call subtracted). Targets: retry <= 5 us, breaker <= 2 us, each faster than its peer.
2. A 60-second provider outage hitting 20 concurrent stories, on a virtual clock (no real
   sleeping): provider calls made by a naive retry loop versus the `llm` policy, with the
   run-wide retry budget off and on (retry amplification).

Exit status 1 when an overhead target is missed.
"""

from __future__ import annotations

import asyncio
import heapq
import random
import sys
import timeit
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pybreaker
import tenacity

from ai_sdlc.providers.base import TransientProviderError
from ai_sdlc.resilience import (
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitBreakerOpenError,
    PolicyManager,
    RetryConfig,
    RetryEngine,
    load_settings,
)

RETRY_TARGET_US = 5.0
BREAKER_TARGET_US = 2.0


# --- 1. success-path overhead ---------------------------------------------------------------


def _target() -> None:
    return None


def _per_call_us(statement: str, namespace: dict[str, Any], number: int) -> float:
    timer = timeit.Timer(statement, globals=namespace)
    return min(timer.repeat(repeat=7, number=number)) / number * 1e6


def measure_overhead() -> bool:
    engine = RetryEngine(RetryConfig(max_attempts=3))
    breaker = CircuitBreaker(CircuitBreakerConfig(failure_threshold=5))
    retried = tenacity.retry(
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_exponential_jitter(initial=1, max=30),
        reraise=True,
    )(_target)
    peer_breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=60)
    namespace = {
        "target": _target,
        "engine": engine,
        "breaker": breaker,
        "retried": retried,
        "peer_breaker": peer_breaker,
    }
    bare = _per_call_us("target()", namespace, 200_000)
    rows = [
        ("RetryEngine.execute", _per_call_us("engine.execute(target)", namespace, 100_000)),
        ("tenacity @retry", _per_call_us("retried()", namespace, 10_000)),
        ("CircuitBreaker.execute", _per_call_us("breaker.execute(target)", namespace, 200_000)),
        ("pybreaker .call", _per_call_us("peer_breaker.call(target)", namespace, 100_000)),
    ]
    overhead = {name: max(value - bare, 0.0) for name, value in rows}
    print("Success-path overhead per call (best of 7, bare call subtracted)")
    print(f"  bare call                  {bare:8.3f} us")
    for name, _ in rows:
        print(f"  {name:<26} {overhead[name]:8.3f} us")
    retry, tenacity_us = overhead["RetryEngine.execute"], overhead["tenacity @retry"]
    breaker_us, pybreaker_us = overhead["CircuitBreaker.execute"], overhead["pybreaker .call"]
    print(f"  tenacity / RetryEngine     {tenacity_us / retry:8.1f} x")
    print(f"  pybreaker / CircuitBreaker {pybreaker_us / breaker_us:8.1f} x")
    checks = [
        (f"retry <= {RETRY_TARGET_US:g} us", retry <= RETRY_TARGET_US),
        ("retry faster than tenacity", retry < tenacity_us),
        (f"breaker <= {BREAKER_TARGET_US:g} us", breaker_us <= BREAKER_TARGET_US),
        ("breaker faster than pybreaker", breaker_us < pybreaker_us),
    ]
    for label, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {label}")
    return all(ok for _, ok in checks)


# --- 2. outage simulation on a virtual clock ---------------------------------------------------

STORIES = 20
OPERATIONS_PER_STORY = 6
CALL_SECONDS = 5.0  # a successful LLM call
FAIL_SECONDS = 0.2  # an overloaded answer comes back fast
THINK_SECONDS = 1.0  # between two operations of a story
OUTAGE_START, OUTAGE_END = 20.0, 80.0  # 60 s of 529 overloaded
RECOVERY_COOLDOWN = 30.0  # a story whose operation failed tries the phase again after this
MAX_RECOVERIES = 3  # ... at most this often, then it is blocked for a human
NAIVE_RETRIES, NAIVE_DELAY = 10, 1.0  # what agent CLIs commonly do: 10 retries, fixed 1 s


class VirtualTime:
    """Async tasks sleeping on a virtual clock: time jumps to the next wake-up when every task
    is waiting, so hours of simulated retries run in milliseconds."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._sequence = 0
        self._running = 0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + max(seconds, 0.0), self._sequence, future))
        self._sequence += 1
        self._running -= 1
        await future

    async def run(self, coroutines: list[Coroutine[Any, Any, None]]) -> None:
        async def tracked(coroutine: Coroutine[Any, Any, None]) -> None:
            try:
                await coroutine
            finally:
                self._running -= 1

        self._running = len(coroutines)
        tasks = [asyncio.create_task(tracked(c)) for c in coroutines]
        while True:
            while self._running > 0:
                await asyncio.sleep(0)
            if all(task.done() for task in tasks):
                break
            when, _, future = heapq.heappop(self._timers)
            self.now = when
            self._running += 1
            future.set_result(None)
        for task in tasks:
            task.result()


@dataclass
class Outcome:
    name: str
    operations: int = 0
    calls: int = 0
    calls_in_outage: int = 0
    completed: int = 0
    blocked: int = 0
    finished_at: float = 0.0


Execute = Callable[[Callable[[], Awaitable[str]]], Awaitable[str]]


def simulate(name: str, make_execute: Callable[[VirtualTime], Execute]) -> Outcome:
    vt = VirtualTime()
    outcome = Outcome(name)
    execute = make_execute(vt)

    async def provider() -> str:
        outcome.calls += 1
        if OUTAGE_START <= vt.now < OUTAGE_END:
            outcome.calls_in_outage += 1
            await vt.sleep(FAIL_SECONDS)
            raise TransientProviderError("overloaded", kind="overloaded", status=529)
        await vt.sleep(CALL_SECONDS)
        return "ok"

    async def story(index: int) -> None:
        await vt.sleep(index * 0.5)
        done = recoveries = 0
        while done < OPERATIONS_PER_STORY:
            outcome.operations += 1
            try:
                await execute(provider)
            except (TransientProviderError, CircuitBreakerOpenError):
                recoveries += 1
                if recoveries > MAX_RECOVERIES:
                    outcome.blocked += 1
                    return
                await vt.sleep(RECOVERY_COOLDOWN)
                continue
            done += 1
            await vt.sleep(THINK_SECONDS)
        outcome.completed += 1
        outcome.finished_at = max(outcome.finished_at, vt.now)

    asyncio.run(vt.run([story(i) for i in range(STORIES)]))
    return outcome


def naive_loop(vt: VirtualTime) -> Execute:
    async def execute(fn: Callable[[], Awaitable[str]]) -> str:
        for attempt in range(NAIVE_RETRIES + 1):
            try:
                return await fn()
            except TransientProviderError:
                if attempt == NAIVE_RETRIES:
                    raise
                await vt.sleep(NAIVE_DELAY)
        raise AssertionError("unreachable")

    return execute


def llm_policy(*, budget: bool, breaker: bool = True) -> Callable[[VirtualTime], Execute]:
    section = None if breaker else {"policies": {"llm": {"breaker": False}}}

    def make(vt: VirtualTime) -> Execute:
        manager = PolicyManager(
            load_settings(section),
            budget=budget,
            clock=vt.clock,
            async_sleep=vt.sleep,
            sleep=_no_sync_sleep,
            rand=random.Random(7).random,
        )

        async def execute(fn: Callable[[], Awaitable[str]]) -> str:
            return await manager.aexecute_with_policy("llm", fn)

        return execute

    return make


def _no_sync_sleep(seconds: float) -> None:
    raise AssertionError("the simulation must only sleep on the virtual clock")


def outage_report() -> None:
    print()
    print(
        f"Outage: {STORIES} stories x {OPERATIONS_PER_STORY} LLM calls, provider answers 529 "
        f"from t={OUTAGE_START:g}s to t={OUTAGE_END:g}s (virtual clock)"
    )
    results = [
        simulate(f"naive loop ({NAIVE_RETRIES} retries, {NAIVE_DELAY:g} s)", naive_loop),
        simulate("llm retry only, budget off", llm_policy(budget=False, breaker=False)),
        simulate("llm retry only, budget on", llm_policy(budget=True, breaker=False)),
        simulate("llm retry+breaker, budget off", llm_policy(budget=False)),
        simulate("llm retry+breaker, budget on", llm_policy(budget=True)),
    ]
    header = (
        f"  {'strategy':<32} {'ops':>5} {'calls':>6} {'in outage':>9} {'calls/op':>8} "
        f"{'done':>5} {'blocked':>7} {'end (s)':>8}"
    )
    print(header)
    for r in results:
        print(
            f"  {r.name:<32} {r.operations:>5} {r.calls:>6} {r.calls_in_outage:>9} "
            f"{r.calls / r.operations:>8.2f} {r.completed:>5} {r.blocked:>7} "
            f"{r.finished_at:>8.0f}"
        )
    naive = results[0]
    for r in results[1:]:
        ratio = naive.calls_in_outage / max(r.calls_in_outage, 1)
        print(f"  {r.name:<32} {ratio:5.1f}x fewer calls into the outage than the naive loop")


def main() -> int:
    ok = measure_overhead()
    outage_report()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
