"""SDK/HTTP failures → typed errors: what is retried, with which hint, and what never is."""

from __future__ import annotations

import email.utils

import pytest

from ai_sdlc.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderLimitError,
    ProviderRequestError,
    TransientProviderError,
)
from ai_sdlc.providers.errors_map import (
    classify_http_failure,
    classify_output,
    error_for_kind,
    parse_retry_after,
    redact,
)


def test_retry_after_prefers_milliseconds_then_seconds() -> None:
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5


def test_retry_after_http_date_is_relative_to_now() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30.0)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0


@pytest.mark.parametrize("headers", [None, {}, {"retry-after": "soon"}, {"x": "1"}])
def test_retry_after_absent_or_garbage_is_none(headers: dict[str, str] | None) -> None:
    assert parse_retry_after(headers) is None


def _classify(
    status: int | None,
    error_type: str | None,
    message: str = "boom",
    retry_after: float | None = None,
    code: str | None = None,
):  # type: ignore[no-untyped-def]
    return classify_http_failure(
        provider="test",
        status=status,
        error_type=error_type,
        error_code=code,
        message=message,
        retry_after=retry_after,
    )


@pytest.mark.parametrize(
    ("status", "error_type", "kind"),
    [
        (429, "rate_limit_error", "rate_limit"),
        (529, "overloaded_error", "overloaded"),
        (200, "overloaded_error", "overloaded"),  # inside a stream that started fine
        (500, "api_error", "server"),
        (503, None, "server"),
        (408, None, "timeout"),
        (None, "server_error", "server"),  # an OpenAI error event mid-stream
    ],
)
def test_transient_failures(status: int | None, error_type: str | None, kind: str) -> None:
    error = _classify(status, error_type, retry_after=2.0)
    assert isinstance(error, TransientProviderError)
    assert error.kind == kind
    assert error.retry_after == 2.0


def test_spend_cap_429_without_hint_is_a_limit_not_a_retry() -> None:
    capped = _classify(429, "rate_limit_error", "You have reached your specified API usage limits")
    assert isinstance(capped, ProviderLimitError)
    quota = _classify(
        429, "insufficient_quota", "You exceeded your current quota", code="insufficient_quota"
    )
    assert isinstance(quota, ProviderLimitError)
    # the same quota wording with a retry hint will clear: a rate limit
    hinted = _classify(429, "rate_limit_error", "usage limit", retry_after=3.0)
    assert isinstance(hinted, TransientProviderError)


@pytest.mark.parametrize(
    ("status", "error_type", "message", "cls"),
    [
        (401, "authentication_error", "invalid x-api-key", ProviderAuthError),
        (403, "permission_error", "no", ProviderAuthError),
        (404, "not_found_error", "model: nope", ProviderConfigError),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens", ProviderRequestError),
        (400, "invalid_request_error", "messages: bad", ProviderRequestError),
        (402, None, "payment required", ProviderLimitError),
    ],
)
def test_non_retryable_failures(status: int, error_type: str, message: str, cls: type) -> None:
    error = _classify(status, error_type, message)
    assert type(error) is cls
    assert not isinstance(error, TransientProviderError)


def test_context_too_long_carries_a_hint() -> None:
    error = _classify(400, "invalid_request_error", "context_length_exceeded")
    assert error.hint is not None and "too long" in error.hint


def test_messages_never_carry_keys() -> None:
    error = _classify(
        401, "authentication_error", "Incorrect API key provided: sk-live-abcdef1234567890"
    )
    assert "sk-live" not in str(error)
    assert redact("key=hunter2hunter2", ["hunter2hunter2"]) == "key=***"
    assert redact("Authorization: Bearer abc.def.ghijklmnop") == "Authorization: ***"


def test_cli_output_patterns() -> None:
    assert classify_output("Error: 429 Too Many Requests") == "rate_limit"
    assert classify_output("API Error: 529 Overloaded") == "overloaded"
    assert classify_output("Credit balance is too low") == "limit"
    assert classify_output("Invalid API key · Please run /login") == "auth"
    assert classify_output("all fine") is None
    custom = [("quota exhausted", "limit")]
    assert classify_output("the quota exhausted today", custom) == "limit"


def test_error_for_kind_builds_each_type() -> None:
    assert isinstance(error_for_kind("rate_limit", "m"), TransientProviderError)
    assert isinstance(error_for_kind("auth", "m"), ProviderAuthError)
    assert isinstance(error_for_kind("limit", "m"), ProviderLimitError)
    assert isinstance(error_for_kind("request", "m"), ProviderRequestError)
    with pytest.raises(ValueError):
        error_for_kind("weird", "m")
