"""`gemini --output-format stream-json` with its stderr merged in: JSON events among its
retry log lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ai_sdlc.providers.base import ProviderAuthError, ProviderConfigError, Usage
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
    http_kind,
    json_lines,
)
from ai_sdlc.providers.errors_map import redact
from ai_sdlc.providers.tools import truncate

_GEMINI_RETRY = re.compile(
    r"^Attempt (\d+) failed(?: with status (\d+)| with (\w+) error)?.*Retrying"
)
#: A refusal carrying the API's RetryInfo is logged as "Attempt 1 failed: <the API's message,
#: often several lines>" and, lines later, "Suggested retry after 0.1s.. Retrying after 5882ms...".
_GEMINI_FAILED = re.compile(r"^Attempt (\d+) failed: (.*)")
_GEMINI_AFTER = re.compile(r"Retrying after (\d+)ms")
_GEMINI_TAIL = re.compile(r"\s*(Suggested retry after|Retrying after).*$")
#: Exit codes of Gemini CLI that are set-up problems, never worth a retry.
_GEMINI_UNTRUSTED = 55
_GEMINI_AUTH_SETUP = 41
_GEMINI_STATUS = re.compile(r'"code"\s*:\s*(\d{3})')


class GeminiRetries:
    """Gemini CLI's retry log lines, one line at a time (a retry's message may span lines)."""

    def __init__(self) -> None:
        self._failed: tuple[str, str] | None = None  # attempt number, first line of the message

    def feed(self, line: str) -> BackendRetry | None:
        line = ANSI.sub("", line).strip()
        failed = _GEMINI_FAILED.match(line)
        found = _GEMINI_RETRY.match(line)
        if found is not None and failed is None:  # "Attempt n failed with status s. Retrying"
            self._failed = None
            status = found.group(2) or found.group(3)
            why = f" after HTTP {status}" if status else ""
            return BackendRetry(0.0, f"gemini API retry {found.group(1)}{why}")
        if failed is not None:
            self._failed = (failed.group(1), failed.group(2))
        after = _GEMINI_AFTER.search(line)
        if self._failed is not None and after is not None:
            number, message = self._failed
            self._failed = None
            why = truncate(redact(_GEMINI_TAIL.sub("", message).strip(" .")), 200)
            return BackendRetry(int(after.group(1)) / 1000, f"gemini API retry {number}: {why}")
        if line.startswith("{") or "Max attempts reached" in line:
            self._failed = None  # an event, or the last attempt: no retry follows
        return None


def _gemini_retries(text: str) -> list[BackendRetry]:
    reader = GeminiRetries()
    return [r for r in map(reader.feed, text.splitlines()) if r is not None]


def _untrusted_hint(workspace: str | None) -> str:
    """Story worktrees inside a trusted project inherit its trust; ones that git.worktrees_dir
    puts elsewhere do not, so the hint names the folder that holds them."""
    where = "the project folder"
    if workspace:
        where = f"{Path(workspace).parent} (the folder holding the story worktrees)"
    return (
        f"trust {where} in Gemini CLI: add it to ~/.gemini/trustedFolders.json as "
        '"TRUST_FOLDER", or run `gemini` in it once and trust it; worktrees inside a trusted '
        "project inherit its trust, those git.worktrees_dir puts outside it do not; or set "
        "GEMINI_CLI_TRUST_WORKSPACE=true for ai-sdlc's runs"
    )


def _gemini_status_kind(text: str) -> str | None:
    """The kind of the HTTP status an API error's JSON names (`"code": 503`), if any."""
    found = _GEMINI_STATUS.search(text)
    return http_kind(int(found.group(1)) if found else None)


def parse_gemini_stream(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    """`gemini --output-format stream-json`, its stderr merged in (the preset does): JSON
    events (`message` deltas, `tool_use`, `result` with `stats`) among its log lines. The
    answer is the assistant's text after its last tool call; its retries are its log lines."""
    text = ANSI.sub("", f"{stdout}\n{stderr}")
    out = AgentOutput(retries=_gemini_retries(text))
    answer: list[str] = []
    result: dict[str, Any] | None = None
    for event in json_lines(text):
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            answer.append(str(event.get("content") or ""))
        elif kind == "tool_use":
            answer = []
        elif kind == "result":
            result = event
    stats = result.get("stats") if result is not None else None
    if isinstance(stats, dict):
        out.usage = Usage(as_int(stats.get("input_tokens")), as_int(stats.get("output_tokens")))
    if result is not None and result.get("status") == "success" and code == 0:
        out.text = "".join(answer)[-MAX_ANSWER:]
        return out
    logs = "\n".join(line for line in text.splitlines() if not line.startswith("{"))
    if code == _GEMINI_UNTRUSTED:
        out.error = ProviderConfigError(
            f"{classifier.program} refused to run in an untrusted folder (exit code 55): "
            + truncate(redact(logs.strip()), MESSAGE),
            hint=_untrusted_hint(classifier.workspace),
        )
        return out
    if code == _GEMINI_AUTH_SETUP or "Invalid auth method" in logs:
        out.error = ProviderAuthError(
            f"{classifier.program} has no usable auth method (exit code {code}): "
            + truncate(redact(logs.strip()), MESSAGE),
            hint='set security.auth.selectedType in ~/.gemini/settings.json (e.g. "gemini-api-key"'
            " with GEMINI_API_KEY set), or log in once with `gemini`",
        )
        return out
    error = result.get("error") if result is not None else None
    message = str(error.get("message") or "") if isinstance(error, dict) else ""
    detail = message or logs.strip()[-TAIL:]
    out.error = agent_failure(classifier, code, detail, _gemini_status_kind(detail))
    return out
