"""`classify` on the typed provider errors and on real anthropic/openai exceptions.

The SDK exceptions come from the real client libraries talking to a small HTTP server on
127.0.0.1 that answers with scripted statuses, headers and bodies (clients built with
max_retries=0, so each request is made once).
"""

from __future__ import annotations

import email.message
import json
import socket
import threading
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderLimitError,
    ProviderRequestError,
    TransientProviderError,
)
from ai_sdlc.resilience import AttemptTimeoutError, CircuitBreakerOpenError, classify

#: Tests here drive the openai or anthropic SDK in this process (2.5 s of CPU to import
#: both, once per process): one xdist worker for all such tests pays it once.
pytestmark = pytest.mark.xdist_group("provider-sdks")


class Scripted:
    status = 200
    headers: dict[str, str] = {}  # noqa: RUF012 - replaced per test
    body = b""
    content_type = "application/json"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        self.send_response(Scripted.status)
        self.send_header("content-type", Scripted.content_type)
        self.send_header("content-length", str(len(Scripted.body)))
        for name, value in Scripted.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(Scripted.body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def answer(
    status: int,
    body: Any,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> None:
    Scripted.status = status
    Scripted.body = body if isinstance(body, bytes) else json.dumps(body).encode()
    Scripted.headers = headers or {}
    Scripted.content_type = content_type


def anthropic_error(base_url: str, *, stream: bool = False) -> BaseException:
    # Imported by the tests that use it, not at collection (the SDK takes seconds to import).
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
    try:
        response = client.messages.create(
            model="claude-test",
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
            stream=stream,
        )
        if stream:
            for _ in response:
                pass
    except Exception as exc:
        return exc
    raise AssertionError("the request did not fail")


def openai_error(base_url: str) -> BaseException:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key="test-key", base_url=base_url + "/v1", max_retries=0)
    try:
        client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}]
        )
    except Exception as exc:
        return exc
    raise AssertionError("the request did not fail")


def anthropic_body(error_type: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": "scripted"}}


def test_anthropic_rate_limit_with_retry_after(server: str) -> None:
    answer(429, anthropic_body("rate_limit_error"), {"retry-after": "7"})
    result = classify(anthropic_error(server))
    assert (result.retryable, result.kind, result.retry_after, result.status) == (
        True,
        "rate_limit",
        7.0,
        429,
    )


def test_anthropic_spend_cap_429_without_hint_is_never_retried(server: str) -> None:
    answer(429, anthropic_body("billing_error"))
    result = classify(anthropic_error(server))
    assert (result.retryable, result.kind) == (False, "limit")


def test_anthropic_529_overloaded(server: str) -> None:
    answer(529, anthropic_body("overloaded_error"))
    result = classify(anthropic_error(server))
    assert (result.retryable, result.kind, result.status) == (True, "overloaded", 529)


def test_anthropic_overload_inside_a_200_stream(server: str) -> None:
    event = json.dumps(anthropic_body("overloaded_error"))
    answer(200, f"event: error\ndata: {event}\n\n".encode(), content_type="text/event-stream")
    error = anthropic_error(server, stream=True)
    result = classify(error)
    assert (result.retryable, result.kind, result.status) == (True, "overloaded", 200)


def test_openai_quota_429_and_retry_after_ms(server: str) -> None:
    quota = {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "x"}}
    answer(429, quota)
    assert classify(openai_error(server)).kind == "limit"
    answer(429, {"error": {"type": "requests", "message": "slow down"}}, {"retry-after-ms": "1500"})
    result = classify(openai_error(server))
    assert (result.kind, result.retry_after, result.retryable) == ("rate_limit", 1.5, True)


def test_openai_auth_and_server_errors(server: str) -> None:
    answer(401, {"error": {"type": "invalid_api_key", "message": "bad key"}})
    assert classify(openai_error(server)).kind == "auth"
    answer(
        503, {"error": {"message": "unavailable"}}, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    result = classify(openai_error(server))
    assert (result.kind, result.retryable, result.retry_after) == ("server", True, 0.0)


def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = classify(openai_error(f"http://127.0.0.1:{port}"))
    assert (result.kind, result.retryable) == ("connection", True)


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        (TransientProviderError("x", kind="timeout"), "timeout", True),
        (ProviderAuthError("x"), "auth", False),
        (ProviderConfigError("x"), "config", False),
        (ProviderRequestError("x"), "request", False),
        (ProviderLimitError("x"), "limit", False),
        (StoryBlockedError("x", story_id="S-0001"), "blocked", False),
        (CircuitBreakerOpenError("llm", 3.0), "circuit_open", False),
        (AttemptTimeoutError(5), "timeout", True),
        (TimeoutError(), "timeout", True),
        (ConnectionResetError(), "connection", True),
        (KeyError("k"), "unknown", False),
    ],
)
def test_typed_and_plain_errors(error: BaseException, kind: str, retryable: bool) -> None:
    result = classify(error)
    assert (result.kind, result.retryable) == (kind, retryable)


def test_transient_provider_error_keeps_its_hint() -> None:
    result = classify(TransientProviderError("x", kind="rate_limit", retry_after=12, status=429))
    assert (result.retry_after, result.status) == (12, 429)
    assert result.reason == "rate_limit (HTTP 429), server asked to wait 12 s"


def test_urllib_and_httpx_style_errors() -> None:
    headers = email.message.Message()
    headers["Retry-After"] = "4"
    http_error = urllib.error.HTTPError("https://api.github.com/x", 503, "busy", headers, None)
    result = classify(http_error)
    assert (result.kind, result.status, result.retry_after) == ("server", 503, 4.0)
    refused = urllib.error.URLError(ConnectionRefusedError(111, "refused"))
    assert classify(refused).kind == "connection"

    class HTTPStatusError(Exception):
        """Shaped like httpx.HTTPStatusError: the status lives on `response`."""

        def __init__(self) -> None:
            super().__init__("bad gateway")
            self.response = type("R", (), {"status_code": 502, "headers": {}})()

    assert classify(HTTPStatusError()).kind == "server"
