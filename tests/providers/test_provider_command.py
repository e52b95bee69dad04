"""The `command` provider with small real executables that behave like CLI agents."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ai_sdlc.errors import InvalidInputError, StoryBlockedError
from ai_sdlc.providers.base import (
    Phase,
    ProviderConfigError,
    ProviderError,
    ProviderLimitError,
    ProviderRequest,
    TransientProviderError,
    access_for,
)
from ai_sdlc.providers.command_presets import PRESETS, codex_retry_note
from ai_sdlc.providers.command_provider import CommandProvider, command_spec, render
from ai_sdlc.providers.tools import AccessViolationError
from tests.conftest import run_cli
from tests.support.fakes.agent_clis import install_agent
from tests.support.fakes.guard import RecordingGuard
from tests.support.paths import FAKES
from tests.support.waits import GUARD, wait_until_gone

AGENT = [sys.executable, str(FAKES / "cli_agent.py")]
PRICE = {"input_per_mtok": 2, "output_per_mtok": 8}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "main.py").write_text("print('v1')\n")
    return root


def provider(ws: Path, command: dict[str, Any], **settings: Any) -> CommandProvider:
    return CommandProvider(
        ws, {"command": command, **settings}, environ={"PATH": os.environ["PATH"]}
    )


def request(
    ws: Path,
    phase: Phase = Phase.IMPLEMENT,
    *,
    timeout: float = 20.0,
    guard: RecordingGuard | None = None,
    prompt: str = "Do the story.",
) -> ProviderRequest:
    extra: dict[str, Any] = {"guard": guard, "on_event": guard.on_event} if guard else {}
    return ProviderRequest(
        phase=phase,
        prompt=prompt,
        system_prompt="Be brief.",
        workspace=ws,
        access=access_for(phase),
        timeout=timeout,
        story_id="S-0003",
        **extra,
    )


def test_success_through_a_prompt_file(ws: Path) -> None:
    p = provider(
        ws,
        {
            "template": [
                *AGENT,
                "report",
                "--prompt-file",
                "{prompt_file}",
                "--model={model}",
                "{phase}",
            ]
        },
        model="m1",
    )
    result = p.execute(request(ws))
    report = json.loads(result.text)
    assert report["prompt"] == "Be brief.\n\nDo the story."
    assert report["stdin_empty"] is True  # stdin closed: nothing to hang on
    assert report["argv"][-2:] == ["--model=m1", "implement"]
    assert Path(report["cwd"]).resolve() == ws.resolve()
    prompt_file = Path(report["argv"][report["argv"].index("--prompt-file") + 1])
    assert not prompt_file.exists()  # removed after the run
    assert not prompt_file.is_relative_to(ws)  # never inside the workspace
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


def test_success_through_stdin_and_token_dropped_without_model(ws: Path) -> None:
    p = provider(ws, {"template": [*AGENT, "report", "--model={model}"]})
    report = json.loads(p.execute(request(ws)).text)
    assert report["prompt"] == "Be brief.\n\nDo the story."
    assert report["argv"] == ["report"]  # --model={model} dropped: no model configured


def test_edit_phase_changes_are_reported(ws: Path) -> None:
    p = provider(ws, {"template": [*AGENT, "edit", "main.py", "print('v2')\n"]})
    result = p.execute(request(ws))
    assert (ws / "main.py").read_text() == "print('v2')\n"
    assert result.files_changed == ["main.py"]


def test_read_only_phase_uses_its_template_and_is_checked(ws: Path) -> None:
    p = provider(
        ws,
        {"template": [*AGENT, "edit", "main.py", "x"], "read_only_template": [*AGENT, "succeed"]},
    )
    assert p.execute(request(ws, Phase.REVIEW)).text.startswith("agent done")
    assert (ws / "main.py").read_text() == "print('v1')\n"
    sneaky = provider(ws, {"template": [*AGENT, "edit", "main.py", "x"]})
    with pytest.raises(AccessViolationError, match=r"main\.py"):
        sneaky.execute(request(ws, Phase.RESEARCH))


def test_hanging_agent_is_killed_with_its_children(ws: Path, tmp_path: Path) -> None:
    """The agent and its child sleep `NEVER` seconds: the call can only end within the guard by
    killing them. The limit (2 s) leaves the agent time to write its pids on a loaded machine
    (the handshake the test reads) before it is killed."""
    pids = tmp_path / "pids.json"
    p = provider(ws, {"template": [*AGENT, "hang", str(pids)]})
    guard = RecordingGuard(limit=2)
    started = time.monotonic()
    # A phase timeout is transient: retried under the guard, each retry counted, until the
    # (stand-in) global limit stops it.
    with pytest.raises(StoryBlockedError):
        p.execute(request(ws, timeout=2.0, guard=guard))
    assert [r["kind"] for r in guard.recoveries] == ["timeout", "timeout"]
    assert time.monotonic() - started < GUARD  # killed, not waited for
    assert pids.exists(), "the agent never got to write its pids within the 2 s limit"
    agent, child = json.loads(pids.read_text())
    wait_until_gone(agent, "the timed-out agent")  # reaped by the provider, or about to be
    wait_until_gone(child, "the timed-out agent's child")  # killed with its process group


def test_rate_limit_output_is_a_retryable_rate_limit(ws: Path) -> None:
    p = provider(ws, {"template": [*AGENT, "ratelimit"]})
    guard = RecordingGuard(limit=3)
    with pytest.raises(Exception, match="global recovery limit"):
        p.execute(request(ws, guard=guard))
    assert [r["kind"] for r in guard.recoveries] == ["rate_limit"] * 3
    with pytest.raises(TransientProviderError) as info:
        p.execute(request(ws))
    assert "429" in str(info.value)


def test_configured_patterns_and_exit_codes(ws: Path) -> None:
    by_pattern = provider(
        ws,
        {"template": [*AGENT, "fail"], "patterns": [{"pattern": "frobnicator", "kind": "limit"}]},
    )
    with pytest.raises(ProviderLimitError):
        by_pattern.execute(request(ws))
    by_code = provider(ws, {"template": [*AGENT, "exitcode", "75"], "exit_codes": {75: "server"}})
    with pytest.raises(TransientProviderError) as info:
        by_code.execute(request(ws))
    assert info.value.kind == "server"
    unknown = provider(ws, {"template": [*AGENT, "fail"]})
    with pytest.raises(ProviderError) as plain:
        unknown.execute(request(ws))
    assert not isinstance(plain.value, TransientProviderError)
    assert "exited with code 3" in str(plain.value)


def test_story_text_is_never_executed(ws: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    title = f"Fix $(touch {marker}); `touch {marker}` && touch {marker} | sh"
    p = provider(ws, {"template": [*AGENT, "report", "--prompt-file", "{prompt_file}"]})
    report = json.loads(p.execute(request(ws, prompt=title)).text)
    assert title in report["prompt"]
    assert not marker.exists()


def test_missing_program_and_bad_config(ws: Path) -> None:
    missing = provider(ws, {"template": ["no-such-agent-xyz", "{prompt_file}"]})
    assert not missing.status().usable
    with pytest.raises(ProviderConfigError):
        missing.execute(request(ws))
    with pytest.raises(ProviderConfigError):
        command_spec({})
    with pytest.raises(InvalidInputError):
        command_spec({"command": {"template": "agent --prompt {prompt_file}"}})
    with pytest.raises(InvalidInputError):
        command_spec({"command": {"preset": "nope"}})
    with pytest.raises(InvalidInputError):
        command_spec(
            {"command": {"template": ["a"], "patterns": [{"pattern": "x", "kind": "weird"}]}}
        )


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_render_without_a_shell(name: str, tmp_path: Path) -> None:
    spec = command_spec({"command": {"preset": name}})
    values = {
        "{prompt_file}": str(tmp_path / "prompt.md"),
        "{workspace}": str(tmp_path),
        "{model}": None,
        "{phase}": "plan",
    }
    argv = render(spec.read_only_template, values)
    assert argv[0] == name
    assert not any("{" in token for token in argv)
    assert spec.template != spec.read_only_template
    if name == "aider":
        assert spec.prompt_via == "file" and "--dry-run" in argv
    else:
        assert spec.prompt_via == "stdin"
    assert render(spec.template, {**values, "{model}": "m"})[-1 if name != "codex" else -2] == (
        "--model=m"
    )


def test_file_prompt_needs_a_prompt_file_token() -> None:
    with pytest.raises(InvalidInputError, match="prompt_file"):
        command_spec({"command": {"template": ["agent", "go"], "prompt_via": "file"}})


def _stand_in(tmp_path: Path, tool: str, **env: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    install_agent(bin_dir, tool)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env}


@pytest.mark.parametrize(
    ("preset", "tokens"),
    [("codex", (2400, 120)), ("gemini", (2000, 100))],
)
def test_structured_presets_report_real_usage_priced(
    ws: Path, tmp_path: Path, preset: str, tokens: tuple[int | None, int]
) -> None:
    env = _stand_in(tmp_path, preset, FAKE_AGENT_FILES=json.dumps({"hello.py": "x = 1\n"}))
    settings = {"command": {"preset": preset}, "model": "m1", "prices": {"m1": PRICE}}
    p = CommandProvider(ws, settings, environ=env)
    prompt = "Add hello.\n\n## Your task (implement)\n"
    result = p.execute(request(ws, prompt=prompt))
    assert result.text == "Implemented as planned: hello.py"
    assert (ws / "hello.py").read_text() == "x = 1\n" and result.files_changed == ["hello.py"]
    full = f"Be brief.\n\n{prompt}"
    expected_in = tokens[0] if tokens[0] is not None else len(full) // 4 + 1800
    assert (result.usage.input_tokens, result.usage.output_tokens) == (expected_in, tokens[1])
    assert result.usage.cost_usd == pytest.approx((expected_in * 2 + tokens[1] * 8) / 1e6)


def test_an_agents_own_retries_are_reported_and_can_block(ws: Path, tmp_path: Path) -> None:
    env = _stand_in(tmp_path, "codex", FAKE_AGENT_API_ERRORS="3")
    p = CommandProvider(ws, {"command": {"preset": "codex"}}, environ=env)
    guard = RecordingGuard(limit=10)
    base = request(ws, Phase.REVIEW, guard=guard, prompt="## Your task (review)\n")
    req = msgspec.structs.replace(base, on_backend_retry=guard.backend_retry)
    assert p.execute(req).text.endswith("DECISION: APPROVED")
    assert [r["reason"].split(":")[0] for r in guard.recoveries] == [
        f"codex API retry {n}/5" for n in (1, 2, 3)
    ]
    assert guard.event_names().count("backend_retry") == 3
    # at the global limit the reporter raises; it propagates (the agent has exited)
    blocking = RecordingGuard(limit=2)
    req = msgspec.structs.replace(base, guard=blocking, on_backend_retry=blocking.backend_retry)
    with pytest.raises(StoryBlockedError):
        p.execute(req)
    assert len(blocking.recoveries) == 2


def test_output_format_setting(ws: Path, tmp_path: Path) -> None:
    assert command_spec({"command": {"preset": "codex"}}).output == "codex-jsonl"
    assert command_spec({"command": {"preset": "gemini"}}).output == "gemini-jsonl"
    assert command_spec({"command": {"preset": "aider"}}).output == "aider"
    # your own command line is read as text unless you say otherwise
    assert command_spec({"command": {"preset": "codex", "template": ["codex"]}}).output == "text"
    with pytest.raises(InvalidInputError, match=r"ai\.command\.output must be one of"):
        command_spec({"command": {"template": ["a"], "output": "xml"}})
    env = _stand_in(tmp_path, "gemini")
    own = CommandProvider(
        ws,
        {
            "command": {
                "template": ["gemini", "--output-format", "json", "--approval-mode", "default"],
                "output": "gemini-json",
            }
        },
        environ={**env, "FAKE_AGENT_FAIL_ONCE": str(tmp_path / "once")},
    )
    with pytest.raises(TransientProviderError) as info:
        own.execute(request(ws, Phase.PLAN, prompt="## Your task (plan)\n"))
    assert info.value.kind == "rate_limit" and "RetryableQuotaError" in info.value.message
    assert own.execute(request(ws, Phase.PLAN, prompt="## Your task (plan)\n")).text.startswith(
        "## Plan"
    )


def test_a_bad_output_format_in_the_config_file_names_file_and_line(project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text("ai:\n  provider: command\n  command:\n    preset: codex\n    output: xml\n")
    result = run_cli(project, "run", "S-0001")
    assert result.returncode == 3, result.output
    assert f"{config}:5: ai.command.output" in result.stderr
    assert "text, codex-jsonl, gemini-json" in result.stderr and "Traceback" not in result.output
    config.write_text("ai:\n  provider: command\n  command:\n    preset: gemini\n")
    shown = run_cli(project, "config", "ai.command.preset")
    assert shown.returncode == 0 and shown.stdout.strip() == "gemini"


def test_codex_turns_its_own_sandbox_off_only_inside_ours() -> None:
    """Codex's bubblewrap cannot map uids inside ai-sdlc's Landlock sandbox (every command it
    ran failed): confined by ours, an edit phase runs with danger-full-access; unconfined it
    keeps workspace-write; a template of the user's own is never changed."""
    spec = command_spec({"command": {"preset": "codex"}})
    assert spec.template[spec.template.index("--sandbox") + 1] == "workspace-write"
    assert spec.confined_template is not None
    assert spec.confined_template[spec.confined_template.index("--sandbox") + 1] == (
        "danger-full-access"
    )
    ro = spec.read_only_template
    assert ro[ro.index("--sandbox") + 1] == "read-only"
    own = command_spec({"command": {"preset": "codex", "template": ["codex", "exec", "-"]}})
    assert own.confined_template is None


def test_doctor_says_when_codex_hides_its_request_retries(tmp_path: Path) -> None:
    """The built-in provider retries refused requests unseen; with a provider of the user's
    own, written as users write it, ai-sdlc's private copy of the config turns Codex's retries
    off (`sandbox.codexconf`), so ai-sdlc retries and counts each: no note."""
    home = tmp_path / "codex"
    home.mkdir()
    note = codex_retry_note({"CODEX_HOME": str(home)})  # no config: built-in openai
    assert note is not None and "'openai'" in note and "a model provider of your own" in note
    (home / "config.toml").write_text('model = "o3"\n[model_providers.mine]\nname = "m"\n')
    assert codex_retry_note({"CODEX_HOME": str(home)}) is not None  # defined, not chosen
    (home / "config.toml").write_text(
        'model_provider = "mine"\n[model_providers.mine]\nname = "m"\nbase_url = "http://x"\n'
    )
    assert codex_retry_note({"CODEX_HOME": str(home)}) is None
