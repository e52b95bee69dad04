"""The `claude-json` and `gemini-jsonl` output formats, on the shapes the real Claude Code 2.1
and Gemini CLI 0.61 print (seen in tests/test_realcli_*.py against the fake servers)."""

from __future__ import annotations

import json

from ai_sdlc.providers.base import (
    ProviderAuthError,
    ProviderConfigError,
    TransientProviderError,
)
from ai_sdlc.providers.cli_output import Classifier, LiveRetries, parse_output

GEMINI = Classifier("gemini")
CLAUDE = Classifier("claude")
UNTRUSTED = (
    "\x1b[31mGemini CLI is not running in a trusted directory. To proceed, either use "
    "`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust "
    "this directory in interactive mode.\x1b[0m\n"
)


def lines(*events: dict[str, object]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_gemini_stream_answer_usage_and_logged_retries() -> None:
    stdout = lines(
        {"type": "init", "model": "m"},
        {"type": "message", "role": "user", "content": "## Your task (implement)"},
        {"type": "message", "role": "assistant", "content": "Writing.", "delta": True},
        {"type": "tool_use", "tool_name": "write_file", "parameters": {}},
        {"type": "tool_result", "status": "success"},
        {"type": "message", "role": "assistant", "content": "Done", "delta": True},
        {"type": "message", "role": "assistant", "content": " here.", "delta": True},
        {
            "type": "result",
            "status": "success",
            "stats": {"input_tokens": 2000, "output_tokens": 100},
        },
    )
    logs = (
        "Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {}\n"
        "Attempt 2 failed: quota. Retrying after 1200ms...\n"
        # a refusal with the API's RetryInfo, as Gemini CLI 0.61 logs it: over two lines
        "Attempt 3 failed: Resource has been exhausted (e.g. check quota).\n"
        "Suggested retry after 0.1s.. Retrying after 5882ms...\n"
        # the last attempt is no retry
        "Attempt 4 failed: Resource has been exhausted.\nMax attempts reached\n"
    )
    out = parse_output("gemini-jsonl", logs + stdout, "", 0, GEMINI)
    assert out.error is None and out.text == "Done here."
    assert out.usage is not None
    assert (out.usage.input_tokens, out.usage.output_tokens) == (2000, 100)
    assert [r.reason for r in out.retries] == [
        "gemini API retry 1 after HTTP 429",
        "gemini API retry 2: quota",
        "gemini API retry 3: Resource has been exhausted (e.g. check quota)",
    ]
    assert [r.delay for r in out.retries] == [0.0, 1.2, 5.882]
    live = LiveRetries("gemini-jsonl")
    seen = [live.feed(line) for line in (logs + stdout).splitlines(keepends=True)]
    assert [r.reason for r in seen if r] == [r.reason for r in out.retries]


def test_gemini_untrusted_folder_is_a_set_up_error_without_ansi() -> None:
    out = parse_output("gemini-jsonl", UNTRUSTED, "", 55, GEMINI)
    assert isinstance(out.error, ProviderConfigError) and out.error.exit_code == 4
    assert "\x1b" not in out.error.message and "trustedFolders.json" in str(out.error.hint)


def test_gemini_without_an_auth_method_says_which_setting() -> None:
    error = (
        '{\n  "error": {"type": "Error", "message": "Invalid auth method selected.", "code": 41}\n}'
    )
    out = parse_output("gemini-jsonl", error, "", 41, GEMINI)
    assert isinstance(out.error, ProviderAuthError)
    assert "security.auth.selectedType" in str(out.error.hint)


def test_gemini_api_failure_in_its_result_is_typed() -> None:
    stdout = lines(
        {
            "type": "result",
            "status": "error",
            "error": {"type": "unknown", "message": '[API Error: {"error":{"code":503}}]'},
        }
    )
    out = parse_output("gemini-jsonl", stdout, "", 1, GEMINI)
    assert isinstance(out.error, TransientProviderError) and out.error.kind == "server"
    auth = stdout.replace("503", "401")
    assert isinstance(parse_output("gemini-jsonl", auth, "", 145, GEMINI).error, ProviderAuthError)


def test_claude_json_usage_and_errors_from_its_result() -> None:
    ok = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "Plan.",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3},
    }
    out = parse_output("claude-json", json.dumps(ok), "", 0, CLAUDE)
    assert out.text == "Plan." and out.usage is not None
    assert (out.usage.input_tokens, out.usage.output_tokens) == (15, 3)
    for status, kind in ((401, ProviderAuthError), (529, TransientProviderError)):
        failed = {**ok, "is_error": True, "result": "Invalid API key", "api_error_status": status}
        error = parse_output("claude-json", json.dumps(failed), "", 1, CLAUDE).error
        assert isinstance(error, kind), error
