"""`claude -p --output-format json`: Claude Code's one `result` object."""

from __future__ import annotations

from ai_sdlc.providers.base import ProviderError, Usage
from ai_sdlc.providers.cli_formats.common import (
    MAX_ANSWER,
    TAIL,
    AgentOutput,
    Classifier,
    agent_failure,
    as_int,
    http_kind,
    json_lines,
    plain_failure,
)


def parse_claude(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    """`claude -p --output-format json`: one `result` object (the stream's last event): the
    answer, Claude Code's own usage, `is_error` and the HTTP status of a failed API call."""
    result = next(
        (e for e in reversed(list(json_lines(stdout))) if e.get("type") == "result"), None
    )
    if result is None:
        if code == 0:
            return AgentOutput(
                error=ProviderError(
                    f"{classifier.program} printed no JSON result",
                    hint="the claude preset needs `claude -p --output-format json`; for another "
                    "program set ai.command.output: text",
                )
            )
        return AgentOutput(error=plain_failure(stdout, stderr, code, classifier))
    out = AgentOutput()
    usage = result.get("usage")
    if isinstance(usage, dict):
        out.usage = Usage(
            sum(
                as_int(usage.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            ),
            as_int(usage.get("output_tokens")),
        )
    if not result.get("is_error") and code == 0:
        out.text = str(result.get("result") or "")[-MAX_ANSWER:]
        return out
    status = result.get("api_error_status")
    kind = http_kind(status if isinstance(status, int) else None)
    detail = str(result.get("result") or result.get("subtype") or "") or stderr[-TAIL:]
    out.error = agent_failure(classifier, code, detail, kind)
    return out
