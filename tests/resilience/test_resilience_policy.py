"""PolicyManager: retry around breaker, fallback, hooks, budget and in-memory metrics."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import ProviderAuthError, TransientProviderError
from ai_sdlc.resilience import (
    BudgetConfig,
    CircuitBreakerOpenError,
    CircuitState,
    PolicyManager,
    RetryBudget,
    load_settings,
)
from ai_sdlc.resilience.clock import ManualClock


def manager(clock: ManualClock, section: dict[str, Any] | None = None, **kw: Any) -> PolicyManager:
    return PolicyManager(
        load_settings(section),
        clock=clock,
        sleep=clock.sleep,
        async_sleep=clock.async_sleep,
        rand=lambda: 0.5,
        **kw,
    )


class Service:
    """A fake remote service: fails while `down`, counts every call that reached it."""

    def __init__(self, error: Callable[[], Exception] | None = None) -> None:
        self.down = False
        self.calls = 0
        self.error = error or (lambda: TransientProviderError("503", kind="server", status=503))

    def __call__(self) -> str:
        self.calls += 1
        if self.down:
            raise self.error()
        return "answer"


def test_retry_wraps_the_breaker_and_an_open_breaker_stops_calls() -> None:
    clock = ManualClock()
    policies = manager(clock, budget=False)
    service = Service()
    service.down = True
    with pytest.raises(TransientProviderError):
        policies.execute_with_policy("llm", service)  # 3 failed attempts
    with pytest.raises(CircuitBreakerOpenError):
        policies.execute_with_policy("llm", service)  # 4th, 5th trip it; 3rd attempt rejected
    assert service.calls == 5
    assert policies.breaker("llm") is not None
    assert policies.breaker("llm").state is CircuitState.OPEN  # type: ignore[union-attr]
    with pytest.raises(CircuitBreakerOpenError):
        policies.execute_with_policy("llm", service)
    assert service.calls == 5  # rejected without calling

    service.down = False
    clock.advance(60)
    assert policies.execute_with_policy("llm", service) == "answer"
    assert policies.breaker("llm").state is CircuitState.CLOSED  # type: ignore[union-attr]
    llm = policies.metrics()["llm"]
    assert llm["operations"] == 4 and llm["successes"] == 1 and llm["failures"] == 3
    assert llm["exhausted_retries"] == 1 and llm["breaker_rejections"] == 2
    assert llm["failure_rate"] == 0.75


def test_metrics_per_policy_count_first_try_and_after_retry() -> None:
    clock = ManualClock()
    policies = manager(clock, {"policies": {"github": {"jitter": "none"}}}, budget=False)
    assert policies.execute_with_policy("github", lambda: 1) == 1
    flaky = iter([TransientProviderError("x", kind="connection"), 2])

    def sometimes() -> int:
        value = next(flaky)
        if isinstance(value, Exception):
            raise value
        return value

    assert policies.execute_with_policy("github", sometimes) == 2
    github = policies.metrics()["github"]
    assert github["operations"] == 2 and github["attempts"] == 3 and github["retries"] == 1
    assert github["first_try_successes"] == 1 and github["successes_after_retry"] == 1
    assert github["total_retry_delay"] == 2.0 and github["average_retry_delay"] == 2.0
    assert github["failure_rate"] == 0.0


def test_on_retry_hook_and_story_blocked_counted_as_aborted() -> None:
    clock = ManualClock()
    policies = manager(clock, budget=False)
    service = Service(lambda: TransientProviderError("429", kind="rate_limit", retry_after=4))
    service.down = True
    retries: list[tuple[int, float, str]] = []

    def on_retry(attempt: int, delay: float, error: BaseException, reason: str) -> None:
        retries.append((attempt, delay, reason))
        if len(retries) == 2:
            raise StoryBlockedError("recovery limit reached", story_id="S-0001")

    with pytest.raises(StoryBlockedError):
        policies.execute_with_policy("llm", service, on_retry=on_retry)
    assert retries == [
        (1, 4.0, "rate_limit, server asked to wait 4 s"),
        (2, 4.0, "rate_limit, server asked to wait 4 s"),
    ]
    assert clock.sleeps == [4.0] and service.calls == 2
    llm = policies.metrics()["llm"]
    assert llm["aborted"] == 1 and llm["attempts"] == 2 and llm["failures"] == 1


def test_fallback_replaces_a_failed_result_and_is_counted() -> None:
    clock = ManualClock()
    policies = manager(clock)
    service = Service(lambda: ProviderAuthError("bad key", status=401))
    service.down = True
    seen: list[BaseException] = []

    def fallback(error: BaseException) -> str:
        seen.append(error)
        return "cached answer"

    assert policies.execute_with_policy("llm", service, fallback=fallback) == "cached answer"
    assert service.calls == 1 and isinstance(seen[0], ProviderAuthError)
    assert policies.metrics()["llm"]["fallbacks"] == 1


def test_verification_retries_only_timeouts_and_has_no_breaker() -> None:
    clock = ManualClock()
    policies = manager(clock)
    assert policies.breaker("verification") is None
    attempts: list[int] = []

    def slow_then_ok() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise subprocess.TimeoutExpired(["pytest"], 600)
        return "passed"

    assert policies.execute_with_policy("verification", slow_then_ok) == "passed"
    failing = subprocess.CalledProcessError(1, ["pytest"])
    result = policies.run("verification", lambda: (_ for _ in ()).throw(failing))
    assert result.stop_reason == "non_retryable" and len(result.attempts) == 1


def test_shared_budget_caps_retries_across_policies() -> None:
    clock = ManualClock()
    budget = RetryBudget(BudgetConfig(ratio=0.0, floor_per_second=0.0, burst=1), clock=clock)
    policies = manager(clock, budget=budget)
    down = Service()
    down.down = True
    first = policies.run("github", down)
    second = policies.run("tool", lambda: (_ for _ in ()).throw(ConnectionResetError()))
    assert len(first.attempts) == 2 and first.stop_reason == "budget"
    assert second.stop_reason == "budget" and len(second.attempts) == 1
    assert policies.metrics()["github"]["budget_refusals"] == 1


def test_budget_from_settings_unless_disabled() -> None:
    clock = ManualClock()
    assert manager(clock).budget is not None
    assert manager(clock, {"budget": {"enabled": False}}).budget is None
    assert manager(clock, budget=False).budget is None


def test_unknown_policy_name_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown resilience policy 'lm'"):
        manager(ManualClock()).execute_with_policy("lm", lambda: 1)


def test_async_policy_calls() -> None:
    clock = ManualClock()
    policies = manager(clock, budget=False)
    outcomes = iter([TransientProviderError("x", kind="overloaded", status=529), "async answer"])

    async def call() -> str:
        value = next(outcomes)
        if isinstance(value, Exception):
            raise value
        return value

    async def always_down() -> str:
        raise ProviderAuthError("no key")

    async def scenario() -> tuple[str, str]:
        first = await policies.aexecute_with_policy("llm", call)
        second = await policies.aexecute_with_policy(
            "llm", always_down, fallback=lambda error: "fallback"
        )
        return first, second

    assert asyncio.run(scenario()) == ("async answer", "fallback")
    assert clock.sleeps == [1.0]  # 1 s ± 10 % jitter, rand 0.5 = the middle
    llm = policies.metrics()["llm"]
    assert llm["successes_after_retry"] == 1 and llm["fallbacks"] == 1


def _policy_run(how: str, scenario: str) -> tuple[Any, ...]:
    """One scenario through `execute_with_policy` or `aexecute_with_policy`: what came back or
    was raised, every hook call, the sleeps, the metrics and the breaker's state."""
    clock = ManualClock()
    policies = manager(clock, budget=False)
    service = Service()
    service.down = True
    retried: list[Any] = []
    attempts: list[Any] = []

    def on_retry(*args: Any) -> None:
        retried.append(args)
        if scenario == "blocked" and len(retried) == 2:
            raise StoryBlockedError("Global recovery limit reached", story_id="S-0001")

    hooks: dict[str, Any] = {"on_retry": on_retry, "on_attempt": attempts.append}
    outcomes: list[str] = []
    for _ in range(2 if scenario == "trips" else 1):
        try:
            if how == "sync":
                value = policies.execute_with_policy("llm", service, **hooks)
            else:

                async def call() -> str:
                    return service()

                value = asyncio.run(policies.aexecute_with_policy("llm", call, **hooks))
            outcomes.append(f"returned {value}")
        except Exception as exc:
            outcomes.append(f"raised {type(exc).__name__}")
    breaker = policies.breaker("llm")
    return (
        outcomes,
        service.calls,
        [(a.number, a.delay, repr(a.error)) for a in attempts],
        repr(retried),
        clock.sleeps,
        policies.metrics()["llm"],
        breaker.state if breaker is not None else None,
    )


@pytest.mark.parametrize("scenario", ["trips", "blocked"])
def test_async_policy_calls_decide_exactly_as_sync_ones(scenario: str) -> None:
    sync = _policy_run("sync", scenario)
    assert _policy_run("async", scenario) == sync
    outcomes, calls, attempts, _, _, metrics, state = sync
    if scenario == "trips":
        assert outcomes == ["raised TransientProviderError", "raised CircuitBreakerOpenError"]
        assert calls == 5 and state is CircuitState.OPEN
    else:
        assert outcomes == ["raised StoryBlockedError"] and calls == 2
        assert metrics["aborted"] == 1, metrics
    assert len(attempts) == (6 if scenario == "trips" else 2)


# --- lookups and where the metrics go ---------------------------------------------------------


def test_each_policy_and_its_engine_are_found_by_name() -> None:
    policies = manager(ManualClock(), {"policies": {"github": {"max_attempts": 7}}})
    github = policies.policy("github")
    assert github.name == "github" and github.retry.max_attempts == 7
    assert policies.engine("github").config is github.retry
    assert policies.engine("llm").config is policies.policy("llm").retry
    for lookup in (policies.policy, policies.engine):
        with pytest.raises(ValueError) as caught:
            lookup("lm")
        assert str(caught.value) == (
            "unknown resilience policy 'lm'; known: llm, github, tool, verification"
        )


class RecordingSink:
    """A metrics sink that keeps what it was given (a cluster worker's link, in the product)."""

    def __init__(self) -> None:
        self.added: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def add(self, policies: Any, breakers: Any) -> None:
        self.added.append((dict(policies), dict(breakers)))


def test_metrics_sent_elsewhere_leave_the_projects_file_alone(tmp_path: Path) -> None:
    policies = manager(ManualClock(), project_root=tmp_path, budget=False)
    sink = RecordingSink()
    policies.send_metrics_to(sink)
    assert policies.execute_with_policy("tool", lambda: "ok") == "ok"
    assert len(sink.added) == 1
    sent_policies, sent_breakers = sink.added[0]
    assert sent_policies["tool"]["operations"] == 1 and sent_breakers["tool"]["calls"] == 1
    assert not (tmp_path / ".ai-sdlc/state/metrics.json").exists()


def test_a_manager_without_a_project_sends_no_metrics() -> None:
    policies = manager(ManualClock(), budget=False)
    sink = RecordingSink()
    policies.send_metrics_to(sink)
    assert policies.execute_with_policy("tool", lambda: "ok") == "ok"
    policies.flush()
    assert sink.added == []


def test_from_config_reads_the_section_and_names_its_file_in_errors() -> None:
    from ai_sdlc.errors import InvalidInputError

    built = PolicyManager.from_config(
        {"policies": {"github": {"max_attempts": 7}}}, source="cfg.yaml", budget=False
    )
    assert built.policy("github").retry.max_attempts == 7 and built.budget is None
    with pytest.raises(InvalidInputError) as caught:
        PolicyManager.from_config({"policies": {"github": {"max_attempts": 0}}}, source="cfg.yaml")
    assert caught.value.message == (
        "cfg.yaml: resilience.policies.github.max_attempts must be an integer >= 1, got 0"
    )


def test_a_flush_sends_only_news_and_an_idle_breakers_time_waits_for_its_next_news(
    tmp_path: Path,
) -> None:
    """Time passing in an unused breaker is not news; when the breaker is used again, the time
    it spent since its last flush goes with it, none lost."""
    clock = ManualClock()
    policies = manager(clock, project_root=tmp_path, budget=False)
    sink = RecordingSink()
    policies.send_metrics_to(sink)
    assert policies.execute_with_policy("tool", lambda: "ok") == "ok"
    assert [sorted(b) for _, b in sink.added] == [["tool"]]
    policies.flush()  # nothing new: nothing sent
    assert len(sink.added) == 1

    clock.advance(100)
    assert policies.execute_with_policy("verification", lambda: "ok") == "ok"  # no breaker
    assert len(sink.added) == 2
    sent_policies, sent_breakers = sink.added[1]
    assert sorted(sent_policies) == ["verification"] and sent_breakers == {}

    clock.advance(20)
    assert policies.execute_with_policy("tool", lambda: "ok") == "ok"
    _, sent_breakers = sink.added[2]
    assert sent_breakers["tool"]["calls"] == 1
    assert sent_breakers["tool"]["time_in_state"]["closed"] == 120.0
