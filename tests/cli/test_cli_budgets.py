"""Usage accounting and budgets through the real CLI: tokens and cost per story (frontmatter
`usage`) and per run; crossing a budget blocks the story (or halts the run) before the call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.test_provider_e2e import CHECK, HELLO, KEY
from tests.support.fakes.api_server import FakeApiServer
from tests.support.fakes.story_agent import StoryAgent

#: Tests here drive the openai or anthropic SDK in this process (2.5 s of CPU to import
#: both, once per process): one xdist worker for all such tests pays it once.
pytestmark = pytest.mark.xdist_group("provider-sdks")


def _show(project: Path, sid: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = run_cli(project, "show", sid, "--json", env=env)
    assert result.returncode == 0, result.output
    return dict(json.loads(result.stdout)["frontmatter"])


def test_story_token_budget_blocks_before_the_call(project: Path) -> None:
    for key, value in (("limits.story_tokens", "400"), ("ai.max_output_tokens", "20")):
        assert run_cli(project, "config", key, value).returncode == 0
    run_cli(project, "add", "Budgeted story")
    result = run_cli(project, "run", "S-0001")
    assert result.returncode == 5, result.output
    assert "Token budget reached for S-0001" in result.output
    assert "limits.story_tokens" in result.output
    fm = _show(project, "S-0001")
    assert fm["status"] == "blocked"
    usage = fm["usage"]
    assert isinstance(usage, dict)
    assert 0 < usage["input_tokens"] + usage["output_tokens"] <= 400
    assert usage["calls"] >= 1
    # Nothing more is spent once blocked.
    again = run_cli(project, "run", "S-0001")
    assert again.returncode == 5
    assert _show(project, "S-0001")["usage"] == usage


def _configure(project: Path, server: FakeApiServer, extra: str) -> dict[str, str]:
    (project / ".ai-sdlc" / "config.yaml").write_text(
        "ai:\n"
        "  provider: openai\n"
        "  openai:\n"
        f"    base_url: {server.openai_base_url}\n"
        "  model: e2e-model\n"
        "  max_output_tokens: 100\n"
        "  prices:\n"
        "    e2e-model: {input_per_mtok: 3000.0, output_per_mtok: 6000.0}\n"
        "verify:\n"
        f"  test: {json.dumps(f'{sys.executable} -c {json.dumps(CHECK)}')}\n" + extra
    )
    return {"AI_SDLC_PROVIDER": "", "OPENAI_API_KEY": KEY}


def test_story_cost_is_recorded_and_its_budget_blocks(project: Path) -> None:
    with FakeApiServer() as server:
        server.responder = StoryAgent(files={"hello.py": HELLO})
        env = _configure(project, server, "limits:\n  story_cost_usd: 4.0\n")
        run_cli(project, "add", "Priced story", env=env)
        result = run_cli(project, "run", "S-0001", env=env, timeout=120)
        calls = len(server.requests)
    assert result.returncode == 5, result.output
    assert "Cost budget reached for S-0001" in result.output
    fm = _show(project, "S-0001", env)
    usage = fm["usage"]
    assert isinstance(usage, dict)
    assert 0 < float(usage["cost_usd"]) <= 4.0
    assert calls >= 1
    text = (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_text()
    assert KEY not in text


def test_run_cost_budget_halts_the_run(project: Path) -> None:
    with FakeApiServer() as server:
        server.responder = StoryAgent(files={"hello.py": HELLO})
        env = _configure(project, server, "limits:\n  run_cost_usd: 1.0\n")
        run_cli(project, "add", "Priced story", env=env)
        result = run_cli(project, "run", "S-0001", env=env, timeout=120)
    assert result.returncode == 6, result.output
    assert "Run cost budget reached" in result.output
    assert "limits.run_cost_usd" in result.output
