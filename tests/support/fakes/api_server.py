"""A fake model API on 127.0.0.1 speaking two wire protocols, scripted per test.

`POST /v1/chat/completions` answers as OpenAI chat-completions, `POST /v1/messages` as the
Anthropic Messages API, each as JSON or as a server-sent-event stream (whatever the client
asked for). A test scripts protocol-neutral steps (`Reply`, `HttpError`, `StreamFailure`,
`Slow`) and the server renders each in the protocol of the request it answers; the real
`openai` and `anthropic` client libraries talk to it through `base_url`.

Steps are served in order; when the queue is empty, `responder(request)` decides (used by
end-to-end runs that answer by phase); with neither, the server answers 500.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Call:
    """One tool call the fake model makes. `raw` overrides the JSON arguments text."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None


@dataclass(frozen=True)
class Reply:
    text: str = ""
    calls: tuple[Call, ...] = ()
    input_tokens: int = 100
    output_tokens: int = 20
    include_usage: bool = True


@dataclass(frozen=True)
class HttpError:
    status: int
    error_type: str
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    code: str | None = None


@dataclass(frozen=True)
class StreamFailure:
    """A stream that starts with 200 and some text, then an error event."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    text_before: str = "Let me th"


@dataclass(frozen=True)
class Slow:
    """Wait `seconds` before answering with `then` (the wait ends early at shutdown)."""

    seconds: float
    then: Reply = field(default_factory=Reply)


Step = Reply | HttpError | StreamFailure | Slow


@dataclass
class RecordedRequest:
    protocol: str  # "openai" | "anthropic"
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def streaming(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            names.append(tool["function"]["name"] if "function" in tool else tool["name"])
        return names

    def text(self) -> str:
        """Every text of the conversation (system, user, tool results), joined."""
        parts: list[str] = []
        system = self.body.get("system")
        if isinstance(system, str):
            parts.append(system)
        for message in self.body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                for block in content:
                    if isinstance(block, dict):
                        for key in ("text", "content"):
                            if isinstance(block.get(key), str):
                                parts.append(block[key])
        return "\n".join(parts)


class FakeApiServer:
    def __init__(self) -> None:
        self.steps: deque[Step] = deque()
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], Step] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    # --- scripting --------------------------------------------------------------------------

    def script(self, *steps: Step) -> None:
        with self._lock:
            self.steps.extend(steps)

    def next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            self.requests.append(request)
            if self.steps:
                return self.steps.popleft()
        if self.responder is not None:
            return self.responder(request)
        return HttpError(500, "api_error", "the fake server has no scripted answer left")

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"

    def wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


# --- rendering ----------------------------------------------------------------------------------


def _openai_error(step: HttpError | StreamFailure) -> dict[str, Any]:
    code = step.code if isinstance(step, HttpError) else None
    return {"error": {"message": step.message, "type": step.error_type, "code": code}}


def _anthropic_error(step: HttpError | StreamFailure) -> dict[str, Any]:
    return {"type": "error", "error": {"type": step.error_type, "message": step.message}}


def _split(text: str) -> list[str]:
    """Text in two pieces, so streams really arrive in parts."""
    if len(text) < 2:
        return [text] if text else []
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _args_text(call: Call) -> str:
    return call.raw if call.raw is not None else json.dumps(call.arguments)


def openai_json(server: FakeApiServer, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": server.new_id("call"),
                "type": "function",
                "function": {"name": c.name, "arguments": _args_text(c)},
            }
            for c in reply.calls
        ]
    out: dict[str, Any] = {
        "id": server.new_id("chatcmpl"),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.calls else "stop",
            }
        ],
    }
    if reply.include_usage:
        out["usage"] = {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
    return out


def openai_chunks(
    server: FakeApiServer, body: dict[str, Any], reply: Reply | StreamFailure
) -> Iterator[dict[str, Any] | str]:
    base = {
        "id": server.new_id("chatcmpl"),
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if isinstance(reply, StreamFailure):
        yield chunk({"content": reply.text_before})
        yield _openai_error(reply)
        return
    for piece in _split(reply.text):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        call_id = server.new_id("call")
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [first]})
        for piece in _split(_args_text(call)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.calls else "stop")
    wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    if reply.include_usage and wants_usage:
        yield {
            **base,
            "choices": [],
            "usage": {
                "prompt_tokens": reply.input_tokens,
                "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
            },
        }
    yield "[DONE]"


def anthropic_json(server: FakeApiServer, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        content.append(
            {
                "type": "tool_use",
                "id": server.new_id("toolu"),
                "name": call.name,
                "input": call.arguments,
            }
        )
    return {
        "id": server.new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def anthropic_events(
    server: FakeApiServer, body: dict[str, Any], reply: Reply | StreamFailure
) -> Iterator[tuple[str, dict[str, Any]]]:
    tokens_in = reply.input_tokens if isinstance(reply, Reply) else 10
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": server.new_id("msg"),
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "fake"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": tokens_in, "output_tokens": 1},
            },
        },
    )
    yield "ping", {"type": "ping"}
    index = 0
    text = reply.text if isinstance(reply, Reply) else reply.text_before
    if text:
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        )
        for piece in _split(text):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        if isinstance(reply, StreamFailure):
            yield "error", _anthropic_error(reply)
            return
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    assert isinstance(reply, Reply)
    for call in reply.calls:
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": server.new_id("toolu"),
                    "name": call.name,
                    "input": {},
                },
            },
        )
        for piece in _split(_args_text(call)):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if reply.calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --- the HTTP handler -----------------------------------------------------------------------------


def _handler_for(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            body = json.loads(raw or b"{}")
            path = self.path.split("?")[0]
            if path.endswith("/chat/completions"):
                protocol = "openai"
            elif path.endswith("/messages"):
                protocol = "anthropic"
            else:
                self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest(protocol, path, headers, body)
            step = server.next_step(request)
            try:
                self._answer(request, step)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up (timeouts): nothing to answer

        def _answer(self, request: RecordedRequest, step: Step) -> None:
            if isinstance(step, Slow):
                server.wait(step.seconds)
                step = step.then
            if isinstance(step, HttpError):
                render = _openai_error if request.protocol == "openai" else _anthropic_error
                self._json(step.status, render(step), step.headers)
                return
            if request.protocol == "openai":
                if request.streaming:
                    self._sse((None, item) for item in openai_chunks(server, request.body, step))
                else:
                    assert isinstance(step, Reply), "StreamFailure needs a streaming request"
                    self._json(200, openai_json(server, request.body, step))
            elif request.streaming:
                self._sse(anthropic_events(server, request.body, step))
            else:
                assert isinstance(step, Reply), "StreamFailure needs a streaming request"
                self._json(200, anthropic_json(server, request.body, step))

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: Any) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for name, payload in events:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
                self.wfile.write(frame.encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler
