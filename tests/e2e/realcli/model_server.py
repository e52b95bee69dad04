"""What the fake model servers for the real agent CLIs share: a thread-served HTTP server on
127.0.0.1 (free port), a script of each phase's turns, injected faults and a log of every call.

A request is a *phase request* when its conversation carries our prompt's `## Your task (<phase>)`
heading; anything else the CLI asks on its own (a title, a quota probe) is a side request that
gets a short answer and is logged apart. Within a phase the turn to answer is the number of model
turns already in the conversation (so a tool call is turn 0 and the final answer turn 1), and a
new conversation of the same phase is the next *session* of it (a rework, a review asked again).

Faults (`fail(status, times)`) are served, in order, to the next phase requests instead of their
answer; `requests` records each phase request with the status it got, so a test can count the
refused ones and check that nothing came after a block.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TASK = re.compile(r"## Your task \((\w+)\)")


@dataclass(frozen=True)
class Tool:
    """A tool call the model makes: the CLI's own tool name and its arguments (`{cwd}` in a
    string argument is replaced by the session's working folder)."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One model turn: some text and the tool calls it asks for (none: the final answer)."""

    text: str = ""
    tools: tuple[Tool, ...] = ()


@dataclass
class Call:
    """One phase request, as served."""

    phase: str
    session: int
    turn: int
    status: int


def default_answer(phase: str) -> str:
    """The words a competent agent ends each phase with."""
    return {
        "refine": "A clear story with testable criteria.\n\nDECISION: APPROVED",
        "research": "## Findings\n\nA small module is needed.",
        "plan": "## Plan\n\n1. Add the function.\n2. Test it.",
        "implement": "Implemented as planned.",
        "rework": "Reworked as the review asked.",
        "review": "Clean and tested.\n\nDECISION: APPROVED",
    }.get(phase, "Done.")


@dataclass
class Script:
    """Per phase, the sessions to play: each a list of turns (the last one is the answer).
    A phase without a script, or past its scripted sessions, ends with its default answer."""

    sessions: dict[str, list[list[Turn]]] = field(default_factory=dict)

    def turn(self, phase: str, session: int, turn: int) -> Turn:
        plays = self.sessions.get(phase) or []
        turns = plays[min(session, len(plays) - 1)] if plays else []
        if turn < len(turns):
            return turns[turn]
        return Turn(default_answer(phase))


class ModelServer:
    """The shared machinery; a vendor subclass reads its requests and writes its answers."""

    def __init__(self) -> None:
        self.script = Script()
        self.calls: list[Call] = []
        self.side_calls: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self._faults: list[int] = []
        self._sessions: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting -------------------------------------------------------------------------

    def play(self, phase: str, *sessions: list[Turn]) -> None:
        self.script.sessions[phase] = list(sessions)

    def fail(self, status: int, times: int = 1) -> None:
        with self._lock:
            self._faults += [status] * times

    def refused(self) -> int:
        return sum(1 for call in self.calls if call.status != 200)

    def phases(self) -> list[str]:
        return [call.phase for call in self.calls if call.status == 200]

    # --- serving ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ModelServer:
        handler = _handler(self._dispatch)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _dispatch(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        text = self.conversation_text(body)
        match = _TASK.search(text)
        if match is None:
            with self._lock:
                self.side_calls.append(handler.path)
            self.answer(handler, body, Turn("OK"), side=True)
            return
        phase = match.group(1)
        turn = self.model_turns(body)
        with self._lock:
            self.bodies.append(body)
            if turn == 0:
                self._sessions[phase] = self._sessions.get(phase, -1) + 1
            session = max(self._sessions.get(phase, 0), 0)
            status = self._faults.pop(0) if self._faults else 200
            self.calls.append(Call(phase, session, turn, status))
        if status != 200:
            if turn == 0:  # the same conversation is asked again: the same session
                with self._lock:
                    self._sessions[phase] -= 1
            self.refuse(handler, status)
            return
        planned = self.script.turn(phase, session, turn)
        cwd = self.working_folder(body) or ""
        tools = tuple(
            Tool(t.name, {k: _fill(v, cwd) for k, v in t.args.items()}) for t in planned.tools
        )
        self.answer(handler, body, Turn(planned.text, tools), side=False)

    # --- what a vendor subclass supplies ---------------------------------------------------

    def conversation_text(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def model_turns(self, body: dict[str, Any]) -> int:
        raise NotImplementedError

    def working_folder(self, body: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def answer(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], turn: Turn, *, side: bool
    ) -> None:
        raise NotImplementedError

    def refuse(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        raise NotImplementedError


def _fill(value: Any, cwd: str) -> Any:
    return value.replace("{cwd}", cwd) if isinstance(value, str) else value


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    if status in (429, 529, 503):
        handler.send_header("Retry-After", "0")
    handler.end_headers()
    handler.wfile.write(data)


def send_sse(handler: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]]) -> None:
    """A whole event stream, then the connection closes (HTTP/1.0 framing)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.end_headers()
    for name, data in events:
        chunk = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
        handler.wfile.write(chunk.encode())
    handler.wfile.flush()


def _handler(
    dispatch: Callable[[BaseHTTPRequestHandler, dict[str, Any]], None],
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {}
            dispatch(self, body if isinstance(body, dict) else {})

        def do_GET(self) -> None:
            send_json(self, 404, {"error": {"message": "not found"}})

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    return Handler
