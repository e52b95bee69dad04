"""A full `ai-sdlc run` of a story through the `openai` and `anthropic` providers against the
fake API server: backlog to done, files written by tool calls, verified, reviewed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.fakes.api_server import FakeApiServer, HttpError
from tests.support.fakes.story_agent import StoryAgent

#: Every test here drives the openai and anthropic SDKs in this process (2.5 s of CPU to
#: import them, once per process): one xdist worker for all such tests pays it once.
pytestmark = pytest.mark.xdist_group("provider-sdks")

HELLO = 'def greet(name):\n    return f"Hello, {name}!"\n'
CHECK = "import hello; assert hello.greet('Ada') == 'Hello, Ada!'"
KEY = "sk-e2e-Secret-9f8e7d6c5b4a"


def configure(project: Path, protocol: str, server: FakeApiServer) -> dict[str, str]:
    base_url = server.openai_base_url if protocol == "openai" else server.url
    (project / ".ai-sdlc" / "config.yaml").write_text(
        "ai:\n"
        f"  provider: {protocol}\n"
        f"  {protocol}:\n"
        f"    base_url: {base_url}\n"
        "  prices:\n"
        "    e2e-model: {input_per_mtok: 1.0, output_per_mtok: 2.0}\n"
        "  model: e2e-model\n"
        "verify:\n"
        f"  test: {json.dumps(f'{sys.executable} -c {json.dumps(CHECK)}')}\n"
    )
    key_env = "OPENAI_API_KEY" if protocol == "openai" else "ANTHROPIC_API_KEY"
    return {"AI_SDLC_PROVIDER": "", key_env: KEY}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_run_a_story_from_backlog_to_done(protocol: str, project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with FakeApiServer() as server:
        agent = StoryAgent(files={"hello.py": HELLO})
        server.responder = agent
        # the first call meets a rate limit: retried by our policy and counted
        server.script(HttpError(429, "rate_limit_error", headers={"retry-after-ms": "10"}))
        env = configure(project, protocol, server)
        title = f"Greet people; $(touch {marker}) `touch {marker}`"
        added = run_cli(project, "add", title, env=env)
        assert added.returncode == 0, added.output
        story_id = added.stdout.strip()

        result = run_cli(project, "run", story_id, env=env, timeout=120)

    assert result.returncode == 0, result.output
    assert (project / "hello.py").read_text() == HELLO
    assert not marker.exists()
    assert {"refine", "research", "plan", "implement", "review"} <= set(agent.phases)
    assert all(r.protocol == protocol for r in server.requests)
    assert {r.body["model"] for r in server.requests} == {"e2e-model"}

    story_dir = project / ".ai-sdlc" / "stories" / story_id
    story = (story_dir / "story.md").read_text()
    assert "status: done" in story
    assert "total_recovery_attempts: 1" in story  # the 429, counted as api_retry
    everything = (
        "\n".join(p.read_text(errors="replace") for p in story_dir.rglob("*") if p.is_file())
        + result.output
    )
    assert KEY not in everything


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_spend_cap_stops_the_run_at_once(protocol: str, project: Path) -> None:
    with FakeApiServer() as server:
        server.responder = StoryAgent(files={"hello.py": HELLO})
        server.script(
            HttpError(
                429,
                "rate_limit_error",
                "You have reached your specified workspace API usage limits.",
            )
        )
        env = configure(project, protocol, server)
        story_id = run_cli(project, "add", "Greet people", env=env).stdout.strip()
        result = run_cli(project, "run", story_id, env=env, timeout=120)
    assert result.returncode != 0
    assert "usage limits" in result.output and "does not clear by retrying" in result.output
    assert "Traceback" not in result.output
    assert len(server.requests) == 1  # never retried
    assert not (project / "hello.py").exists()
