"""The provider guard: why a provider is unavailable, in the user's words, and what each retry
records.

Each test pins a promise that `make mutants` found no other test pinning closely enough.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.owner_support import (
    failing_call,
    guarded_call,
    llm_section,
)

# --- the provider guard: why a provider is unavailable, in the user's words -------------------


def test_a_provider_failing_past_its_retries_is_unavailable_with_the_count_and_why(
    tmp_path: Path,
) -> None:
    from ai_sdlc.errors import ProviderUnavailableError

    retries, guard = guarded_call(tmp_path, llm_section(max_attempts=3))
    with pytest.raises(ProviderUnavailableError) as raised:
        guard(failing_call("503 one", "503 two", "503 three"))
    assert raised.value.message == (
        "S-0001 refine: the provider is still failing after 3 attempts (retries exhausted): "
        "503 three"
    )
    assert raised.value.hint == "run again later; every retry so far is counted on the story"
    assert [(r["attempt"], r["error"]) for r in retries] == [
        (1, "TransientProviderError"),
        (2, "TransientProviderError"),
    ]
    retries, guard = guarded_call(tmp_path, llm_section(max_attempts=1))
    with pytest.raises(ProviderUnavailableError) as once:
        guard(failing_call("overloaded"))
    assert once.value.message == (
        "S-0001 refine: the provider is still failing after 1 attempt (retries exhausted): "
        "overloaded"
    )
    assert retries == []
    retries, guard = guarded_call(tmp_path, llm_section(max_attempts=2))
    with pytest.raises(ProviderUnavailableError, match=r"after 2 attempts \(retries exhausted\)"):
        guard(failing_call("a", "b"))
    assert guard(failing_call("a")) == "answer"


def test_a_provider_stopped_by_the_overall_timeout_or_the_budget_says_which(
    tmp_path: Path,
) -> None:
    from ai_sdlc.errors import ProviderUnavailableError
    from ai_sdlc.resilience import BudgetConfig, RetryBudget

    _, guard = guarded_call(
        tmp_path, llm_section(max_attempts=5, overall_timeout=1.0, initial_delay=2.0)
    )
    with pytest.raises(ProviderUnavailableError) as timed_out:
        guard(failing_call("slow", "slow"))
    assert timed_out.value.message == (
        "S-0001 refine: the provider is still failing after 1 attempt "
        "(the policy's overall timeout was reached): slow"
    )
    spent = RetryBudget(BudgetConfig(ratio=0, floor_per_second=0, burst=1))
    _, guard = guarded_call(tmp_path, llm_section(max_attempts=5), budget=spent)
    with pytest.raises(ProviderUnavailableError) as budget:
        guard(failing_call("x", "y", "z"))
    assert budget.value.message == (
        "S-0001 refine: the provider is still failing after 2 attempts "
        "(the run's retry budget is spent): y"
    )


def test_an_open_breaker_makes_the_provider_unavailable_and_says_so(tmp_path: Path) -> None:
    from ai_sdlc.errors import ProviderUnavailableError

    _, guard = guarded_call(tmp_path, llm_section(max_attempts=3, breaker={"failure_threshold": 2}))
    with pytest.raises(ProviderUnavailableError) as tripped:
        guard(failing_call("a", "b", "c"))
    assert tripped.value.message == (
        "S-0001 refine: the provider's circuit breaker is open "
        "(circuit breaker 'llm' is open; next trial call in 59.0 s)"
    )
    assert tripped.value.hint == "the provider failed repeatedly; wait, or see 'ai-sdlc metrics'"
    with pytest.raises(ProviderUnavailableError) as still:
        guard(failing_call())
    assert still.value.message == tripped.value.message
