"""A stand-in for the runner's call guard with the same contract, for provider tests.

It retries `TransientProviderError` (waiting the server's retry-after through an injected,
recording sleep), records every retry as an `api_retry` recovery, and blocks the story with
`StoryBlockedError` once the global limit is reached — what the runner's `llm` policy does,
without the persistence. Everything else propagates at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import TransientProviderError

T = TypeVar("T")


@dataclass
class RecordingGuard:
    limit: int = 10
    story_id: str = "S-0001"
    calls: int = 0
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, fn: Callable[[], T], /) -> T:
        while True:
            self.calls += 1
            try:
                return fn()
            except TransientProviderError as exc:
                self._record("api_retry", kind=exc.kind, retry_after=exc.retry_after)
                self.sleeps.append(exc.retry_after if exc.retry_after is not None else 0.0)

    def backend_retry(self, delay: float, reason: str) -> None:
        """The `on_backend_retry` side of the contract (claude CLI retry events)."""
        self._record("api_retry", delay=delay, reason=reason)

    def on_event(self, name: str, data: dict[str, Any]) -> None:
        self.events.append((name, data))

    def event_names(self) -> list[str]:
        return [name for name, _ in self.events]

    def _record(self, recovery: str, **details: Any) -> None:
        self.recoveries.append({"recovery": recovery, **details})
        if len(self.recoveries) >= self.limit:
            raise StoryBlockedError(
                f"global recovery limit {self.limit} reached", story_id=self.story_id
            )
