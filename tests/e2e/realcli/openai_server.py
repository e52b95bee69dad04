"""A fake OpenAI on 127.0.0.1 for the real Codex CLI (Responses API) and Aider (Chat Completions).

`tests/support/fakes/api_server.FakeApiServer` already answers `POST /v1/chat/completions` (JSON or
SSE)
from scripted protocol-neutral steps; this adds `POST /v1/responses` as the Responses API's
server-sent events (`response.created`, `response.output_item.done` per item,
`response.completed` with usage), which is all `codex exec` reads, and `GET /v1/models` (an
empty list) for clients that look. A `Reply`'s `calls` become `function_call` items; a
`Call` named `apply_patch` with `raw` set becomes a `custom_tool_call` (Codex's freeform patch
tool) whose input is that text.

Every request is recorded with the status it got, so a test can say exactly how many requests
the server refused and compare that with the `api_retry` count.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fakes.api_server import (
    Call,
    FakeApiServer,
    HttpError,
    RecordedRequest,
    Reply,
    Slow,
    Step,
    StreamFailure,
    _handler_for,
)

__all__ = ["Call", "HttpError", "OpenAiServer", "Reply", "StreamFailure", "request_text"]


def request_text(request: RecordedRequest) -> str:
    """Every text of a chat-completions or responses request (instructions, messages, tool
    outputs), joined: what a responder looks at to tell the phase."""
    if request.protocol != "responses":
        return request.text()
    body = request.body
    parts: list[str] = []
    if isinstance(body.get("instructions"), str):
        parts.append(body["instructions"])
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if isinstance(content, list):
            parts.extend(str(c.get("text")) for c in content if isinstance(c, dict) and "text" in c)
        elif isinstance(content, str):
            parts.append(content)
        if isinstance(item.get("output"), str):
            parts.append(item["output"])
    return "\n".join(parts)


def last_tool_output(request: RecordedRequest) -> str | None:
    """The output of the newest tool call in a responses request (None: the turn's first call)."""
    items = request.body.get("input")
    if not isinstance(items, list):
        return None
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            return output if isinstance(output, str) else json.dumps(output)
        if item.get("type") == "message" and item.get("role") == "user":
            return None
    return None


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _item(server: FakeApiServer, call: Call) -> dict[str, Any]:
    call_id = server.new_id("call")
    if call.name == "apply_patch" and call.raw is not None:
        return {
            "type": "custom_tool_call",
            "id": server.new_id("ctc"),
            "call_id": call_id,
            "name": "apply_patch",
            "input": call.raw,
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": server.new_id("fc"),
        "call_id": call_id,
        "name": call.name,
        "arguments": call.raw if call.raw is not None else json.dumps(call.arguments),
        "status": "completed",
    }


def response_events(
    server: FakeApiServer, body: dict[str, Any], reply: Reply | StreamFailure
) -> Iterator[tuple[str, dict[str, Any]]]:
    response_id = server.new_id("resp")
    yield "response.created", {"type": "response.created", "response": {"id": response_id}}
    if isinstance(reply, StreamFailure):
        # a stream that breaks off before `response.completed` (the connection just closes):
        # the client's stream retry
        return
    if reply.text:
        message = {
            "type": "message",
            "id": server.new_id("msg"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
        yield "response.output_item.done", {"type": "response.output_item.done", "item": message}
    for call in reply.calls:
        item = _item(server, call)
        yield "response.output_item.done", {"type": "response.output_item.done", "item": item}
    completed = {"id": response_id, "status": "completed", "output": []}
    if reply.include_usage:
        completed["usage"] = _usage(reply)
    yield "response.completed", {"type": "response.completed", "response": completed}


class OpenAiServer(FakeApiServer):
    """FakeApiServer plus the Responses API; records each request's answered status."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []
        self._httpd.RequestHandlerClass = _responses_handler(self)

    def refused(self) -> int:
        """How many requests got an error status (each one a retry the client had to make)."""
        with self._lock:
            return sum(1 for status in self.statuses if status >= 400)

    def answered(self) -> int:
        with self._lock:
            return sum(1 for status in self.statuses if status < 400)

    def note(self, status: int) -> None:
        with self._lock:
            self.statuses.append(status)


def _responses_handler(server: OpenAiServer) -> type[BaseHTTPRequestHandler]:
    base = _handler_for(server)

    class Handler(base):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:
            if self.path.split("?")[0].endswith("/models"):
                self._json(200, {"object": "list", "data": []})
            else:
                self._json(404, {"error": {"message": "no route", "type": "not_found"}})

        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            if not path.endswith("/responses"):
                super().do_POST()
                return
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest("responses", path, headers, body)
            step = server.next_step(request)
            try:
                self._respond(request, step)
            except (BrokenPipeError, ConnectionResetError):
                return

        def _respond(self, request: RecordedRequest, step: Step) -> None:
            if isinstance(step, Slow):
                server.wait(step.seconds)
                step = step.then
            if isinstance(step, HttpError):
                server.note(step.status)
                error = {"message": step.message, "type": step.error_type, "code": step.code}
                self._json(step.status, {"error": error}, step.headers)
                return
            server.note(200)
            self._sse(response_events(server, request.body, step))

        def _answer(self, request: RecordedRequest, step: Step) -> None:
            # chat completions (FakeApiServer's own rendering), with the status noted
            shown = step.then if isinstance(step, Slow) else step
            server.note(shown.status if isinstance(shown, HttpError) else 200)
            super()._answer(request, step)

    return Handler
