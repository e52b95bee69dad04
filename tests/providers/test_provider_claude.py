"""The `claude` provider against a stand-in `claude` executable that speaks stream-json."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.agent_loop import AgentTurnLimitError
from ai_sdlc.providers.base import (
    AgentReportedError,
    Phase,
    ProviderAuthError,
    ProviderConfigError,
    ProviderRequest,
    TransientProviderError,
    access_for,
)
from ai_sdlc.providers.claude_provider import ClaudeProvider
from ai_sdlc.providers.tools import AccessViolationError
from tests.support.fakes.guard import RecordingGuard
from tests.support.paths import FAKES
from tests.support.waits import GUARD, NEVER, wait_until_gone

FAKE = FAKES / "fake_claude.py"


def success(text: str, *, cost: float = 0.0123) -> dict[str, Any]:
    return {
        "emit": {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": text,
            "num_turns": 2,
            "total_cost_usd": cost,
            "usage": {"input_tokens": 1200, "cache_read_input_tokens": 300, "output_tokens": 250},
        }
    }


def api_retry(attempt: int, delay_ms: int, status: int) -> dict[str, Any]:
    return {
        "emit": {
            "type": "system",
            "subtype": "api_retry",
            "attempt": attempt,
            "max_retries": 10,
            "retry_delay_ms": delay_ms,
            "error_status": status,
            "error": "Overloaded",
        }
    }


def failure(text: str, subtype: str = "error_during_execution") -> list[dict[str, Any]]:
    return [
        {"emit": {"type": "result", "subtype": subtype, "is_error": True, "result": text}},
        {"exit": 1},
    ]


class Fake:
    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin" / "claude"
        self.bin.parent.mkdir()
        self.bin.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        self.bin.chmod(0o755)
        self.script = tmp_path / "scenario.json"
        self.record = tmp_path / "record.json"
        self.ws = tmp_path / "ws"
        self.ws.mkdir()
        (self.ws / "README.md").write_text("# demo\n")

    def provider(self, steps: list[dict[str, Any]], **settings: Any) -> ClaudeProvider:
        self.script.write_text(json.dumps(steps))
        env = {
            "PATH": os.environ["PATH"],
            "FAKE_CLAUDE_SCRIPT": str(self.script),
            "FAKE_CLAUDE_RECORD": str(self.record),
        }
        claude = {"binary": str(self.bin), **settings.pop("claude", {})}
        return ClaudeProvider(self.ws, {"claude": claude, **settings}, environ=env)

    def recorded(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.record.read_text())
        return data

    def request(
        self,
        phase: Phase = Phase.IMPLEMENT,
        guard: RecordingGuard | None = None,
        timeout: float = 20.0,
        prompt: str = "Implement the story.",
    ) -> ProviderRequest:
        extra: dict[str, Any] = {}
        if guard is not None:
            extra = {
                "guard": guard,
                "on_event": guard.on_event,
                "on_backend_retry": guard.backend_retry,
            }
        return ProviderRequest(
            phase=phase,
            prompt=prompt,
            system_prompt="You are careful.",
            workspace=self.ws,
            access=access_for(phase),
            timeout=timeout,
            story_id="S-0007",
            **extra,
        )


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


def test_edit_phase_streams_events_counts_backend_retries(fake: Fake) -> None:
    target = str(fake.ws / "src.py")
    provider = fake.provider(
        [
            {
                "emit": {
                    "type": "assistant",
                    "message": {"content": [{"type": "text", "text": "Writing it."}]},
                }
            },
            api_retry(1, 500, 529),
            api_retry(2, 1000, 429),
            {"tool": "Write", "input": {"file_path": target, "content": "X = 1\n"}},
            success("All done."),
        ]
    )
    guard = RecordingGuard()
    result = provider.execute(fake.request(guard=guard))

    assert result.text == "All done."
    assert (fake.ws / "src.py").read_text() == "X = 1\n"
    assert result.files_changed == ["src.py"]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (1500, 250)
    assert result.usage.cost_usd == pytest.approx(0.0123)  # as reported: no price configured
    assert [(r["recovery"], r["delay"]) for r in guard.recoveries] == [
        ("api_retry", 0.5),
        ("api_retry", 1.0),
    ]
    assert "HTTP 529" in guard.recoveries[0]["reason"]
    names = guard.event_names()
    assert names[:2] == ["agent_started", "claude_init"]
    assert {"backend_retry", "tool_call", "agent_text", "agent_turn"} <= set(names)

    argv = fake.recorded()["argv"]
    assert argv[:6] == ["-p", "--output-format", "stream-json", "--verbose", "--max-turns", "40"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert "Write" in argv[argv.index("--tools") + 1].split(",")
    assert "Bash" in argv[argv.index("--disallowedTools") + 1].split(",")
    assert argv[argv.index("--append-system-prompt") + 1] == "You are careful."
    assert fake.recorded()["stdin"] == "Implement the story."
    assert "Implement the story." not in argv


def test_read_only_phase_gets_read_tools_only(fake: Fake) -> None:
    target = str(fake.ws / "README.md")
    provider = fake.provider(
        [
            {"tool": "Write", "input": {"file_path": target, "content": "pwned"}},
            success("Review done.\nDECISION: APPROVED"),
        ]
    )
    result = provider.execute(fake.request(Phase.REVIEW))
    assert (fake.ws / "README.md").read_text() == "# demo\n"
    assert result.files_changed == []
    argv = fake.recorded()["argv"]
    assert argv[argv.index("--tools") + 1] == "Read,Glob,Grep"
    denied = argv[argv.index("--disallowedTools") + 1].split(",")
    assert {"Write", "Edit", "NotebookEdit", "Bash", "WebFetch"} <= set(denied)
    assert "LS" not in argv and "MultiEdit" not in ",".join(argv)  # unknown to Claude Code 2.1
    assert argv[argv.index("--permission-mode") + 1] == "default"


def test_a_read_only_phase_that_changes_files_fails(fake: Fake) -> None:
    provider = fake.provider(
        [
            {"rogue_write": {"path": "README.md", "content": "sneaky"}},
            success("nothing to see"),
        ]
    )
    with pytest.raises(AccessViolationError, match=r"README\.md"):
        provider.execute(fake.request(Phase.PLAN))


def test_backend_retries_past_the_global_limit_stop_the_session(fake: Fake) -> None:
    provider = fake.provider(
        [*[api_retry(i, 10, 529) for i in range(1, 6)], {"sleep": NEVER}, success("never")]
    )
    guard = RecordingGuard(limit=3)
    started = time.monotonic()
    with pytest.raises(StoryBlockedError):
        provider.execute(fake.request(guard=guard))
    assert time.monotonic() - started < GUARD  # stopped, not left to its endless sleep
    assert len(guard.recoveries) == 3
    wait_until_gone(fake.recorded()["pid"], "the stopped claude session")


def test_the_phase_time_limit_kills_claude(fake: Fake) -> None:
    """The session sleeps `NEVER` seconds: only the kill ends it within the guard. The 2 s
    limit leaves the fake time to record its pid on a loaded machine (the handshake)."""
    provider = fake.provider([{"sleep": NEVER}, success("too late")])
    guard = RecordingGuard(limit=2)
    started = time.monotonic()
    # A phase timeout is transient: retried under the guard, each retry counted.
    with pytest.raises(StoryBlockedError):
        provider.execute(fake.request(guard=guard, timeout=2.0))
    assert [r["kind"] for r in guard.recoveries] == ["timeout", "timeout"]
    assert time.monotonic() - started < GUARD  # two limits, not the endless sleep
    wait_until_gone(fake.recorded()["pid"], "the timed-out claude session")


def test_a_chatty_session_still_stops_at_the_time_limit(fake: Fake) -> None:
    chatter = {
        "emit": {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": "still thinking"}]},
        }
    }
    provider = fake.provider([{"chatter": {"emit": chatter["emit"], "every": 0.02}}])
    guard = RecordingGuard(limit=1)
    started = time.monotonic()
    with pytest.raises(StoryBlockedError):
        provider.execute(fake.request(guard=guard, timeout=0.6))
    assert [r["kind"] for r in guard.recoveries] == ["timeout"]
    assert time.monotonic() - started < GUARD  # the 0.6 s limit, not endless chatter


@pytest.mark.parametrize(
    ("steps", "error", "kind"),
    [
        (
            failure('API Error: 529 {"type":"overloaded_error"}'),
            TransientProviderError,
            "overloaded",
        ),
        (failure("API Error: 429 rate_limit_error"), TransientProviderError, "rate_limit"),
        (failure("Invalid API key · Please run /login"), ProviderAuthError, "auth"),
        (
            [*[api_retry(i, 1, 503) for i in (1, 2)], *failure("request failed")],
            TransientProviderError,
            "server",
        ),
        (failure("", subtype="error_max_turns"), AgentTurnLimitError, "max_turns"),
        ([{"stderr": "segfault"}, {"exit": 139}], Exception, "provider"),
        # the agent ran and said it failed: a failed attempt (counted), not an outage
        (failure("Tool execution failed: cannot edit calc.py"), AgentReportedError, "agent_failed"),
    ],
)
def test_failures_map_to_typed_errors(
    fake: Fake, steps: list[dict[str, Any]], error: type, kind: str
) -> None:
    provider = fake.provider(steps)
    with pytest.raises(error) as info:
        provider.execute(fake.request())  # no guard: one attempt
    assert getattr(info.value, "kind", None) == kind


def test_settings_reach_the_cli(fake: Fake) -> None:
    provider = fake.provider(
        [success("ok")],
        claude={"max_retries": 0, "extra_args": ["--add-dir", "docs"]},
        model="claude-opus-4-7",
        max_turns={"implement": 12},
        tools={"allow_commands": ["pytest -q", "npm test"]},
    )
    provider.execute(fake.request())
    record = fake.recorded()
    argv = record["argv"]
    assert record["max_retries"] == "0"
    assert argv[argv.index("--model") + 1] == "claude-opus-4-7"
    assert argv[argv.index("--max-turns") + 1] == "12"
    assert argv[argv.index("--allowedTools") + 1] == "Bash(pytest -q:*),Bash(npm test:*)"
    assert "Bash" in argv[argv.index("--tools") + 1]
    assert argv[-2:] == ["--add-dir", "docs"]


def test_story_text_is_never_executed(fake: Fake, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    prompt = f"# Story: Fix `touch {marker}`; $(touch {marker}) && rm -rf / | sh"
    provider = fake.provider([success("ok")])
    provider.execute(fake.request(prompt=prompt))
    assert fake.recorded()["stdin"] == prompt
    assert not marker.exists()


def test_missing_binary(tmp_path: Path) -> None:
    provider = ClaudeProvider(tmp_path, {"claude": {"binary": str(tmp_path / "nope")}}, environ={})
    status = provider.status()
    assert not status.usable and "claude" in status.reason
    with pytest.raises(ProviderConfigError):
        provider.execute(
            ProviderRequest(
                phase=Phase.PLAN,
                prompt="p",
                system_prompt="",
                workspace=tmp_path,
                access=access_for(Phase.PLAN),
                timeout=5,
                story_id="S-0001",
            )
        )


def denied(*paths: str) -> dict[str, Any]:
    """A `result` that says success yet lists the writes it was denied (as Claude Code does)."""
    event = success("Done: the module is written.")
    event["emit"]["permission_denials"] = [
        {"tool_name": "Write", "tool_use_id": f"toolu_{n}", "tool_input": {"file_path": path}}
        for n, path in enumerate(paths)
    ]
    return event


def test_an_edit_phase_with_denied_writes_is_an_agent_failure_despite_its_success(
    fake: Fake,
) -> None:
    provider = fake.provider([denied(str(fake.ws / "calc.py"), str(fake.ws / "test_calc.py"))])
    with pytest.raises(AgentReportedError) as info:
        provider.execute(fake.request())
    message = info.value.message
    assert "claude was denied 2 tool calls during implement" in message
    assert "Write(" in message and "calc.py" in message


def test_denied_edit_tools_in_a_read_only_phase_are_our_restriction_working(fake: Fake) -> None:
    provider = fake.provider([denied(str(fake.ws / "notes.md"))])
    result = provider.execute(fake.request(Phase.RESEARCH))
    assert result.text == "Done: the module is written."
