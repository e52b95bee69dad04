"""Every external call of a run goes through a named resilience policy.

`GuardFactory.for_story` gives the provider seam its `CallGuard`: each provider API call runs
under the `llm` policy, and every retry the policy decides on is first recorded as an
`api_retry` recovery on the story (which raises `StoryBlockedError` at the global limit, so the
retry never happens). Retries exhausted or an open circuit mean the provider is unavailable
(exit 4), not that the story is broken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ai_sdlc.config import Config
from ai_sdlc.errors import ProviderUnavailableError
from ai_sdlc.providers.base import CallGuard, Phase, TransientProviderError
from ai_sdlc.resilience import CircuitBreakerOpenError, PolicyManager
from ai_sdlc.store import StoryStore

T = TypeVar("T")

#: Records one `api_retry` recovery with details (delay, reason, attempt); may raise
#: StoryBlockedError.
RecordRetry = Callable[..., None]


class GuardFactory:
    def __init__(self, manager: PolicyManager) -> None:
        self.manager = manager

    @classmethod
    def from_config(cls, store: StoryStore, config: Config) -> GuardFactory:
        manager = PolicyManager.from_config(
            config.section("resilience"), source=str(config.path), project_root=store.root
        )
        return cls(manager)

    def for_story(self, story_id: str, phase: Phase, record_retry: RecordRetry) -> CallGuard:
        manager = self.manager

        def on_retry(attempt: int, delay: float, error: BaseException, reason: str) -> None:
            record_retry(
                attempt=attempt, delay=round(delay, 3), reason=reason, error=type(error).__name__
            )

        def guard(fn: Callable[[], T], /) -> T:
            # An open breaker comes back in the result (the retry engine catches its refusal).
            result = manager.run("llm", fn, on_retry=on_retry)
            if result.success:
                return result.unwrap()
            error = result.error
            if isinstance(error, CircuitBreakerOpenError | TransientProviderError):
                raise _unavailable(story_id, phase, error, result.attempts, result.stop_reason)
            return result.unwrap()  # a non-retryable error: raised unchanged

        return guard

    def verification(self, fn: Callable[[], T]) -> T:
        """Build/test commands: the `verification` policy (retries timeouts only); a result
        that did not pass counts as a failure in the metrics."""
        return self.manager.execute_with_policy(
            "verification", fn, failed=lambda value: getattr(value, "passed", True) is False
        )

    def git(self, fn: Callable[[], T]) -> T:
        """git (and later GitHub) calls: the `github` policy."""
        return self.manager.execute_with_policy("github", fn)


_STOPS = {
    "exhausted": "retries exhausted",
    "budget": "the run's retry budget is spent",
    "overall_timeout": "the policy's overall timeout was reached",
    "non_retryable": "not retryable",
}


def _unavailable(
    story_id: str,
    phase: Phase,
    error: BaseException | None,
    attempts: list[Any] | None = None,
    stop: str | None = None,
) -> ProviderUnavailableError:
    if isinstance(error, CircuitBreakerOpenError):
        return ProviderUnavailableError(
            f"{story_id} {phase.value}: the provider's circuit breaker is open ({error.message})",
            hint="the provider failed repeatedly; wait, or see 'ai-sdlc metrics'",
        )
    n = len(attempts or [])
    why = _STOPS.get(stop or "", stop or "")
    message = getattr(error, "message", str(error))
    return ProviderUnavailableError(
        f"{story_id} {phase.value}: the provider is still failing after {n} "
        f"attempt{'s' if n != 1 else ''} ({why}): {message}",
        hint="run again later; every retry so far is counted on the story",
    )
