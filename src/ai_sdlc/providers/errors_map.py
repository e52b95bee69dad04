"""SDK exceptions and HTTP failures → the typed errors of the provider seam.

The resilience layer retries only `TransientProviderError`, so this mapping decides what is
worth a retry: rate limits (with the server's Retry-After), overload (529, or an
`overloaded_error` arriving inside a 200 stream), server errors, timeouts and dropped
connections. Spend caps and quota exhaustion look like 429s but never clear by retrying, so
they become `ProviderLimitError`. Messages are redacted: a key echoed in an error body must not
reach a story file or the event log.

The SDKs are imported lazily inside the mapping functions; by the time one of their exceptions
exists the SDK is loaded anyway.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ai_sdlc.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderLimitError,
    ProviderRequestError,
    TransientProviderError,
)

#: Error types / codes in a 4xx body that mean "out of money or quota", not "slow down".
QUOTA_TYPES = frozenset(
    {
        "billing_error",
        "insufficient_quota",
        "quota_exceeded",
        "billing_hard_limit_reached",
        "spend_limit_exceeded",
        "usage_limit_exceeded",
    }
)

_QUOTA_MESSAGE = re.compile(
    r"(usage|spend(ing)?|billing|credit|quota|budget)\s+(limit|cap)s?"
    r"|credit balance|insufficient[_ ]quota|exceeded your current quota|regain access",
    re.IGNORECASE,
)
_CONTEXT_MESSAGE = re.compile(
    r"context[_ ]length|context window|prompt is too long|too many tokens|maximum context"
    r"|input is too long|request too large",
    re.IGNORECASE,
)
_MAX_MESSAGE = 400


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret and anything shaped like a credential replaced by ***."""
    from ai_sdlc.secrets import redact as redact_all

    return redact_all(text, secrets)


def safe_url(value: str) -> str:
    """`value` without its secrets: the user:password@ part and credential-looking query
    parameters (`secrets.mask_url`)."""
    from ai_sdlc.secrets import mask_url

    value = mask_url(value)
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return "(unparseable URL)"
    if parts.username or parts.password:
        netloc = f"***@{parts.hostname or ''}" + (f":{port}" if port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return value


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from `retry-after-ms`, `retry-after` (seconds or an HTTP date), or None
    (the resilience layer's reading, so providers and policies agree on every form)."""
    from ai_sdlc.resilience.classify import retry_after_from_headers

    if not headers:
        return None
    return retry_after_from_headers(headers, now=time.time if now is None else (lambda: now))


def classify_http_failure(
    *,
    provider: str,
    status: int | None,
    error_type: str | None,
    error_code: str | None,
    message: str,
    retry_after: float | None,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """The typed error for one failed API call, from what every HTTP API reports."""
    detail = redact(message, secrets)[:_MAX_MESSAGE]
    label = f"{provider} API"
    if status is not None and status != 200:
        label += f" {status}"
    text = f"{label}: {detail}"
    kinds = {t for t in (error_type, error_code) if t}

    if error_type == "overloaded_error" or status == 529:
        return TransientProviderError(
            text, kind="overloaded", retry_after=retry_after, status=status
        )
    quota = bool(kinds & QUOTA_TYPES) or bool(_QUOTA_MESSAGE.search(message))
    if status == 402 or (quota and retry_after is None and status in (None, 200, 400, 403, 429)):
        return ProviderLimitError(
            text,
            status=status,
            hint="a spend cap or quota was reached; it does not clear by retrying — raise the "
            "limit with your provider or wait for it to reset, then run again",
        )
    if status == 429 or error_type == "rate_limit_error":
        return TransientProviderError(
            text, kind="rate_limit", retry_after=retry_after, status=status
        )
    if status in (408, 504) or error_type == "timeout_error":
        return TransientProviderError(text, kind="timeout", retry_after=retry_after, status=status)
    if status == 409 or (status is not None and status >= 500) or error_type == "api_error":
        return TransientProviderError(text, kind="server", retry_after=retry_after, status=status)
    if status == 401 or error_type == "authentication_error":
        return ProviderAuthError(text, status=status, hint="check the API key for this provider")
    if status == 403 or error_type == "permission_error":
        return ProviderAuthError(text, status=status, hint="the key lacks permission for this")
    if status == 404 or error_type == "not_found_error":
        return ProviderConfigError(
            text, status=status, hint="check ai.model and the base URL of this provider"
        )
    if _CONTEXT_MESSAGE.search(message) or status == 413:
        return ProviderRequestError(
            text,
            status=status,
            hint="the prompt is too long for the model: shorten the story or plan, or pick a "
            "model with a larger context window",
        )
    if (status is not None and 400 <= status < 500) or error_type == "invalid_request_error":
        return ProviderRequestError(text, status=status)
    if status in (None, 200):
        # An error event inside a stream that started fine: the server gave up mid-answer.
        return TransientProviderError(text, kind="server", retry_after=retry_after, status=status)
    return ProviderError(text, status=status)


def _headers_of(exc: Any) -> dict[str, str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return {}
    try:
        return {str(k): str(v) for k, v in headers.items()}
    except AttributeError:
        return {}


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """(type, code, message) from an error body in either API's shape."""
    node = body
    if isinstance(node, Mapping) and isinstance(node.get("error"), Mapping):
        node = node["error"]
    if not isinstance(node, Mapping):
        return None, None, str(body) if body else None
    raw_type, raw_code, raw_msg = node.get("type"), node.get("code"), node.get("message")
    return (
        str(raw_type) if raw_type is not None else None,
        str(raw_code) if raw_code is not None else None,
        str(raw_msg) if raw_msg is not None else None,
    )


def _map_stainless(
    exc: BaseException,
    *,
    provider: str,
    status_error: type[BaseException],
    api_error: type[BaseException],
    timeout_error: type[BaseException],
    connection_error: type[BaseException],
    secrets: Iterable[str],
) -> ProviderError | None:
    """Both official SDKs share one exception layout (generated by the same tool)."""
    if isinstance(exc, timeout_error):
        return TransientProviderError(f"{provider} API: request timed out", kind="timeout")
    if isinstance(exc, connection_error):
        cause = redact(str(exc.__cause__ or exc), secrets)[:200]
        return TransientProviderError(
            f"{provider} API: connection failed ({cause})", kind="connection"
        )
    if not isinstance(exc, api_error):
        return None
    body = getattr(exc, "body", None)
    error_type, error_code, message = _error_fields(body)
    status = getattr(exc, "status_code", None) if isinstance(exc, status_error) else None
    if not isinstance(status, int):
        status = None
    return classify_http_failure(
        provider=provider,
        status=status,
        error_type=error_type,
        error_code=error_code,
        message=message or str(getattr(exc, "message", exc)),
        retry_after=parse_retry_after(_headers_of(exc)),
        secrets=secrets,
    )


def map_openai_error(exc: BaseException, *, secrets: Iterable[str] = ()) -> ProviderError | None:
    """The typed error for an `openai` SDK exception, or None when it is not one."""
    import openai

    return _map_stainless(
        exc,
        provider="openai",
        status_error=openai.APIStatusError,
        api_error=openai.APIError,
        timeout_error=openai.APITimeoutError,
        connection_error=openai.APIConnectionError,
        secrets=secrets,
    )


def map_anthropic_error(exc: BaseException, *, secrets: Iterable[str] = ()) -> ProviderError | None:
    """The typed error for an `anthropic` SDK exception, or None when it is not one."""
    import anthropic

    return _map_stainless(
        exc,
        provider="anthropic",
        status_error=anthropic.APIStatusError,
        api_error=anthropic.APIError,
        timeout_error=anthropic.APITimeoutError,
        connection_error=anthropic.APIConnectionError,
        secrets=secrets,
    )


def map_transport_error(exc: BaseException) -> ProviderError | None:
    """A raw transport exception (some SDK streams let them through) → timeout/connection."""
    try:
        import httpx2
    except ImportError:  # pragma: no cover - both SDKs depend on it
        return None
    if isinstance(exc, httpx2.TimeoutException):
        return TransientProviderError("API request timed out", kind="timeout")
    if isinstance(exc, httpx2.TransportError):
        return TransientProviderError(
            f"API connection failed ({type(exc).__name__})", kind="connection"
        )
    return None


#: Default output patterns for CLI agents (claude, codex, aider print these on failure).
DEFAULT_OUTPUT_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"credit balance is too low|insufficient[_ ]quota|exceeded your current quota", "limit"),
    (r"usage limit|spend(ing)? (limit|cap)", "limit"),
    (r"\b529\b|overloaded", "overloaded"),
    (r"\b429\b|rate[ _-]?limit|too many requests", "rate_limit"),
    (r"invalid api key|\b401\b|unauthori[sz]ed|not logged in|please run /login", "auth"),
    (r"prompt is too long|context[_ ]length|context window", "request"),
    (r"\b50[0234]\b|internal server error|service unavailable|bad gateway", "server"),
    (r"timed? ?out|ETIMEDOUT", "timeout"),
    (r"ECONNRESET|ECONNREFUSED|connection (reset|refused|error)|network error", "connection"),
)

#: Every kind an output pattern or exit code may map to.
OUTPUT_KINDS = frozenset(
    {"rate_limit", "overloaded", "server", "timeout", "connection", "auth", "limit", "request"}
)


def error_for_kind(kind: str, message: str, *, retry_after: float | None = None) -> ProviderError:
    """The typed error for a kind named in config (output patterns, exit codes)."""
    if kind in ("rate_limit", "overloaded", "server", "timeout", "connection"):
        return TransientProviderError(message, kind=kind, retry_after=retry_after)
    if kind == "auth":
        return ProviderAuthError(message, hint="log the agent in or set its API key")
    if kind == "limit":
        return ProviderLimitError(message, hint="a spend cap or quota was reached")
    if kind == "request":
        return ProviderRequestError(message)
    raise ValueError(f"unknown error kind {kind!r}")


def classify_output(
    text: str, patterns: Iterable[tuple[str, str]] = DEFAULT_OUTPUT_PATTERNS
) -> str | None:
    """The kind of the first pattern found in a CLI agent's output, or None."""
    for pattern, kind in patterns:
        if re.search(pattern, text, re.IGNORECASE):
            return kind
    return None
