"""`codex exec --json`: one JSON event a line (codex-rs/exec/src/exec_events.rs)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ai_sdlc.providers.base import ProviderError, Usage
from ai_sdlc.providers.cli_formats.common import (
    MAX_ANSWER,
    TAIL,
    AgentOutput,
    BackendRetry,
    Classifier,
    agent_failure,
    as_int,
    json_lines,
)
from ai_sdlc.providers.errors_map import classify_output, redact
from ai_sdlc.providers.tools import truncate

_RECONNECT = re.compile(r"^\s*Reconnecting\.\.\.\s*(\d+)\s*/\s*(\d+)", re.IGNORECASE)


def parse_codex(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    out = AgentOutput()
    answer: str | None = None
    plan: str | None = None
    completed = False
    failure: str | None = None
    last_error: str | None = None
    for event in json_lines(stdout):
        kind = event.get("type")
        if kind == "error":
            retry = codex_retry(event)
            if retry is not None:
                out.retries.append(retry)
            else:
                last_error = str(event.get("message") or "") or last_error
        elif kind == "turn.failed":
            error = event.get("error")
            failure = str(error.get("message") or "") if isinstance(error, dict) else ""
            failure = failure or last_error or "turn failed"
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            item_type = item.get("type") or item.get("item_type")  # item_type: early versions
            if item_type in ("agent_message", "assistant_message"):
                answer = str(item.get("text") or "")
            elif item_type == "plan":
                plan = str(item.get("text") or "")
        elif kind == "turn.completed":
            completed = True
            usage = event.get("usage")
            if isinstance(usage, dict):
                # one turn per `codex exec`; newer versions report the thread's running total
                out.usage = Usage(
                    as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens"))
                )
    if failure is None and completed and code == 0:
        out.text = (answer if answer is not None else plan or "")[-MAX_ANSWER:]
        return out
    if failure is None and last_error is None and not completed and code == 0:
        out.error = ProviderError(
            f"{classifier.program} printed no turn.completed event",
            hint="the codex preset needs `codex exec --json` (codex 0.44 or later); for another "
            "program set ai.command.output: text",
        )
        return out
    detail = failure or last_error or f"{stderr[-TAIL:]}\n{stdout[-TAIL:]}"
    out.error = agent_failure(classifier, code, detail, classify_output(detail, _CODEX_KINDS))
    return out


#: Codex's words for a failure whose status it does not print (a 5xx it gave up on).
_CODEX_KINDS = (
    (r"experiencing high demand|server is busy", "overloaded"),
    (r"stream (disconnected|closed) before", "server"),
)


def codex_retry(event: Mapping[str, Any]) -> BackendRetry | None:
    """A `Reconnecting... n/m (why)` error event: one retry codex made by itself."""
    if event.get("type") != "error":
        return None
    message = str(event.get("message") or "")
    retry = _RECONNECT.match(message)
    if not retry:
        return None
    reason = f"codex API retry {retry.group(1)}/{retry.group(2)}"
    detail = message[retry.end() :].strip(" :()")
    if detail:
        reason += f": {truncate(redact(detail), 200)}"
    return BackendRetry(0.0, reason)


# --- gemini --output-format json -------------------------------------------------------------
