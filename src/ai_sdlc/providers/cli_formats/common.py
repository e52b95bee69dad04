"""What every CLI output reader shares: the parsed result, the error classifier, the
failure messages and the small JSON/ANSI helpers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ai_sdlc.providers.base import ProviderError, Usage
from ai_sdlc.providers.errors_map import (
    DEFAULT_OUTPUT_PATTERNS,
    classify_output,
    error_for_kind,
    redact,
)
from ai_sdlc.providers.tools import truncate

MAX_ANSWER = 1_000_000
TAIL = 4000
MESSAGE = 300

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


@dataclass(frozen=True)
class BackendRetry:
    """One retry the agent made by itself: (seconds waited if known, why)."""

    delay: float
    reason: str


@dataclass
class AgentOutput:
    """One agent run, read. `error` set means the run failed (after its `retries`)."""

    text: str = ""
    usage: Usage | None = None
    retries: list[BackendRetry] = field(default_factory=list)
    error: ProviderError | None = None


@dataclass(frozen=True)
class Classifier:
    """Turns a failure into our typed error: configured exit codes first, then what the
    agent's structured error says, then the output patterns (configured before defaults)."""

    program: str
    patterns: tuple[tuple[str, str], ...] = ()
    exit_codes: Mapping[int, str] = field(default_factory=dict)
    #: The folder the agent ran in (a story worktree), for hints that name it.
    workspace: str | None = None

    def error(self, message: str, detail: str, code: int | None, hint: str | None) -> ProviderError:
        kind = (self.exit_codes.get(code) if code is not None else None) or hint
        if kind is None:
            kind = classify_output(detail, self.patterns + DEFAULT_OUTPUT_PATTERNS)
        if kind is not None:
            return error_for_kind(kind, message)
        return ProviderError(message)


def plain_failure(stdout: str, stderr: str, code: int, classifier: Classifier) -> ProviderError:
    text = redact(f"{stdout[-TAIL:]}\n{stderr[-TAIL:]}".strip())
    message = (
        f"agent {classifier.program!r} exited with code {code}: "
        f"{truncate(text, MESSAGE) or 'no output'}"
    )
    return classifier.error(message, text, code, None)


def agent_failure(
    classifier: Classifier, code: int, detail: str, hint: str | None = None
) -> ProviderError:
    detail = redact(detail.strip())
    message = (
        f"{classifier.program} failed (exit code {code}): "
        f"{truncate(detail, MESSAGE) or 'no output'}"
    )
    return classifier.error(message, detail, code, hint)


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- codex exec --json -----------------------------------------------------------------------


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects among `text`'s lines (an agent may print plain warnings too)."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


def http_kind(status: int | None) -> str | None:
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    if status is not None and status >= 500:
        return "server"
    return None
