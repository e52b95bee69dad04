"""The real Claude Code (pinned in tests/e2e/realcli/install.py) driven by `ai-sdlc run` against a
fake Anthropic Messages API (tests/e2e/realcli/anthropic_server.py) on 127.0.0.1.

Each test plays a story in a real git project with a bare origin through the real CLI. One run
goes from implement to done with a `feat(S-…)` commit through API faults counted one for one as
Claude Code retries them and a read-only phase's refused write; the others: the
global limit stopping a session mid-way, an auth failure, the `command` preset. The stand-in
`claude` (tests/support/fakes/agent_clis.py) is checked against the real one for the same
scripted server.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.providers.base import Access, Phase, ProviderRequest, access_for
from ai_sdlc.providers.claude_provider import ClaudeProvider, claude_argv
from ai_sdlc.providers.command_presets import PRESETS
from tests.e2e.realcli.anthropic_server import INPUT_TOKENS, OUTPUT_TOKENS, AnthropicServer
from tests.e2e.realcli.install import tool_path
from tests.e2e.realcli.model_server import Tool, Turn
from tests.e2e.realcli.project import ANSI, HELLO, TITLE, RealProject
from tests.support.fakes.agent_clis import install_agent
from tests.support.fakes.guard import RecordingGuard
from tests.support.git_support import git_env

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.usefixtures("git_env"),
    pytest.mark.realcli,
    pytest.mark.slow,
    pytest.mark.xdist_group("realcli-claude"),
]


def write(path: str, content: str) -> Turn:
    return Turn(
        f"Writing {path}.", (Tool("Write", {"file_path": "{cwd}/" + path, "content": content}),)
    )


def claude_env(tmp_path: Path, server: AnthropicServer) -> dict[str, str]:
    """Claude Code pointed at the fake server, with nothing else leaving the machine."""
    config = tmp_path / "claude-config"
    config.mkdir(exist_ok=True)
    return {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "test-key-not-a-secret",
        "CLAUDE_CONFIG_DIR": str(config),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


@pytest.fixture(scope="module")
def claude() -> Path:
    return tool_path("claude")


@pytest.fixture
def server() -> Any:
    with AnthropicServer() as running:
        running.play("implement", [write("hello.py", HELLO), Turn("Implemented greet().")])
        yield running


def project(tmp_path: Path, claude: Path, server: AnthropicServer, config: str = "") -> RealProject:
    return RealProject(tmp_path, claude, claude_env(tmp_path, server), config)


def recoveries(fm: dict[str, Any]) -> dict[str, int]:
    return dict(fm.get("recovery_breakdown") or {})


def test_a_story_goes_to_done_through_faults_and_a_refused_write(
    tmp_path: Path, claude: Path, server: AnthropicServer
) -> None:
    """One story to done with a commit, asserted each way it can fail. It starts at implement
    (refined, researched and planned by hand; refine runs in the limit and auth tests,
    research in the let-through one): a 529, a 429 and a 500 before implement's answer, each
    counted as Claude Code retries it; the review's model asks for a write, which the
    read-only phase does not offer (answered with an error, nothing written or counted), then
    approves. The rework cycle is the runner's, run through a real CLI by the Codex test
    (rework runs the edit command line implement runs here)."""
    server.fail(529)
    server.fail(429)
    server.fail(500)
    server.play(
        "review",
        [write("notes.py", "x = 1\n"), Turn("Documented and tested.\n\nDECISION: APPROVED")],
    )
    proj = project(tmp_path, claude, server)
    proj.start_at("implement")

    result = proj.run("--provider", "claude")

    assert result.returncode == 0, result.output
    fm = proj.story()
    assert fm["status"] == "done"
    assert proj.commits() == [f"feat({proj.sid}): {TITLE}"]
    assert proj.committed("hello.py") == HELLO
    assert server.phases() == ["implement", "implement", "review", "review"]
    # the faults one for one, nothing else (a write let through in review would have been a
    # counted read-only violation)
    assert server.refused() == 3
    assert recoveries(fm) == {"api_retry": 3}
    assert fm["total_recovery_attempts"] == 3
    assert "matches no known tool" not in result.output
    # the refused write: the model asked for it and Claude Code answered with an error
    assert "notes.py" not in proj.committed_files()
    worktree_file = proj.root / str(fm.get("worktree_path") or "none") / "notes.py"
    assert not worktree_file.exists()
    review = [b for b in server.bodies if "## Your task (review)" in json.dumps(b)]
    results = json.dumps(review[1]["messages"])
    assert "tool_result" in results and '"is_error": true' in results
    verdict = (proj.root / ".ai-sdlc" / "stories" / proj.sid / "review.md").read_text()
    assert "Documented and tested." in verdict, verdict
    # usage is Claude Code's own report: four answered calls of the server's tokens each
    assert fm["usage"]["input_tokens"] == 4 * INPUT_TOKENS
    assert fm["usage"]["output_tokens"] == 4 * OUTPUT_TOKENS
    # Claude Code kept its state in ai-sdlc's private home, never in the user's folder
    assert list((tmp_path / "claude-config").iterdir()) == []
    assert list((tmp_path / "state" / "homes").glob("*/claude/*"))


def test_turns_are_counted_per_model_message(
    tmp_path: Path, claude: Path, server: AnthropicServer
) -> None:
    """Claude Code prints one `assistant` event per content block (the text and the tool call
    of one message are two events): one turn, one `agent_turn` event per message."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **claude_env(tmp_path, server)}
    ws = tmp_path / "ws"
    ws.mkdir()
    provider = ClaudeProvider(ws, {"claude": {"binary": str(claude)}}, environ=env)
    guard = RecordingGuard()
    request = ProviderRequest(
        phase=Phase.IMPLEMENT,
        prompt="## Your task (implement)\n\nAdd hello.py.",
        system_prompt="Be careful.",
        workspace=ws,
        access=Access.EDIT,
        timeout=60,
        story_id="S-0001",
        guard=guard,
        on_event=guard.on_event,
        on_backend_retry=guard.backend_retry,
    )

    result = provider.execute(request)

    assert result.files_changed == ["hello.py"]
    turns = [data for name, data in guard.events if name == "agent_turn"]
    assert [t["turn"] for t in turns] == [1, 2]
    assert [t["input_tokens"] for t in turns] == [INPUT_TOKENS, INPUT_TOKENS]
    tools = [data for name, data in guard.events if name == "tool_call"]
    assert [(t["turn"], t["tool"]) for t in tools] == [(1, "Write")]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        2 * INPUT_TOKENS,
        2 * OUTPUT_TOKENS,
    )


def test_the_command_preset_reads_claudes_own_usage(
    tmp_path: Path, claude: Path, server: AnthropicServer
) -> None:
    """The `command` provider's `claude` preset (`--output-format json`): done with a commit,
    and the usage recorded is Claude Code's own report, not an estimate from text length.
    The story starts at implement (researched and planned by hand): the edit template and
    the read-only one (review) are what this is about."""
    proj = project(
        tmp_path, claude, server, "ai:\n  provider: command\n  command:\n    preset: claude\n"
    )
    proj.start_at("implement")

    result = proj.run()

    assert result.returncode == 0, result.output
    fm = proj.story()
    assert fm["status"] == "done"
    assert proj.committed("hello.py") == HELLO
    assert server.phases() == ["implement", "implement", "review"]
    assert fm["usage"]["input_tokens"] == 3 * INPUT_TOKENS
    assert fm["usage"]["output_tokens"] == 3 * OUTPUT_TOKENS


def test_the_global_limit_stops_a_session_mid_way(
    tmp_path: Path, claude: Path, server: AnthropicServer
) -> None:
    server.fail(529, times=50)
    proj = project(tmp_path, claude, server, "limits:\n  global_recovery: 3\n")

    result = proj.run("--provider", "claude")

    assert result.returncode == 5, result.output
    fm = proj.story()
    assert fm["status"] == "blocked"
    assert recoveries(fm) == {"api_retry": 3}
    # Claude Code was stopped at the third retry it reported: no call after the block
    assert server.refused() == 3
    assert len(server.calls) == 3


def test_a_write_let_through_in_a_read_only_phase_is_refused_and_counted(
    tmp_path: Path, claude: Path, server: AnthropicServer
) -> None:
    """A command the project allows in research (`ai.tools`) that writes a file: the file fails
    the read-only phase as an access violation, counted, never committed. The story starts at
    research (refined by hand)."""
    touch = Turn("Noting.", (Tool("Bash", {"command": "touch notes.py"}),))
    server.play("research", [touch, Turn("## Findings\n\nNothing.")])
    proj = project(
        tmp_path,
        claude,
        server,
        'ai:\n  tools:\n    allow_commands: ["touch"]\n    command_phases: ["research"]\n'
        "limits:\n  global_recovery: 1\n",
    )
    proj.start_at("research")

    result = proj.run("--provider", "claude")

    assert result.returncode == 5, result.output
    fm = proj.story()
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 1, fm
    assert "changed files during the read-only research phase: notes.py" in result.stderr
    assert server.phases() == ["research", "research"]  # nothing after the block


def test_an_auth_failure_is_exit_4_with_claudes_message(
    tmp_path: Path, claude: Path, server: AnthropicServer
) -> None:
    server.fail(401, times=20)
    proj = project(tmp_path, claude, server, "ai:\n  claude:\n    max_retries: 1\n")

    result = proj.run("--provider", "claude")

    assert result.returncode == 4, result.output
    assert "Invalid API key" in result.stderr
    assert ANSI not in result.output
    assert proj.story()["status"] != "done"


# --- the stand-in against the real tool ---------------------------------------------------------


def _events(lines: str) -> list[dict[str, Any]]:
    out = []
    for line in lines.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _shape(event: dict[str, Any]) -> tuple[str, str | None, tuple[str, ...]]:
    """What the provider reads of an event: its type, subtype and content block types."""
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    assert isinstance(message, dict)
    blocks = tuple(str(b.get("type")) for b in message.get("content") or [] if isinstance(b, dict))
    return str(event.get("type")), event.get("subtype"), blocks


def test_the_stand_in_speaks_the_real_tools_stream(tmp_path: Path, claude: Path) -> None:
    """For the same implement phase (write one file, then answer), the stand-in prints the event
    kinds the real Claude Code prints, with the fields the provider reads."""
    request = ProviderRequest(
        phase=Phase.IMPLEMENT,
        prompt="## Your task (implement)\n\nAdd hello.py.",
        system_prompt="Be careful.",
        workspace=tmp_path,
        access=access_for(Phase.IMPLEMENT),
        timeout=60,
        story_id="S-0001",
    )
    assert request.access is Access.EDIT
    streams: dict[str, list[dict[str, Any]]] = {}
    for name in ("real", "stand-in"):
        ws = tmp_path / name
        ws.mkdir()
        with AnthropicServer() as server:
            server.play("implement", [write("hello.py", HELLO), Turn("Implemented greet().")])
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(tmp_path),
                **claude_env(tmp_path, server),
            }
            binary = str(claude)
            if name == "stand-in":
                binary = str(install_agent(tmp_path / "fake-bin", "claude"))
                env["FAKE_AGENT_FILES"] = json.dumps({"hello.py": HELLO})
            argv = claude_argv(binary, request, model=None, turns=5, bash_prefixes=(), extra=[])
            done = subprocess.run(
                argv,
                input=request.prompt,
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert done.returncode == 0, done.stderr
        assert (ws / "hello.py").read_text() == HELLO
        streams[name] = _events(done.stdout)
    real, fake = streams["real"], streams["stand-in"]
    assert {_shape(e) for e in fake} <= {_shape(e) for e in real}, (real, fake)
    for stream in (real, fake):
        result = stream[-1]
        assert result["type"] == "result" and result["subtype"] == "success"
        assert not result["is_error"] and isinstance(result["result"], str)
        assert {"input_tokens", "output_tokens"} <= set(result["usage"])
        assert isinstance(result["permission_denials"], list)
        init = stream[0]
        assert init["type"] == "system" and init["subtype"] == "init"
        assert "Write" in init["tools"]


def _offered(claude: Path, tmp_path: Path, tools: str) -> set[str]:
    """The tools the real Claude Code offers when asked for `tools` (its `init` event)."""
    with AnthropicServer() as server:
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **claude_env(tmp_path, server)}
        argv = [str(claude), "-p", "--output-format", "stream-json", "--verbose"]
        done = subprocess.run(
            [*argv, "--tools", tools],
            input="## Your task (research)\n\nLook.",
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "matches no known tool" not in done.stdout + done.stderr
    return set(_events(done.stdout)[0]["tools"])


def test_every_tool_name_we_pass_is_one_claude_code_knows(tmp_path: Path, claude: Path) -> None:
    """Claude Code drops an unknown `--tools` name silently (2.1 has no `LS`, no `MultiEdit`):
    each list the provider and the `command` preset pass is offered whole (asked for all their
    names at once, in one start), and the implement phase is never offered agents, schedules,
    worktrees or messages."""
    lists: set[str] = set()
    for phase in Phase:
        request = ProviderRequest(
            phase=phase,
            prompt="x",
            system_prompt="",
            workspace=tmp_path,
            access=access_for(phase),
            timeout=60,
            story_id="S-0001",
        )
        argv = claude_argv("claude", request, model=None, turns=5, bash_prefixes=(), extra=[])
        lists |= {argv[argv.index("--tools") + 1], argv[argv.index("--disallowedTools") + 1]}
    preset = PRESETS["claude"]
    for template in (preset.template, preset.read_only_template):
        lists |= {template[template.index("--tools") + 1]}
        lists |= {template[template.index("--disallowedTools") + 1]}
    # every name of every list in one start: all offered means each list is offered whole
    names = sorted({name for tools in lists for name in tools.split(",")})
    assert _offered(claude, tmp_path, ",".join(names)) == set(names), names
    implement = preset.template[preset.template.index("--tools") + 1].split(",")
    banned = ("Task", "Agent", "Cron", "EnterWorktree", "SendMessage", "Bash", "Web")
    assert not [name for name in implement if name.startswith(banned)]
