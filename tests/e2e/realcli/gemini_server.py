"""A fake Gemini API (`POST /v1beta/models/<model>:generateContent` and
`:streamGenerateContent?alt=sse`) for the real Gemini CLI, which reaches it through
GOOGLE_GEMINI_BASE_URL (with GEMINI_API_KEY set, auth type `gemini-api-key`).

Errors have the API's shape (`{"error": {"code", "message", "status"}}`): Gemini CLI retries a
429/5xx by itself and gives up at once on a 401/403.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.e2e.realcli.model_server import ModelServer, Turn, send_json, send_sse

_CWD = re.compile(r"Workspace Directories:\*\*\n\s*- (/\S+)")
#: Token usage the server reports per phase request, so a test can check what ai-sdlc recorded.
INPUT_TOKENS = 1000
OUTPUT_TOKENS = 50

_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
_MESSAGES = {
    401: "API key not valid. Please pass a valid API key.",
    403: "The caller does not have permission",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "Internal error encountered.",
    503: "The model is overloaded. Please try again later.",
}


def _parts_text(content: Any) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    return "\n".join(
        str(p["text"])
        for p in parts or []
        if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


class GeminiServer(ModelServer):
    #: When set (e.g. "0.1s"), refusals carry a google.rpc.RetryInfo with this delay.
    retry_delay: str | None = None
    #: When set, only refusals of these statuses carry it (the others are plain).
    retry_info_statuses: frozenset[int] | None = None

    def conversation_text(self, body: dict[str, Any]) -> str:
        return "\n".join(
            _parts_text(c) for c in body.get("contents") or [] if c.get("role") == "user"
        )

    def model_turns(self, body: dict[str, Any]) -> int:
        """Model turns that called a tool (Gemini CLI may replay the setup as a model turn)."""
        count = 0
        for content in body.get("contents") or []:
            if content.get("role") != "model":
                continue
            parts = content.get("parts") or []
            if any(isinstance(p, dict) and "functionCall" in p for p in parts):
                count += 1
        return count

    def working_folder(self, body: dict[str, Any]) -> str | None:
        match = _CWD.search(json.dumps(body).replace("\\n", "\n"))
        return match.group(1).rstrip(".") if match else None

    def refuse(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        message = _MESSAGES.get(status, f"HTTP {status}")
        error: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": _STATUS.get(status, "UNKNOWN"),
        }
        chosen = self.retry_info_statuses is None or status in self.retry_info_statuses
        if self.retry_delay is not None and (status == 429 or status >= 500) and chosen:
            # the API's own "retry in": Gemini CLI waits the longer of it and its backoff (5 s,
            # doubling) and logs the retry over several lines ("Attempt 1 failed: <message>"
            # ... "Retrying after 5882ms..."), nothing in stream-json
            error["details"] = [{"@type": _RETRY_INFO, "retryDelay": self.retry_delay}]
        send_json(handler, status, {"error": error})

    def answer(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], turn: Turn, *, side: bool
    ) -> None:
        parts: list[dict[str, Any]] = []
        if turn.text:
            parts.append({"text": turn.text})
        for tool in turn.tools:
            parts.append({"functionCall": {"name": tool.name, "args": tool.args}})
        usage_in, usage_out = (5, 1) if side else (INPUT_TOKENS, OUTPUT_TOKENS)
        payload = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": usage_in,
                "candidatesTokenCount": usage_out,
                "totalTokenCount": usage_in + usage_out,
            },
            "modelVersion": "gemini-test",
        }
        if "streamGenerateContent" in handler.path:
            send_sse(handler, [(None, payload)])
        else:
            send_json(handler, 200, payload)
