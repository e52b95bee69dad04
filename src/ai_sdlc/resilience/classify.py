"""Decide what an error means for retrying: its kind, whether it may heal, and the server's hint.

Understands the provider seam's typed errors, SDK-style HTTP errors (anything with
`status_code`, `headers`/`response.headers` and `body`, like the anthropic and openai
exceptions), and the standard library's timeouts and connection errors. Providers reuse
`classify` so that one set of rules decides what is worth a retry.
"""

from __future__ import annotations

import math
import subprocess
import time
import urllib.error
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ai_sdlc.errors import (
    TRANSIENT_KINDS,
    AiSdlcError,
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderLimitError,
    ProviderRequestError,
    RunHaltedError,
    StoryBlockedError,
    TransientProviderError,
)
from ai_sdlc.resilience.errors import AttemptTimeoutError, CircuitBreakerOpenError

#: Kinds that no policy ever retries: they cannot heal by waiting.
NEVER_RETRY_KINDS = frozenset({"auth", "config", "request", "limit", "blocked", "halted"})

#: Error types or codes in a body that signal an exhausted spend cap or quota.
QUOTA_MARKERS = ("quota", "billing", "spend", "credit", "usage_limit")

_OVERLOADED_TYPES = frozenset({"overloaded_error", "overloaded"})


class Classification(msgspec.Struct, frozen=True):
    """What one error means: `retryable` is the error's own nature, policies may narrow it."""

    retryable: bool
    kind: str
    retry_after: float | None
    reason: str
    status: int | None = None


def classify(exc: BaseException, *, now: Callable[[], float] = time.time) -> Classification:
    """Classify `exc`. `now` (wall clock) turns an HTTP-date Retry-After into seconds."""
    if isinstance(exc, ProviderError):
        return _classify_provider(exc)
    if isinstance(exc, StoryBlockedError):
        return Classification(False, "blocked", None, "story blocked by a guardrail")
    if isinstance(exc, RunHaltedError):
        return Classification(False, "halted", None, "run halted by a stop condition")
    if isinstance(exc, CircuitBreakerOpenError):
        reason = f"circuit '{exc.name}' open"
        return Classification(False, "circuit_open", exc.retry_in, reason)
    if isinstance(exc, AiSdlcError):
        return Classification(False, "error", None, type(exc).__name__)
    status = _status_of(exc)
    if status is not None:
        return _classify_http(exc, status, now)
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        inner = _classify_plain(exc.reason)
        if inner.retryable:
            return inner
    return _classify_plain(exc)


def _status_of(exc: BaseException) -> int | None:
    """HTTP status of SDK (`status_code`), httpx (`response.status_code`), urllib (`code`)."""
    candidates = [
        getattr(exc, "status_code", None),
        getattr(getattr(exc, "response", None), "status_code", None),
    ]
    if isinstance(exc, urllib.error.HTTPError):
        candidates.append(exc.code)
    for status in candidates:
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def _classify_provider(exc: ProviderError) -> Classification:
    if isinstance(exc, TransientProviderError):
        reason = _describe(exc.kind, exc.status, exc.retry_after)
        return Classification(True, exc.kind, exc.retry_after, reason, exc.status)
    for error_type, kind in (
        (ProviderAuthError, "auth"),
        (ProviderConfigError, "config"),
        (ProviderRequestError, "request"),
        (ProviderLimitError, "limit"),
    ):
        if isinstance(exc, error_type):
            return Classification(False, kind, None, _describe(kind, exc.status, None), exc.status)
    return Classification(False, exc.kind, None, _describe(exc.kind, exc.status, None), exc.status)


def _classify_http(exc: BaseException, status: int, now: Callable[[], float]) -> Classification:
    retry_after = retry_after_from_headers(_headers_of(exc), now=now)
    error_type, code = _body_error_type(getattr(exc, "body", None))
    markers = f"{error_type} {code}".lower()
    if error_type in _OVERLOADED_TYPES or status == 529:
        kind, retryable = "overloaded", True
    elif status == 429:
        quota = any(marker in markers for marker in QUOTA_MARKERS)
        kind, retryable = (
            ("limit", False) if quota and retry_after is None else ("rate_limit", True)
        )
    elif status in (401, 403):
        kind, retryable = "auth", False
    elif status == 408:
        kind, retryable = "timeout", True
    elif status == 409:
        kind, retryable = "conflict", True
    elif status == 404:
        kind, retryable = "not_found", False
    elif status in (501, 505):
        kind, retryable = "not_implemented", False
    elif status >= 500:
        kind, retryable = "server", True
    elif status >= 400:
        quota = any(marker in markers for marker in QUOTA_MARKERS)
        kind, retryable = ("limit" if quota else "request"), False
    else:
        kind, retryable = "unknown", False
    hint = retry_after if retryable else None
    reason = _describe(kind, status, hint)
    if error_type and error_type not in reason:
        reason += f" [{error_type}]"
    return Classification(retryable, kind, hint, reason, status)


def _classify_plain(exc: BaseException) -> Classification:
    if isinstance(exc, AttemptTimeoutError | subprocess.TimeoutExpired | TimeoutError):
        return Classification(True, "timeout", None, "timeout")
    if isinstance(exc, ConnectionError):
        return Classification(True, "connection", None, f"connection: {type(exc).__name__}")
    names = [cls.__name__ for cls in type(exc).__mro__]
    if any("Timeout" in name for name in names):
        return Classification(True, "timeout", None, f"timeout: {type(exc).__name__}")
    if any("Connect" in name for name in names):
        return Classification(True, "connection", None, f"connection: {type(exc).__name__}")
    return Classification(False, "unknown", None, type(exc).__name__)


def _describe(kind: str, status: int | None, retry_after: float | None) -> str:
    text = kind if status is None else f"{kind} (HTTP {status})"
    if retry_after is not None:
        text += f", server asked to wait {retry_after:g} s"
    return text


def _headers_of(exc: BaseException) -> Any:
    headers = getattr(exc, "headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers


def _header(headers: Any, name: str) -> str | None:
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    value = getter(name)
    if value is None and isinstance(headers, Mapping):
        for key, candidate in headers.items():
            if isinstance(key, str) and key.lower() == name:
                value = candidate
                break
    return value if isinstance(value, str) else None


def retry_after_from_headers(headers: Any, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    if headers is None:
        return None
    millis = _parse_seconds(_header(headers, "retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = _header(headers, "retry-after")
    if raw is None:
        return None
    seconds = _parse_seconds(raw)
    if seconds is not None:
        return seconds
    import email.utils  # an HTTP date is rare; the module costs ~4 ms of start-up

    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now())


def _parse_seconds(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return max(0.0, value)


def _body_error_type(body: Any) -> tuple[str, str]:
    """(error type, error code) from an anthropic- or openai-shaped error body."""
    if not isinstance(body, Mapping):
        return "", ""
    inner = body.get("error")
    node = inner if isinstance(inner, Mapping) else body
    error_type = node.get("type")
    code = node.get("code")
    return (
        error_type if isinstance(error_type, str) else "",
        code if isinstance(code, str) else "",
    )


def is_transient_kind(kind: str) -> bool:
    """True for the kinds that signal an unhealthy service (what breakers count)."""
    return kind in TRANSIENT_KINDS
