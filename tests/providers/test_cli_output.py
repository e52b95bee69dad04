"""`cli_output`: the answer, usage, retries and typed errors read from real CLI agents' output.

Samples follow the tools' sources: codex `exec --json` (codex-rs/exec/src/exec_events.rs and the
JSONL event processor: `error` events "Reconnecting... n/m" for its stream retries,
`turn.failed` with the final message) and Gemini CLI `--output-format json`
(packages/core/src/output/types.ts, SessionMetrics; the error form pretty-printed on stderr).
"""

from __future__ import annotations

import json

import pytest

from ai_sdlc.providers.base import (
    ProviderAuthError,
    ProviderError,
    ProviderLimitError,
    TransientProviderError,
)
from ai_sdlc.providers.cli_output import OUTPUT_FORMATS, Classifier, LiveRetries, parse_output

CODEX = Classifier("codex")
GEMINI = Classifier("gemini")
KEY = "sk-proj-" + "Zq8Xv2Lm4Np6Rt0Ws3Yu5Ab7Cd9Ef1Gh"


def jsonl(*events: dict[str, object]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


START: tuple[dict[str, object], ...] = (
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
)
DROPPED = "stream disconnected before completion: error sending request for url (https://x/v1)"


def codex_success(*extra: dict[str, object]) -> str:
    return jsonl(
        *START,
        *extra,
        {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Hm**"}},
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "hello.py\n",
                "exit_code": 0,
                "status": "completed",
            },
        },
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "a"}},
        {
            "type": "item.completed",
            "item": {"id": "item_3", "type": "agent_message", "text": "Done.\nDECISION: APPROVED"},
        },
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122},
        },
    )


def test_codex_answer_is_the_last_agent_message_and_usage_is_real() -> None:
    out = parse_output("codex-jsonl", codex_success(), "", 0, CODEX)
    assert out.error is None
    assert out.text == "Done.\nDECISION: APPROVED"
    assert out.usage is not None
    assert (out.usage.input_tokens, out.usage.output_tokens) == (24763, 122)
    assert out.retries == []


def test_codex_stream_retries_are_counted_and_plain_lines_skipped() -> None:
    stdout = "warning: something on stdout\n" + codex_success(
        {"type": "error", "message": f"Reconnecting... 1/5 ({DROPPED})"},
        {"type": "error", "message": "Reconnecting... 2/5"},
        # a non-fatal warning item is not a retry
        {"type": "item.completed", "item": {"id": "w", "type": "error", "message": "heads up"}},
    )
    out = parse_output("codex-jsonl", stdout, "", 0, CODEX)
    assert out.error is None and out.text.endswith("APPROVED")
    assert [r.reason.split(":")[0] for r in out.retries] == [
        "codex API retry 1/5",
        "codex API retry 2/5",
    ]
    assert "stream disconnected" in out.retries[0].reason
    assert all(r.delay == 0.0 for r in out.retries)


def test_codex_rate_limit_is_a_retryable_rate_limit_after_its_own_retries() -> None:
    limit = "exceeded retry limit, last status: 429 Too Many Requests"
    stdout = jsonl(
        *START,
        {"type": "error", "message": f"Reconnecting... 1/5 ({DROPPED})"},
        {"type": "error", "message": limit},
        {"type": "turn.failed", "error": {"message": limit}},
    )
    out = parse_output("codex-jsonl", stdout, "", 1, CODEX)
    assert isinstance(out.error, TransientProviderError)
    assert out.error.kind == "rate_limit"
    assert "429 Too Many Requests" in out.error.message and "exit code 1" in out.error.message
    assert len(out.retries) == 1  # its own retry happened before the failure: still counted


def test_codex_usage_limit_is_a_limit_and_other_failures_keep_their_message() -> None:
    usage = "You've hit your usage limit. Upgrade to Pro or try again in 2 hours."
    out = parse_output(
        "codex-jsonl",
        jsonl(*START, {"type": "turn.failed", "error": {"message": usage}}),
        "",
        1,
        CODEX,
    )
    assert isinstance(out.error, ProviderLimitError)
    odd = parse_output(
        "codex-jsonl",
        jsonl(*START, {"type": "error", "message": f"model frobnicated; key {KEY}"}),
        "",
        1,
        CODEX,
    )
    assert type(odd.error) is ProviderError
    assert "model frobnicated" in odd.error.message and KEY not in odd.error.message
    # configured patterns come before the defaults
    custom = Classifier("codex", patterns=(("frobnicated", "overloaded"),))
    again = parse_output(
        "codex-jsonl", jsonl(*START, {"type": "error", "message": "frobnicated"}), "", 1, custom
    )
    assert isinstance(again.error, TransientProviderError) and again.error.kind == "overloaded"


def test_codex_without_json_events_says_what_to_fix() -> None:
    out = parse_output("codex-jsonl", "just some text\n", "", 0, CODEX)
    assert type(out.error) is ProviderError
    assert "turn.completed" in out.error.message and "--json" in str(out.error.hint)
    crashed = parse_output("codex-jsonl", "", "Error: unauthorized (401)\n", 1, CODEX)
    assert isinstance(crashed.error, ProviderAuthError)
    # a completed turn but a non-zero exit is still a failure
    late = parse_output("codex-jsonl", codex_success(), "panicked at shutdown", 101, CODEX)
    assert late.error is not None and "exit code 101" in late.error.message


def test_codex_early_item_type_field_and_plan_fallback() -> None:
    early = jsonl(
        {
            "type": "item.completed",
            "item": {"id": "0", "item_type": "assistant_message", "text": "x"},
        },
        {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}},
    )
    assert parse_output("codex-jsonl", early, "", 0, CODEX).text == "x"
    plan_only = jsonl(
        {"type": "item.completed", "item": {"id": "0", "type": "plan", "text": "1. do it"}},
        {"type": "turn.completed", "usage": {}},
    )
    out = parse_output("codex-jsonl", plan_only, "", 0, CODEX)
    assert out.text == "1. do it" and out.usage is not None and out.usage.total_tokens == 0


def gemini_stats(errors: int = 0) -> dict[str, object]:
    def model(prompt: int, candidates: int, thoughts: int, errs: int) -> dict[str, object]:
        return {
            "api": {
                "totalRequests": 3 + errs,
                "totalErrors": errs,
                "totalLatencyMs": 8123,
                "errorsByType": {"RetryableQuotaError": errs} if errs else {},
            },
            "tokens": {
                "input": prompt - 1000,
                "prompt": prompt,
                "candidates": candidates,
                "total": prompt + candidates + thoughts,
                "cached": 1000,
                "thoughts": thoughts,
                "tool": 0,
            },
            "roles": {},
        }

    return {
        "models": {
            "gemini-2.5-pro": model(12000, 400, 250, errors),
            "gemini-2.5-flash-lite": model(900, 30, 0, 0),
        },
        "tools": {"totalCalls": 2, "totalSuccess": 2, "totalFail": 0, "byName": {}},
        "files": {"totalLinesAdded": 3, "totalLinesRemoved": 0},
    }


def test_gemini_response_and_usage_summed_over_models() -> None:
    stdout = json.dumps(
        {"session_id": "abc", "response": "Plan:\n1. x", "stats": gemini_stats()}, indent=2
    )
    out = parse_output("gemini-json", stdout, "", 0, GEMINI)
    assert out.error is None and out.text == "Plan:\n1. x"
    assert out.usage is not None
    assert out.usage.input_tokens == 12900
    assert out.usage.output_tokens == 400 + 250 + 30  # candidates + thoughts
    assert out.retries == []


def test_gemini_api_errors_in_an_answered_session_are_its_own_retries() -> None:
    stdout = json.dumps({"response": "ok", "stats": gemini_stats(errors=2)}, indent=2)
    out = parse_output("gemini-json", stdout, "[WARN] noise\n", 0, GEMINI)
    assert out.error is None
    assert [r.reason for r in out.retries] == [
        "gemini API retry 1/2 (gemini-2.5-pro: RetryableQuotaError x2)",
        "gemini API retry 2/2 (gemini-2.5-pro: RetryableQuotaError x2)",
    ]


def gemini_error(kind: str, message: str, code: object = None) -> str:
    error: dict[str, object] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    body = json.dumps({"session_id": "abc", "error": error}, indent=2)
    return f"[WARN] Skipping unreadable directory: /x\n{body}\n"


@pytest.mark.parametrize(
    ("kind", "message", "code", "expected"),
    [
        (
            "RetryableQuotaError",
            "Resource has been exhausted (e.g. check quota).",
            429,
            "rate_limit",
        ),
        ("ApiError", "got status: 429 Too Many Requests", 429, "rate_limit"),
        ("ApiError", "got status: 503 Service Unavailable", 503, "server"),
        ("TerminalQuotaError", "You have exhausted your daily quota on this model.", 429, "limit"),
        ("FatalAuthenticationError", "Please set an Auth method", 41, "auth"),
        ("FatalTurnLimitedError", "Reached max session turns for this session.", 53, None),
    ],
)
def test_gemini_error_form_on_stderr_is_typed(
    kind: str, message: str, code: int, expected: str | None
) -> None:
    out = parse_output("gemini-json", "", gemini_error(kind, message, code), code & 0xFF, GEMINI)
    assert out.error is not None and out.text == ""
    assert message in out.error.message and kind in out.error.message
    if expected is None:
        assert type(out.error) is ProviderError
    elif expected == "limit":
        assert isinstance(out.error, ProviderLimitError)
    elif expected == "auth":
        assert isinstance(out.error, ProviderAuthError)
    else:
        assert isinstance(out.error, TransientProviderError) and out.error.kind == expected


def test_gemini_invalid_stream_with_exit_zero_is_a_transient_failure() -> None:
    stdout = json.dumps(
        {
            "response": "",
            "stats": gemini_stats(),
            "error": {
                "type": "INVALID_STREAM",
                "message": "Model stream ended with empty response",
            },
        }
    )
    out = parse_output("gemini-json", stdout, "", 0, GEMINI)
    assert isinstance(out.error, TransientProviderError) and out.error.kind == "server"
    assert out.usage is not None  # what it used is still known


def test_gemini_without_json_is_explained_or_classified_as_text() -> None:
    out = parse_output("gemini-json", "plain answer\n", "", 0, GEMINI)
    assert type(out.error) is ProviderError and "--output-format json" in str(out.error.hint)
    failed = parse_output("gemini-json", "", f"429 Too Many Requests for key {KEY}\n", 1, GEMINI)
    assert isinstance(failed.error, TransientProviderError) and failed.error.kind == "rate_limit"
    assert KEY not in failed.error.message
    # a configured exit code wins over everything the agent said
    by_code = Classifier("gemini", exit_codes={55: "auth"})
    untrusted = parse_output(
        "gemini-json",
        "",
        gemini_error("FatalUntrustedWorkspaceError", "not a trusted directory", 55),
        55,
        by_code,
    )
    assert isinstance(untrusted.error, ProviderAuthError)


def test_text_format_is_stdout_or_a_classified_exit() -> None:
    ok = parse_output("text", "the answer\n", "progress on stderr", 0, Classifier("aider"))
    assert ok.text == "the answer\n" and ok.usage is None and ok.error is None
    limited = parse_output("text", "", "Error: rate limit reached", 1, Classifier("aider"))
    assert isinstance(limited.error, TransientProviderError)
    assert "exited with code 1" in limited.error.message
    assert set(OUTPUT_FORMATS) == {
        "text",
        "codex-jsonl",
        "gemini-json",
        "aider",
        "gemini-jsonl",
        "claude-json",
    }
    with pytest.raises(ValueError, match="unknown output format"):
        parse_output("xml", "", "", 0, Classifier("x"))


# --- aider (console and files as Aider 0.86.2 printed and wrote them against a fake server) ---

AIDER = Classifier("aider")
AIDER_BANNER = (
    "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded\n"
    "Aider v0.86.2\nModel: openai/gpt-fake with whole edit format\n"
    "Git repo: .git with 1 files\nRepo-map: using 1024 tokens, auto refresh\n\n"
)
AIDER_HISTORY = (
    "TO LLM 2026-11-26T00:24:12\n-------\nSYSTEM Act as an expert software developer.\n"
    "-------\nUSER Refine the story please.\nLLM RESPONSE 2026-11-26T00:24:15\n"
    "ASSISTANT Here is the plan.\nASSISTANT \nASSISTANT DECISION: APPROVED\n"
)
AIDER_SEND = {
    "event": "message_send",
    "properties": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290},
}


def test_aider_answer_is_its_llm_response_not_its_console() -> None:
    stdout = (
        AIDER_BANNER
        + "Here is the plan.\n\n\n\nDECISION: APPROVED\n\nTokens: 1.2k sent, 56 received.\n"
    )
    files = {"llm-history.txt": AIDER_HISTORY, "analytics.jsonl": jsonl(AIDER_SEND)}

    out = parse_output("aider", stdout, "", 0, AIDER, files)

    assert out.error is None
    assert out.text == "Here is the plan.\n\nDECISION: APPROVED"
    assert out.usage is not None
    assert (out.usage.input_tokens, out.usage.output_tokens) == (1234, 56)  # the API's counts
    # without the analytics log: Aider's own Tokens: line, the best it prints
    fallback = parse_output("aider", stdout, "", 0, AIDER, {"llm-history.txt": AIDER_HISTORY})
    assert fallback.usage is not None
    assert (fallback.usage.input_tokens, fallback.usage.output_tokens) == (1200, 56)


def test_aider_api_failure_with_exit_zero_is_a_typed_failure() -> None:
    """Aider exits 0 after a 401: no LLM response, a `litellm.AuthenticationError` line."""
    stdout = AIDER_BANNER + (
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect \n"
        "API key provided\nThe API provider is not able to authenticate you. Check your API key.\n"
    )
    history = "TO LLM 2026-11-26T00:24:42\n-------\nUSER hi\nLLM RESPONSE 2026-11-26T00:24:43\n"

    out = parse_output("aider", stdout, "", 0, AIDER, {"llm-history.txt": history})

    assert isinstance(out.error, ProviderAuthError)
    assert "Incorrect API key provided" in out.error.message
    assert "Aider v" not in out.error.message
    # a rate limit Aider gave up on is retryable; a quota is a limit
    limited = parse_output(
        "aider", "litellm.RateLimitError: RateLimitError: OpenAIException - slow down\n", "", 0,
        AIDER, {},
    )  # fmt: skip
    assert isinstance(limited.error, TransientProviderError)
    quota = parse_output(
        "aider", "litellm.RateLimitError: You exceeded your current quota\n", "", 0, AIDER, {}
    )
    assert isinstance(quota.error, ProviderLimitError)
    silent = parse_output("aider", AIDER_BANNER, "", 0, AIDER, {})
    assert silent.error is not None and "without an answer" in silent.error.message


def test_aider_retrying_lines_are_each_one_retry() -> None:
    retry = (
        "litellm.InternalServerError: InternalServerError: OpenAIException - boom\n"
        "The API provider's servers are down or overloaded.\nRetrying in 0.2 seconds...\n"
    )
    stdout = AIDER_BANNER + retry + retry.replace("0.2", "0.5") + "Here is the plan.\n"

    out = parse_output("aider", stdout, "", 0, AIDER, {"llm-history.txt": AIDER_HISTORY})

    assert [r.delay for r in out.retries] == [0.2, 0.5]
    assert all("InternalServerError" in r.reason for r in out.retries)
    live = LiveRetries("aider")
    assert [r for r in map(live.feed, stdout.splitlines()) if r] == out.retries


def test_codex_high_demand_is_overloaded() -> None:
    """What codex 0.169 says of a 500 it did not retry (request_max_retries = 0)."""
    said = "We\u2019re currently experiencing high demand, which may cause temporary errors."
    out = parse_output(
        "codex-jsonl",
        jsonl(
            *START,
            {"type": "error", "message": said},
            {"type": "turn.failed", "error": {"message": said}},
        ),
        "", 1, CODEX,
    )  # fmt: skip
    assert isinstance(out.error, TransientProviderError) and out.error.kind == "overloaded"
