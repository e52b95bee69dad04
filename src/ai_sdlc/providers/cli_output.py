"""What a CLI agent printed → its answer, its real token usage, its own retries, or the error.

The `command` provider runs an agent to completion and hands its stdout, stderr and exit code
here. A preset (or `ai.command.output`) names how to read them:

  text         stdout is the answer. A non-zero exit is a failure, classified by the configured
               exit codes, then the output patterns. No usage: the caller estimates it.
  codex-jsonl  `codex exec --json`: one JSON event a line (codex-rs/exec/src/exec_events.rs).
               The answer is the last `item.completed` agent_message, usage comes from
               `turn.completed` (`input_tokens` includes `cached_input_tokens`), a failure is a
               `turn.failed` (or a fatal `error` event) with its message. Codex's own stream
               retries arrive as `error` events "Reconnecting... 2/5 (…)": each is a retry.
  gemini-jsonl `gemini --output-format stream-json` (the gemini preset), stderr merged in: its
               retry log lines ("Attempt 2 failed with status 503. Retrying…") are counted as
               they are printed, usage is the `result` event's `stats`, the answer the
               assistant's text after its last tool call; exit 55 (untrusted folder) and 41 (no
               auth method) are set-up errors with a hint (exit 4), never raw ANSI.
  gemini-json  `gemini --output-format json`: one JSON object `{session_id, response, stats,
               error}` (packages/core/src/output/types.ts), the error form on stderr with exit
               code 1 or the error's own code. Usage sums `stats.models.*.tokens` (prompt; and
               candidates + thoughts as output). `stats.models.*.api.totalErrors` in a session
               that still answered are API calls Gemini CLI retried by itself: each is a retry.
  aider        Aider 0.86 (`--no-pretty`), which exits 0 even when its API call failed. Its
               stdout is a console (banner, warnings, the answer printed again), so the answer
               is the last `LLM RESPONSE` of its `--llm-history-file`, the usage the
               `message_send` events of its `--analytics-log` (the API's own counts), else its
               `Tokens: … sent, … received.` lines. No answer means the run failed: the
               `litellm.<Error>` line it printed says why. Each "Retrying in N seconds..." line
               is one API retry it made by itself.

`LiveRetries` reads stdout line by line while the agent runs, so each retry it prints is
counted at once (the global limit can stop the agent midway); `parse_output` still returns
every retry, and the caller counts those the live reader did not.

Retries are handed back, not reported here: the provider passes each to
`request.on_backend_retry`, so they count as `api_retry` recoveries like Claude Code's.
Error messages are redacted before they go anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ai_sdlc.providers.cli_formats.aider import (
    AIDER_ANALYTICS,
    AIDER_HISTORY,
    AiderRetries,
    parse_aider,
)
from ai_sdlc.providers.cli_formats.claude import parse_claude
from ai_sdlc.providers.cli_formats.codex import codex_retry, parse_codex
from ai_sdlc.providers.cli_formats.common import (
    MAX_ANSWER,
    AgentOutput,
    BackendRetry,
    Classifier,
    plain_failure,
)
from ai_sdlc.providers.cli_formats.gemini_json import parse_gemini
from ai_sdlc.providers.cli_formats.gemini_stream import GeminiRetries, parse_gemini_stream

__all__ = [
    "AIDER_ANALYTICS",
    "AIDER_HISTORY",
    "MAX_ANSWER",
    "OUTPUT_FORMATS",
    "AgentOutput",
    "BackendRetry",
    "Classifier",
    "LiveRetries",
    "parse_output",
]

#: Output formats a preset or `ai.command.output` may name.
OUTPUT_FORMATS = ("text", "codex-jsonl", "gemini-json", "aider", "gemini-jsonl", "claude-json")


def parse_output(
    fmt: str,
    stdout: str,
    stderr: str,
    returncode: int,
    classifier: Classifier,
    files: Mapping[str, str] | None = None,
) -> AgentOutput:
    """Read one finished agent run in format `fmt` (one of OUTPUT_FORMATS); `files` are the
    texts the agent wrote into its private output folder, by name."""
    if fmt == "aider":
        return parse_aider(stdout, stderr, returncode, classifier, files or {})
    if fmt == "codex-jsonl":
        return parse_codex(stdout, stderr, returncode, classifier)
    if fmt == "gemini-json":
        return parse_gemini(stdout, stderr, returncode, classifier)
    if fmt == "gemini-jsonl":
        return parse_gemini_stream(stdout, stderr, returncode, classifier)
    if fmt == "claude-json":
        return parse_claude(stdout, stderr, returncode, classifier)
    if fmt != "text":
        raise ValueError(f"unknown output format {fmt!r}")
    if returncode == 0:
        return AgentOutput(text=stdout[-MAX_ANSWER:])
    return AgentOutput(error=plain_failure(stdout, stderr, returncode, classifier))


class LiveRetries:
    """Reads an agent's stdout a line at a time while it runs: each retry it announces."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.count = 0
        self._gemini = GeminiRetries()
        self._aider = AiderRetries()

    def feed(self, line: str) -> BackendRetry | None:
        retry = None
        if self.fmt == "codex-jsonl" and line.lstrip().startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = None
            retry = codex_retry(event) if isinstance(event, dict) else None
        elif self.fmt == "gemini-jsonl":
            retry = self._gemini.feed(line)
        elif self.fmt == "aider":
            retry = self._aider.feed(line)
        if retry is not None:
            self.count += 1
        return retry
