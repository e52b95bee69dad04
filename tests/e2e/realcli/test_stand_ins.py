"""The stand-ins in tests/support/fakes/agent_clis.py (used where a test needs many fast runs or a
behaviour the real tool cannot show offline) checked against the real Codex CLI and Aider: the
same preset command line, the same fake model, and both read by the same parser to the same
kind of result, with the stand-in's event and file shapes a subset of the real tool's."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.providers.cli_output import (
    AIDER_ANALYTICS,
    AIDER_HISTORY,
    Classifier,
    LiveRetries,
    parse_output,
)
from ai_sdlc.providers.command_presets import PRESETS
from ai_sdlc.providers.command_provider import render
from tests.e2e.realcli.install import tool_path
from tests.e2e.realcli.openai_server import OpenAiServer
from tests.support.fakes.agent_clis import install_agent
from tests.support.fakes.api_server import Reply, StreamFailure
from tests.support.git_support import git_env, make_repo

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")

PROMPT = "## Your task (research)\n\nFind where calc lives."
ANSWER = "## Findings\n\nA small module is needed."
_HISTORY_LINE = re.compile(
    r"^((TO LLM|LLM RESPONSE) \d{4}-\d\d-\d\dT[\d:]+|-------|(SYSTEM|USER|ASSISTANT)( .*)?)$"
)


@pytest.fixture
def server() -> Iterator[OpenAiServer]:
    with OpenAiServer() as running:
        running.responder = lambda request: Reply(ANSWER, input_tokens=321, output_tokens=12)
        yield running


def _run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None) -> Any:
    return subprocess.run(
        argv,
        cwd=cwd,
        env={**os.environ, **env},
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _aider_run(program: str, tmp: Path, server: OpenAiServer) -> tuple[Any, dict[str, str]]:
    root = make_repo(tmp, remote=False).root
    out = tmp / "out"
    out.mkdir()
    preset = PRESETS["aider"]
    for name, text in preset.files:
        (out / name).write_text(text)
    prompt = tmp / "prompt.md"
    prompt.write_text(PROMPT)
    argv = render(
        preset.read_only_template,
        {"{prompt_file}": str(prompt), "{output_dir}": str(out), "{model}": "openai/gpt-fake"},
    )
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_API_BASE": server.openai_base_url}
    done = _run([program, *argv[1:]], root, {**env, "HOME": str(tmp)}, None)
    files = {
        n: (out / n).read_text() for n in (AIDER_HISTORY, AIDER_ANALYTICS) if (out / n).exists()
    }
    return done, files


@pytest.mark.xdist_group("realcli-aider")
def test_the_aider_stand_in_writes_what_real_aider_writes(
    tmp_path: Path, server: OpenAiServer
) -> None:
    real, real_files = _aider_run(str(tool_path("aider")), tmp_path / "real", server)
    fake_bin = tmp_path / "bin"
    stand_in, fake_files = _aider_run(
        str(install_agent(fake_bin, "aider")), tmp_path / "fake", server
    )

    for done, files in ((real, real_files), (stand_in, fake_files)):
        assert done.returncode == 0, done.stdout + done.stderr
        assert set(files) == {AIDER_HISTORY, AIDER_ANALYTICS}
        assert all(_HISTORY_LINE.match(line) for line in files[AIDER_HISTORY].splitlines())
        sends = [
            json.loads(line)
            for line in files[AIDER_ANALYTICS].splitlines()
            if '"message_send"' in line
        ]
        assert sends and all(
            isinstance(e["properties"]["prompt_tokens"], int)
            and isinstance(e["properties"]["completion_tokens"], int)
            for e in sends
        )
        parsed = parse_output("aider", done.stdout, done.stderr, 0, Classifier("aider"), files)
        assert parsed.error is None and parsed.text.startswith("## Findings"), parsed
        assert parsed.usage is not None and parsed.usage.input_tokens > 0
        assert "Aider v" not in parsed.text and "Tokens:" not in parsed.text
    # the real one's console has what the stand-in imitates; its answer is the model's words
    assert "Aider v0.86" in real.stdout and "Tokens:" in real.stdout
    assert parse_output("aider", real.stdout, "", 0, Classifier("aider"), real_files).text == ANSWER
    real_usage = parse_output("aider", real.stdout, "", 0, Classifier("aider"), real_files).usage
    assert real_usage is not None and (real_usage.input_tokens, real_usage.output_tokens) == (
        321,
        12,
    )


def _codex_events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _shape(events: list[dict[str, Any]]) -> set[tuple[str, ...]]:
    """(event type, item type, whether a retry) of each event."""
    shapes = set()
    for event in events:
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        message = str(event.get("message") or "")
        retry = "Reconnecting" if message.startswith("Reconnecting...") else ""
        shapes.add((str(event["type"]), str(item.get("type") or ""), retry))
    return shapes


def _usage_keys(events: list[dict[str, Any]]) -> set[str]:
    return {k for e in events if e["type"] == "turn.completed" for k in e.get("usage", {})}


@pytest.mark.xdist_group("realcli-codex")
def test_the_codex_stand_in_prints_what_real_codex_prints(
    tmp_path: Path, server: OpenAiServer
) -> None:
    """One dropped stream before the answer: real Codex (stream retries on) says
    `Reconnecting... 1/2` as an `error` event, as the stand-in does with one API error."""
    server.script(StreamFailure())
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "gpt-fake"\nmodel_provider = "fake"\n\n[model_providers.fake]\n'
        f'name = "fake"\nbase_url = "{server.openai_base_url}"\nwire_api = "responses"\n'
        'env_key = "FAKE_OPENAI_KEY"\nrequest_max_retries = 0\nstream_max_retries = 2\n'
        "stream_idle_timeout_ms = 2000\n"
    )
    root = make_repo(tmp_path, remote=False).root
    argv = render(PRESETS["codex"].read_only_template, {})
    env = {"CODEX_HOME": str(home), "FAKE_OPENAI_KEY": "sk-test", "HOME": str(tmp_path)}
    real = _run([str(tool_path("codex")), *argv[1:]], root, env, PROMPT)
    fake_env = {**env, "FAKE_AGENT_API_ERRORS": "1"}
    stand_in = _run(
        [str(install_agent(tmp_path / "bin", "codex")), *argv[1:]], root, fake_env, PROMPT
    )

    for done in (real, stand_in):
        assert done.returncode == 0, done.stdout + done.stderr
        parsed = parse_output("codex-jsonl", done.stdout, done.stderr, 0, Classifier("codex"))
        assert parsed.error is None and parsed.text.startswith("## Findings"), parsed
        assert len(parsed.retries) == 1, done.stdout
        live = LiveRetries("codex-jsonl")
        assert [r for r in map(live.feed, done.stdout.splitlines()) if r] == parsed.retries
        assert parsed.usage is not None and parsed.usage.input_tokens > 0
    real_events, fake_events = _codex_events(real.stdout), _codex_events(stand_in.stdout)
    assert _usage_keys(fake_events) <= _usage_keys(real_events)
    real_shapes, fake_shapes = _shape(real_events), _shape(fake_events)
    assert fake_shapes <= real_shapes | {("item.completed", "reasoning", "")}, (
        fake_shapes - real_shapes
    )
    assert server.refused() == 0 and len(server.requests) == 2
