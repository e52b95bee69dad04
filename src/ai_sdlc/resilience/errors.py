"""Errors raised by the resilience engine itself (not by the calls it guards)."""

from __future__ import annotations

from ai_sdlc.errors import AiSdlcError


class CircuitBreakerOpenError(AiSdlcError):
    """The breaker refused a call without making it: the service failed too often lately.

    `retry_in` is the number of seconds until the breaker admits a trial call, or None when it
    was forced open and stays open until reset.
    """

    def __init__(self, name: str, retry_in: float | None) -> None:
        if retry_in is None:
            message = f"circuit breaker '{name}' is forced open"
            hint = "it stays open until reset"
        else:
            message = f"circuit breaker '{name}' is open; next trial call in {retry_in:.1f} s"
            hint = "the service failed repeatedly; wait for it to recover, then run again"
        super().__init__(message, hint=hint)
        self.name = name
        self.retry_in = retry_in


class AttemptTimeoutError(TimeoutError):
    """One attempt ran longer than the policy's `attempt_timeout` and was abandoned."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"attempt timed out after {timeout:g} s")
        self.timeout = timeout


class StateError(AiSdlcError):
    """`.ai-sdlc/state/` cannot be read or written (permissions, disk full, not a folder)."""

    def __init__(self, action: str, path: object, exc: OSError) -> None:
        super().__init__(
            f"cannot {action} {path}: {exc.strerror or exc}",
            hint="check that .ai-sdlc/state is a writable folder",
        )
