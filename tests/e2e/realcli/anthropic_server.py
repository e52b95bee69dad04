"""A fake Anthropic Messages API (`POST /v1/messages`, SSE when `stream` is set) for the real
Claude Code, which reaches it through ANTHROPIC_BASE_URL with a dummy ANTHROPIC_API_KEY.

Errors have the API's shape (`{"type": "error", "error": {"type": ..., "message": ...}}`), so
Claude Code retries a 429/529/5xx by itself (reporting each as a `system`/`api_retry` event) and
gives up at once on a 401.
"""

from __future__ import annotations

import itertools
import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.e2e.realcli.model_server import ModelServer, Turn, send_json, send_sse

_CWD = re.compile(r"Primary working directory: ([^\\\"\s]+)")
_IDS = itertools.count(1)
#: Token usage the server reports per phase request, so a test can check what ai-sdlc recorded.
INPUT_TOKENS = 1000
OUTPUT_TOKENS = 50

_ERRORS = {
    401: ("authentication_error", "invalid x-api-key"),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    503: ("api_error", "Service unavailable"),
    529: ("overloaded_error", "Overloaded"),
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


class AnthropicServer(ModelServer):
    def conversation_text(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        first_user = next((m for m in messages if m.get("role") == "user"), None)
        return _text(first_user.get("content")) if first_user else ""

    def model_turns(self, body: dict[str, Any]) -> int:
        return sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")

    def working_folder(self, body: dict[str, Any]) -> str | None:
        match = _CWD.search(json.dumps(body))  # in `system`, or a system message (2.1)
        return match.group(1) if match else None

    def refuse(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        kind, message = _ERRORS.get(status, ("api_error", f"HTTP {status}"))
        send_json(handler, status, {"type": "error", "error": {"type": kind, "message": message}})

    def answer(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], turn: Turn, *, side: bool
    ) -> None:
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for tool in turn.tools:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(_IDS):06d}",
                    "name": tool.name,
                    "input": tool.args,
                }
            )
        stop = "tool_use" if turn.tools else "end_turn"
        usage_in, usage_out = (5, 1) if side else (INPUT_TOKENS, OUTPUT_TOKENS)
        message = {
            "id": f"msg_{next(_IDS):06d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-test",
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
        }
        if not body.get("stream"):
            send_json(handler, 200, message)
            return
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": usage_in, "output_tokens": 1},
                    },
                },
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": _json(block["input"])}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage_out},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        send_sse(handler, events)


def _json(value: Any) -> str:
    return json.dumps(value)
