"""`gemini --output-format json`: one JSON object `{session_id, response, stats, error}`."""

from __future__ import annotations

import json
import re
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
    plain_failure,
)

_GEMINI_KINDS = {
    "TerminalQuotaError": "limit",  # a daily quota or spend cap: never clears by retrying
    "RetryableQuotaError": "rate_limit",
    "FatalAuthenticationError": "auth",
    "INVALID_STREAM": "server",  # the model's stream broke off
}


def _json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in `text` that looks like Gemini CLI's result (the error form is
    pretty-printed on stderr, possibly after warning lines)."""
    stripped = text.strip()
    try:
        whole = json.loads(stripped) if stripped else None
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return whole
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    for match in re.finditer(r"(?m)^\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and {"response", "error", "stats", "session_id"} & set(value):
            found = value
    return found


def _gemini_stats(stats: Any) -> tuple[Usage | None, list[BackendRetry]]:
    if not isinstance(stats, dict) or not isinstance(stats.get("models"), dict):
        return None, []
    usage = Usage()
    retries: list[BackendRetry] = []
    for name, model in stats["models"].items():
        if not isinstance(model, dict):
            continue
        tokens = model.get("tokens") if isinstance(model.get("tokens"), dict) else {}
        assert isinstance(tokens, dict)
        usage.input_tokens += as_int(tokens.get("prompt"))
        usage.output_tokens += as_int(tokens.get("candidates")) + as_int(tokens.get("thoughts"))
        api = model.get("api") if isinstance(model.get("api"), dict) else {}
        assert isinstance(api, dict)
        errors = as_int(api.get("totalErrors"))
        by_type = api.get("errorsByType")
        types = (
            ", ".join(f"{k} x{as_int(v)}" for k, v in by_type.items())
            if isinstance(by_type, dict) and by_type
            else "API error"
        )
        for number in range(1, errors + 1):
            retries.append(
                BackendRetry(0.0, f"gemini API retry {number}/{errors} ({name}: {types})")
            )
    return usage, retries


def parse_gemini(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    result = _json_object(stdout) or _json_object(stderr)
    if result is None:
        if code == 0:
            return AgentOutput(
                error=ProviderError(
                    f"{classifier.program} printed no JSON result",
                    hint="the gemini preset needs `gemini --output-format json`; for another "
                    "program set ai.command.output: text",
                )
            )
        return AgentOutput(error=plain_failure(stdout, stderr, code, classifier))
    usage, retries = _gemini_stats(result.get("stats"))
    out = AgentOutput(usage=usage, retries=retries)
    error = result.get("error")
    if error is None and code == 0:
        out.text = str(result.get("response") or "")[-MAX_ANSWER:]
        return out
    error = error if isinstance(error, dict) else {}
    error_type = str(error.get("type") or "")
    error_code = error.get("code")
    hint = _GEMINI_KINDS.get(error_type)
    if hint is None and isinstance(error_code, int) and not isinstance(error_code, bool):
        hint = {429: "rate_limit", 41: "auth", 401: "auth", 403: "auth"}.get(error_code)
        if hint is None and 500 <= error_code < 600:
            hint = "server"
    message = str(error.get("message") or "") or f"{stderr[-TAIL:]}\n{stdout[-TAIL:]}"
    label = f"{error_type}: {message}" if error_type else message
    out.error = agent_failure(classifier, code, label, hint)
    return out


# --- aider ----------------------------------------------------------------------------------
