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
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.providers.base import ProviderAuthError, ProviderConfigError, ProviderError, Usage
from ai_sdlc.providers.errors_map import (
    DEFAULT_OUTPUT_PATTERNS,
    classify_output,
    error_for_kind,
    redact,
)
from ai_sdlc.providers.tools import truncate

#: Output formats a preset or `ai.command.output` may name.
OUTPUT_FORMATS = ("text", "codex-jsonl", "gemini-json", "aider", "gemini-jsonl", "claude-json")

MAX_ANSWER = 1_000_000
_TAIL = 4000
_MESSAGE = 300
_RECONNECT = re.compile(r"^\s*Reconnecting\.\.\.\s*(\d+)\s*/\s*(\d+)", re.IGNORECASE)


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
        return _aider(stdout, stderr, returncode, classifier, files or {})
    if fmt == "codex-jsonl":
        return _codex(stdout, stderr, returncode, classifier)
    if fmt == "gemini-json":
        return _gemini(stdout, stderr, returncode, classifier)
    if fmt == "gemini-jsonl":
        return _gemini_stream(stdout, stderr, returncode, classifier)
    if fmt == "claude-json":
        return _claude(stdout, stderr, returncode, classifier)
    if fmt != "text":
        raise ValueError(f"unknown output format {fmt!r}")
    if returncode == 0:
        return AgentOutput(text=stdout[-MAX_ANSWER:])
    return AgentOutput(error=_plain_failure(stdout, stderr, returncode, classifier))


def _plain_failure(stdout: str, stderr: str, code: int, classifier: Classifier) -> ProviderError:
    text = redact(f"{stdout[-_TAIL:]}\n{stderr[-_TAIL:]}".strip())
    message = (
        f"agent {classifier.program!r} exited with code {code}: "
        f"{truncate(text, _MESSAGE) or 'no output'}"
    )
    return classifier.error(message, text, code, None)


def _failure(
    classifier: Classifier, code: int, detail: str, hint: str | None = None
) -> ProviderError:
    detail = redact(detail.strip())
    message = (
        f"{classifier.program} failed (exit code {code}): "
        f"{truncate(detail, _MESSAGE) or 'no output'}"
    )
    return classifier.error(message, detail, code, hint)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- codex exec --json -----------------------------------------------------------------------


def _json_lines(text: str) -> Iterator[dict[str, Any]]:
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


def _codex(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    out = AgentOutput()
    answer: str | None = None
    plan: str | None = None
    completed = False
    failure: str | None = None
    last_error: str | None = None
    for event in _json_lines(stdout):
        kind = event.get("type")
        if kind == "error":
            retry = _codex_retry(event)
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
                out.usage = Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))
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
    detail = failure or last_error or f"{stderr[-_TAIL:]}\n{stdout[-_TAIL:]}"
    out.error = _failure(classifier, code, detail, classify_output(detail, _CODEX_KINDS))
    return out


#: Codex's words for a failure whose status it does not print (a 5xx it gave up on).
_CODEX_KINDS = (
    (r"experiencing high demand|server is busy", "overloaded"),
    (r"stream (disconnected|closed) before", "server"),
)


def _codex_retry(event: Mapping[str, Any]) -> BackendRetry | None:
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
        usage.input_tokens += _int(tokens.get("prompt"))
        usage.output_tokens += _int(tokens.get("candidates")) + _int(tokens.get("thoughts"))
        api = model.get("api") if isinstance(model.get("api"), dict) else {}
        assert isinstance(api, dict)
        errors = _int(api.get("totalErrors"))
        by_type = api.get("errorsByType")
        types = (
            ", ".join(f"{k} x{_int(v)}" for k, v in by_type.items())
            if isinstance(by_type, dict) and by_type
            else "API error"
        )
        for number in range(1, errors + 1):
            retries.append(
                BackendRetry(0.0, f"gemini API retry {number}/{errors} ({name}: {types})")
            )
    return usage, retries


def _gemini(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
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
        return AgentOutput(error=_plain_failure(stdout, stderr, code, classifier))
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
    message = str(error.get("message") or "") or f"{stderr[-_TAIL:]}\n{stdout[-_TAIL:]}"
    label = f"{error_type}: {message}" if error_type else message
    out.error = _failure(classifier, code, label, hint)
    return out


# --- aider ----------------------------------------------------------------------------------

#: The files the aider preset asks Aider to write into the private output folder.
AIDER_HISTORY = "llm-history.txt"
AIDER_ANALYTICS = "analytics.jsonl"

# --- claude -p --output-format json ----------------------------------------------------------


def _claude(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    """`claude -p --output-format json`: one `result` object (the stream's last event): the
    answer, Claude Code's own usage, `is_error` and the HTTP status of a failed API call."""
    result = next(
        (e for e in reversed(list(_json_lines(stdout))) if e.get("type") == "result"), None
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
        return AgentOutput(error=_plain_failure(stdout, stderr, code, classifier))
    out = AgentOutput()
    usage = result.get("usage")
    if isinstance(usage, dict):
        out.usage = Usage(
            sum(
                _int(usage.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            ),
            _int(usage.get("output_tokens")),
        )
    if not result.get("is_error") and code == 0:
        out.text = str(result.get("result") or "")[-MAX_ANSWER:]
        return out
    status = result.get("api_error_status")
    kind = _http_kind(status if isinstance(status, int) else None)
    detail = str(result.get("result") or result.get("subtype") or "") or stderr[-_TAIL:]
    out.error = _failure(classifier, code, detail, kind)
    return out


# --- gemini --output-format stream-json -------------------------------------------------------

#: Gemini CLI's own retry, logged on stderr (its retryWithBackoff): "Attempt 2 failed with
#: status 503. Retrying with backoff...", "... failed with 429 error (no Retry-After header)".
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


class _GeminiRetries:
    """Gemini CLI's retry log lines, one line at a time (a retry's message may span lines)."""

    def __init__(self) -> None:
        self._failed: tuple[str, str] | None = None  # attempt number, first line of the message

    def feed(self, line: str) -> BackendRetry | None:
        line = _ANSI.sub("", line).strip()
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
    reader = _GeminiRetries()
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
    return _http_kind(int(found.group(1)) if found else None)


def _http_kind(status: int | None) -> str | None:
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    if status is not None and status >= 500:
        return "server"
    return None


def _gemini_stream(stdout: str, stderr: str, code: int, classifier: Classifier) -> AgentOutput:
    """`gemini --output-format stream-json`, its stderr merged in (the preset does): JSON
    events (`message` deltas, `tool_use`, `result` with `stats`) among its log lines. The
    answer is the assistant's text after its last tool call; its retries are its log lines."""
    text = _ANSI.sub("", f"{stdout}\n{stderr}")
    out = AgentOutput(retries=_gemini_retries(text))
    answer: list[str] = []
    result: dict[str, Any] | None = None
    for event in _json_lines(text):
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            answer.append(str(event.get("content") or ""))
        elif kind == "tool_use":
            answer = []
        elif kind == "result":
            result = event
    stats = result.get("stats") if result is not None else None
    if isinstance(stats, dict):
        out.usage = Usage(_int(stats.get("input_tokens")), _int(stats.get("output_tokens")))
    if result is not None and result.get("status") == "success" and code == 0:
        out.text = "".join(answer)[-MAX_ANSWER:]
        return out
    logs = "\n".join(line for line in text.splitlines() if not line.startswith("{"))
    if code == _GEMINI_UNTRUSTED:
        out.error = ProviderConfigError(
            f"{classifier.program} refused to run in an untrusted folder (exit code 55): "
            + truncate(redact(logs.strip()), _MESSAGE),
            hint=_untrusted_hint(classifier.workspace),
        )
        return out
    if code == _GEMINI_AUTH_SETUP or "Invalid auth method" in logs:
        out.error = ProviderAuthError(
            f"{classifier.program} has no usable auth method (exit code {code}): "
            + truncate(redact(logs.strip()), _MESSAGE),
            hint='set security.auth.selectedType in ~/.gemini/settings.json (e.g. "gemini-api-key"'
            " with GEMINI_API_KEY set), or log in once with `gemini`",
        )
        return out
    error = result.get("error") if result is not None else None
    message = str(error.get("message") or "") if isinstance(error, dict) else ""
    detail = message or logs.strip()[-_TAIL:]
    out.error = _failure(classifier, code, detail, _gemini_status_kind(detail))
    return out


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
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
    for event in _json_lines(analytics):
        props = event.get("properties")
        if event.get("event") == "message_send" and isinstance(props, dict):
            usage = usage or Usage()
            usage.input_tokens += _int(props.get("prompt_tokens"))
            usage.output_tokens += _int(props.get("completion_tokens"))
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
    lines = [_ANSI.sub("", line).rstrip() for line in stdout.splitlines()]
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


class LiveRetries:
    """Reads an agent's stdout a line at a time while it runs: each retry it announces."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.count = 0
        self._last_error = ""
        self._gemini = _GeminiRetries()

    def feed(self, line: str) -> BackendRetry | None:
        retry = None
        if self.fmt == "codex-jsonl" and line.lstrip().startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = None
            retry = _codex_retry(event) if isinstance(event, dict) else None
        elif self.fmt == "gemini-jsonl":
            retry = self._gemini.feed(line)
        elif self.fmt == "aider":
            line = _ANSI.sub("", line).strip()
            if _AIDER_ERROR.match(line):
                self._last_error = line
            found = _AIDER_RETRY.match(line)
            if found:
                why = truncate(redact(self._last_error), 200) or "API error"
                retry = BackendRetry(float(found.group(1)), f"aider API retry: {why}")
        if retry is not None:
            self.count += 1
        return retry


def _aider_retries(stdout: str) -> list[BackendRetry]:
    reader = LiveRetries("aider")
    return [r for r in map(reader.feed, stdout.splitlines()) if r is not None]


def _aider(
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
        out.error = _failure(classifier, code, error[0], error[1])
    elif code == 0:
        out.error = ProviderError(
            f"{classifier.program} exited without an answer: "
            f"{truncate(redact(_ANSI.sub('', stdout + stderr).strip()[-_TAIL:]), _MESSAGE)}",
            hint="the aider preset reads the answer from --llm-history-file {output_dir}/"
            f"{AIDER_HISTORY}; keep it in your template",
        )
    else:
        out.error = _plain_failure(_ANSI.sub("", stdout), _ANSI.sub("", stderr), code, classifier)
    return out
