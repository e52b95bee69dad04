"""Aider 0.86 (`--no-pretty`): the answer and usage from the files it writes, its retries and
errors from its console."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ai_sdlc.providers.base import ProviderError, Usage
from ai_sdlc.providers.cli_formats.common import (
    ANSI,
    MAX_ANSWER,
    MESSAGE,
    TAIL,
    AgentOutput,
    BackendRetry,
    Classifier,
    agent_failure,
    as_int,
    json_lines,
    plain_failure,
)
from ai_sdlc.providers.errors_map import classify_output, redact
from ai_sdlc.providers.tools import truncate

#: The files the aider preset asks Aider to write into the private output folder.
AIDER_HISTORY = "llm-history.txt"
AIDER_ANALYTICS = "analytics.jsonl"

_AIDER_HEADER = re.compile(r"^(TO LLM|LLM RESPONSE) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*$")
_AIDER_RETRY = re.compile(r"^Retrying in (\d+(?:\.\d+)?) seconds")
_AIDER_ERROR = re.compile(r"^litellm\.(\w+):")
_AIDER_TOKENS = re.compile(r"^Tokens: ([\d.]+)(k?) sent, (?:.*?, )?([\d.]+)(k?) received")
#: litellm's exception names (what Aider prints) → our kinds.
_AIDER_KINDS = {
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "RateLimitError": "rate_limit",
    "InternalServerError": "server",
    "ServiceUnavailableError": "overloaded",
    "APIConnectionError": "connection",
    "Timeout": "timeout",
    "APIError": "server",
    "BadRequestError": "request",
    "ContextWindowExceededError": "request",
    "NotFoundError": "request",
    "UnprocessableEntityError": "request",
}
_QUOTA = ((r"insufficient[_ ]quota|exceeded your current quota|credit balance", "limit"),)


def _aider_answer(history: str) -> str | None:
    """The last non-empty `LLM RESPONSE` of Aider's LLM history (each line `ASSISTANT …`)."""
    answer: str | None = None
    block: list[str] | None = None

    def close() -> None:
        nonlocal answer
        if block is not None:
            text = "\n".join(block).strip()
            if text:
                answer = text

    for line in history.splitlines():
        header = _AIDER_HEADER.match(line)
        if header:
            close()
            block = [] if header.group(1) == "LLM RESPONSE" else None
        elif block is not None:
            if line == "ASSISTANT":
                block.append("")
            elif line.startswith("ASSISTANT "):
                block.append(line[len("ASSISTANT ") :])
    close()
    return answer


def _kilo(number: str, k: str) -> int:
    return round(float(number) * (1000 if k else 1))


def _aider_usage(analytics: str, stdout: str) -> Usage | None:
    """The API's counts from `message_send` events; else Aider's `Tokens:` lines (rounded to
    hundreds past 1k, the best it prints)."""
    usage: Usage | None = None
    for event in json_lines(analytics):
        props = event.get("properties")
        if event.get("event") == "message_send" and isinstance(props, dict):
            usage = usage or Usage()
            usage.input_tokens += as_int(props.get("prompt_tokens"))
            usage.output_tokens += as_int(props.get("completion_tokens"))
    if usage is not None:
        return usage
    for line in stdout.splitlines():
        found = _AIDER_TOKENS.match(line.strip())
        if found:
            usage = usage or Usage()
            usage.input_tokens += _kilo(found.group(1), found.group(2))
            usage.output_tokens += _kilo(found.group(3), found.group(4))
    return usage


def _aider_error(stdout: str) -> tuple[str, str | None] | None:
    """The last `litellm.<Error>: …` Aider printed, with the lines that explain it, and its kind."""
    lines = [ANSI.sub("", line).rstrip() for line in stdout.splitlines()]
    found: tuple[str, str | None] | None = None
    for i, line in enumerate(lines):
        error = _AIDER_ERROR.match(line)
        if not error:
            continue
        text = [line]
        for follow in lines[i + 1 :]:
            if not follow.strip() or _AIDER_RETRY.match(follow) or _AIDER_ERROR.match(follow):
                break
            text.append(follow.strip())
        detail = " ".join(text)
        found = (detail, classify_output(detail, _QUOTA) or _AIDER_KINDS.get(error.group(1)))
    return found


class AiderRetries:
    """Aider's console, a line at a time: each "Retrying in N seconds..." is one API retry,
    explained by the last `litellm.<Error>` line before it."""

    def __init__(self) -> None:
        self._last_error = ""

    def feed(self, line: str) -> BackendRetry | None:
        line = ANSI.sub("", line).strip()
        if _AIDER_ERROR.match(line):
            self._last_error = line
        found = _AIDER_RETRY.match(line)
        if not found:
            return None
        why = truncate(redact(self._last_error), 200) or "API error"
        return BackendRetry(float(found.group(1)), f"aider API retry: {why}")


def _aider_retries(stdout: str) -> list[BackendRetry]:
    reader = AiderRetries()
    return [r for r in map(reader.feed, stdout.splitlines()) if r is not None]


def parse_aider(
    stdout: str, stderr: str, code: int, classifier: Classifier, files: Mapping[str, str]
) -> AgentOutput:
    out = AgentOutput(
        usage=_aider_usage(files.get(AIDER_ANALYTICS, ""), stdout),
        retries=_aider_retries(stdout),
    )
    answer = _aider_answer(files.get(AIDER_HISTORY, ""))
    if code == 0 and answer is not None:
        out.text = answer[-MAX_ANSWER:]
        return out
    error = _aider_error(stdout)
    if error is not None:
        out.error = agent_failure(classifier, code, error[0], error[1])
    elif code == 0:
        out.error = ProviderError(
            f"{classifier.program} exited without an answer: "
            f"{truncate(redact(ANSI.sub('', stdout + stderr).strip()[-TAIL:]), MESSAGE)}",
            hint="the aider preset reads the answer from --llm-history-file {output_dir}/"
            f"{AIDER_HISTORY}; keep it in your template",
        )
    else:
        out.error = plain_failure(ANSI.sub("", stdout), ANSI.sub("", stderr), code, classifier)
    return out
