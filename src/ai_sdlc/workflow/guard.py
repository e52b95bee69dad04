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
            record_retry(attempt=attempt, delay=round(delay, 3), reason=reason,
                         error=type(error).__name__)

        def guard(fn: Callable[[], T], /) -> T:
            try:
                return manager.execute_with_policy("llm", fn, on_retry=on_retry)
            except CircuitBreakerOpenError as exc:
                raise ProviderUnavailableError(
                    f"{story_id} {phase.value}: the provider's circuit is open ({exc.message})",
                    hint="the provider failed repeatedly; wait, or check 'ai-sdlc metrics'",
                ) from None
            except TransientProviderError as exc:
                attempts = manager.policy("llm").retry.max_attempts
                raise ProviderUnavailableError(
                    f"{story_id} {phase.value}: the provider is still failing after "
                    f"{attempts} attempts: {exc.message}",
                    hint="run again later; every retry so far is counted on the story",
                ) from None

        return guard

    def verification(self, fn: Callable[[], T]) -> T:
        return self.manager.execute_with_policy("verification", fn)

    def describe(self) -> dict[str, Any]:
        return self.manager.metrics()
