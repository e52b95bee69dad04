"""The `openai` and `anthropic` providers: the real client libraries against a fake API server
on 127.0.0.1 speaking their wire protocols (JSON and streaming, tool calls)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.agent_loop import AgentTurnLimitError
from ai_sdlc.providers.anthropic_provider import AnthropicProvider
from ai_sdlc.providers.base import (
    Access,
    Phase,
    Provider,
    ProviderAuthError,
    ProviderConfigError,
    ProviderLimitError,
    ProviderRequest,
    ProviderRequestError,
    TransientProviderError,
    access_for,
)
from ai_sdlc.providers.openai_provider import OpenAIProvider
from tests.support.fakes.api_server import (
    Call,
    FakeApiServer,
    HttpError,
    Reply,
    Slow,
    StreamFailure,
)
from tests.support.fakes.guard import RecordingGuard
from tests.support.waits import GUARD, NEVER

#: Every test here drives the openai and anthropic SDKs in this process (2.5 s of CPU to
#: import them, once per process): one xdist worker for all such tests pays it once.
pytestmark = pytest.mark.xdist_group("provider-sdks")

SECRET = "sk-test-Zq8v1t9R7nW3kL5p"
PROTOCOLS = ["openai", "anthropic"]
MODES = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "greet.py").write_text('def greet():\n    return "hello"\n')
    return root


def make(
    protocol: str, server: FakeApiServer, ws: Path, *, stream: bool = True, **settings: Any
) -> Provider:
    if protocol == "openai":
        own = {"base_url": server.openai_base_url, "stream": stream}
        return OpenAIProvider(ws, {"openai": own, **settings}, environ={"OPENAI_API_KEY": SECRET})
    own = {"base_url": server.url, "stream": stream}
    return AnthropicProvider(
        ws, {"anthropic": own, **settings}, environ={"ANTHROPIC_API_KEY": SECRET}
    )


def request(
    ws: Path, guard: RecordingGuard, phase: Phase = Phase.IMPLEMENT, timeout: float = 20.0
) -> ProviderRequest:
    return ProviderRequest(
        phase=phase,
        prompt="Make greet() say hi and add a CHANGELOG.",
        system_prompt="You implement stories.",
        workspace=ws,
        access=access_for(phase),
        timeout=timeout,
        story_id="S-0007",
        guard=guard,
        on_event=guard.on_event,
        on_backend_retry=guard.backend_retry,
    )


@pytest.mark.parametrize(("protocol", "stream"), MODES)
def test_agent_loop_edits_the_workspace(
    protocol: str, stream: bool, server: FakeApiServer, ws: Path
) -> None:
    server.script(
        Reply(text="Looking around.", calls=(Call("list_dir", {"path": "src"}),)),
        Reply(
            calls=(
                Call("read_file", {"path": "src/greet.py"}),
                Call("search", {"pattern": "hello"}),
            )
        ),
        Reply(
            calls=(
                Call(
                    "edit_file",
                    {"path": "src/greet.py", "old_string": '"hello"', "new_string": '"hi"'},
                ),
                Call("write_file", {"path": "CHANGELOG.md", "content": "- greet: hi\n"}),
            )
        ),
        Reply(text="Done: greet() says hi.", input_tokens=300, output_tokens=40),
    )
    guard = RecordingGuard()
    result = make(protocol, server, ws, stream=stream).execute(request(ws, guard))

    assert result.text == "Done: greet() says hi."
    assert (ws / "src" / "greet.py").read_text() == 'def greet():\n    return "hi"\n'
    assert (ws / "CHANGELOG.md").read_text() == "- greet: hi\n"
    assert result.files_changed == ["src/greet.py", "CHANGELOG.md"]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (600, 100)
    assert result.usage.cost_usd is None  # no price configured
    assert guard.recoveries == []
    assert len(server.requests) == 4
    assert all(r.protocol == protocol and r.streaming is stream for r in server.requests)
    assert set(server.requests[0].tool_names) == {
        "read_file",
        "list_dir",
        "search",
        "write_file",
        "edit_file",
    }
    # the tool results went back to the model
    assert "greet.py" in server.requests[1].text()
    assert 'return "hello"' in server.requests[2].text()
    assert "edited src/greet.py" in server.requests[3].text()
    names = guard.event_names()
    assert names[0] == "agent_started" and names.count("agent_turn") == 4
    tools = [d["tool"] for n, d in guard.events if n == "tool_call"]
    assert tools == ["list_dir", "read_file", "search", "edit_file", "write_file"]


@pytest.mark.parametrize(("protocol", "stream"), MODES)
def test_retries_are_ours_and_counted(
    protocol: str, stream: bool, server: FakeApiServer, ws: Path
) -> None:
    failures: list[Any] = [
        HttpError(429, "rate_limit_error", headers={"retry-after-ms": "20"}),
        HttpError(429, "rate_limit_error", headers={"retry-after": "1"}),
        HttpError(429, "rate_limit_error"),
        HttpError(529, "overloaded_error", "Overloaded"),
        HttpError(500, "api_error", "Internal server error"),
    ]
    if stream:
        failures.append(StreamFailure())
    server.script(*failures, Reply(text="finally"))
    guard = RecordingGuard()
    result = make(protocol, server, ws, stream=stream).execute(request(ws, guard))

    assert result.text == "finally"
    kinds = [(r["kind"], r["retry_after"]) for r in guard.recoveries]
    expected = [
        ("rate_limit", 0.02),
        ("rate_limit", 1.0),
        ("rate_limit", None),
        ("overloaded", None),
        ("server", None),
    ]
    if stream:
        expected.append(("overloaded", None))  # the error event inside a 200 stream
    assert kinds == expected
    assert all(r["recovery"] == "api_retry" for r in guard.recoveries)
    # every failure reached the server exactly once: no hidden SDK retries
    assert len(server.requests) == len(failures) + 1
    assert {r.headers.get("x-stainless-retry-count") for r in server.requests} <= {"0", None}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("failure", "error_type"),
    [
        (HttpError(401, "authentication_error", f"invalid x-api-key {SECRET}"), ProviderAuthError),
        (
            HttpError(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000"),
            ProviderRequestError,
        ),
        (
            HttpError(
                429,
                "rate_limit_error",
                "You have reached your specified workspace API usage limits.",
            ),
            ProviderLimitError,
        ),
        (
            HttpError(
                429,
                "insufficient_quota",
                "You exceeded your current quota",
                code="insufficient_quota",
            ),
            ProviderLimitError,
        ),
        (HttpError(404, "not_found_error", "model: nope"), ProviderConfigError),
    ],
)
def test_non_retryable_errors_stop_at_once(
    protocol: str, failure: HttpError, error_type: type, server: FakeApiServer, ws: Path
) -> None:
    server.script(failure, Reply(text="never reached"))
    guard = RecordingGuard()
    with pytest.raises(error_type) as info:
        make(protocol, server, ws).execute(request(ws, guard))
    assert len(server.requests) == 1
    assert guard.recoveries == []
    assert SECRET not in str(info.value)
    assert all(SECRET not in repr(data) for _name, data in guard.events)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_slow_response_hits_the_phase_time_limit(
    protocol: str, server: FakeApiServer, ws: Path
) -> None:
    server.script(Slow(NEVER, Reply(text="too late")))
    guard = RecordingGuard()
    started = time.monotonic()
    with pytest.raises(TransientProviderError) as info:
        make(protocol, server, ws).execute(request(ws, guard, timeout=0.6))
    elapsed = time.monotonic() - started
    assert info.value.kind == "timeout"
    assert "time limit" in str(info.value)
    assert elapsed < GUARD  # cut at the 0.6 s limit: the answer never comes within the guard
    assert len(server.requests) == 1  # the guard's retry found the phase out of time


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_config_timeout_applies_below_the_runner_timeout(
    protocol: str, server: FakeApiServer, ws: Path
) -> None:
    server.script(Slow(NEVER, Reply(text="too late")))
    provider = make(protocol, server, ws, timeouts={"implement": 0.5})
    started = time.monotonic()
    with pytest.raises(TransientProviderError):
        provider.execute(request(ws, RecordingGuard(), timeout=10 * NEVER))
    assert time.monotonic() - started < GUARD  # the 0.5 s config timeout, not the phase's


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_read_only_phase_cannot_write(protocol: str, server: FakeApiServer, ws: Path) -> None:
    server.script(
        Reply(
            calls=(
                Call("write_file", {"path": "src/greet.py", "content": "pwned"}),
                Call(
                    "edit_file", {"path": "src/greet.py", "old_string": "hello", "new_string": "x"}
                ),
            )
        ),
        Reply(text="I could not write; here is my review.\nDECISION: APPROVED"),
    )
    guard = RecordingGuard()
    result = make(protocol, server, ws).execute(request(ws, guard, phase=Phase.REVIEW))
    assert set(server.requests[0].tool_names) == {"read_file", "list_dir", "search"}
    assert "not available" in server.requests[1].text()
    assert (ws / "src" / "greet.py").read_text().endswith('"hello"\n')
    assert result.files_changed == []
    assert result.text.endswith("DECISION: APPROVED")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_path_escapes_are_refused_back_to_the_model(
    protocol: str, server: FakeApiServer, ws: Path
) -> None:
    (ws.parent / "outside.txt").write_text("PRIVATE")
    server.script(
        Reply(
            calls=(
                Call("read_file", {"path": "../outside.txt"}),
                Call("write_file", {"path": "/tmp/ai-sdlc-escape.txt", "content": "x"}),
            )
        ),
        Reply(text="ok"),
    )
    make(protocol, server, ws).execute(request(ws, RecordingGuard()))
    followup = server.requests[1].text()
    assert "PRIVATE" not in followup and followup.count("refused") == 2
    assert not Path("/tmp/ai-sdlc-escape.txt").exists()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_max_turns_stops_a_looping_agent(protocol: str, server: FakeApiServer, ws: Path) -> None:
    server.script(*[Reply(calls=(Call("list_dir", {}),)) for _ in range(3)])
    with pytest.raises(AgentTurnLimitError):
        make(protocol, server, ws, max_turns=2).execute(request(ws, RecordingGuard()))
    assert len(server.requests) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_malformed_tool_arguments_go_back_as_an_error(
    protocol: str, server: FakeApiServer, ws: Path
) -> None:
    server.script(Reply(calls=(Call("read_file", raw='{"path": "src/gre'),)), Reply(text="ok"))
    result = make(protocol, server, ws).execute(request(ws, RecordingGuard()))
    assert result.text == "ok"
    assert "not a JSON object" in server.requests[1].text()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_usage_is_priced_from_config(protocol: str, server: FakeApiServer, ws: Path) -> None:
    model = "gpt-4.1-mini" if protocol == "openai" else "claude-sonnet-4-6"
    prices = {model: {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}
    server.script(
        Reply(calls=(Call("list_dir", {}),), input_tokens=1000, output_tokens=100),
        Reply(text="ok", input_tokens=2000, output_tokens=200),
    )
    guard = RecordingGuard()
    result = make(protocol, server, ws, prices=prices).execute(request(ws, guard))
    assert result.usage.total_tokens == 3300
    assert result.usage.cost_usd == pytest.approx((3000 * 3 + 300 * 15) / 1e6)
    turn_costs = [d["cost_usd"] for n, d in guard.events if n == "agent_turn"]
    assert turn_costs == [pytest.approx(0.0045), pytest.approx(0.009)]
    assert server.requests[0].body["model"] == model


def test_missing_usage_is_estimated(server: FakeApiServer, ws: Path) -> None:
    server.script(Reply(text="x" * 400, include_usage=False))
    guard = RecordingGuard()
    result = make("openai", server, ws).execute(request(ws, guard))
    assert result.usage.output_tokens == 100
    assert result.usage.input_tokens > 0
    assert [d["usage_estimated"] for n, d in guard.events if n == "agent_turn"] == [True]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_budget_checked_before_each_call_stops_work(
    protocol: str, server: FakeApiServer, ws: Path
) -> None:
    """The runner's guard sees per-turn usage events and refuses the call that would overspend."""
    server.script(
        *[
            Reply(calls=(Call("list_dir", {}),), input_tokens=400, output_tokens=100)
            for _ in range(5)
        ],
        Reply(text="never"),
    )

    class BudgetGuard(RecordingGuard):
        budget = 1200

        def __call__(self, fn):  # type: ignore[no-untyped-def]
            used = sum(
                d["input_tokens"] + d["output_tokens"] for n, d in self.events if n == "agent_turn"
            )
            if used >= self.budget:
                raise StoryBlockedError(
                    f"story token budget {self.budget} reached ({used} used)",
                    story_id=self.story_id,
                )
            return super().__call__(fn)

    guard = BudgetGuard()
    with pytest.raises(StoryBlockedError, match="1500 used"):
        make(protocol, server, ws).execute(request(ws, guard))
    assert len(server.requests) == 3


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_missing_credentials_are_a_config_error(cls: type, ws: Path) -> None:
    provider = cls(ws, {}, environ={})
    assert not provider.status().usable
    with pytest.raises(ProviderConfigError):
        provider.execute(request(ws, RecordingGuard()))


def test_local_openai_server_needs_no_key(server: FakeApiServer, ws: Path) -> None:
    provider = OpenAIProvider(
        ws, {"openai": {"base_url": server.openai_base_url}, "model": "llama3.2"}, environ={}
    )
    assert provider.status().usable
    server.script(Reply(text="local answer"))
    assert provider.execute(request(ws, RecordingGuard())).text == "local answer"
    assert server.requests[0].body["model"] == "llama3.2"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_importing_the_providers_does_not_import_the_sdks() -> None:
    code = (
        "import sys, ai_sdlc.providers.openai_provider, ai_sdlc.providers.anthropic_provider, "
        "ai_sdlc.providers.claude_provider, ai_sdlc.providers.command_provider; "
        "print('openai' in sys.modules, 'anthropic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_read_only_access_matches_the_phase() -> None:
    assert access_for(Phase.PLAN) is Access.READ_ONLY
    assert access_for(Phase.REWORK) is Access.EDIT
