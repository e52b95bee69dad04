"""The dry-run provider: describes the request, writes nothing, decides nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ai_sdlc.providers.base import Access, Phase, ProviderRequest
from ai_sdlc.providers.decision import parse_decision
from ai_sdlc.providers.dry_run import PROMPT_PREVIEW_CHARS, DryRunProvider, truncate_middle


def make_request(workspace: Path, prompt: str) -> ProviderRequest:
    return ProviderRequest(
        phase=Phase.IMPLEMENT,
        prompt=prompt,
        system_prompt="You are the implementation agent.",
        workspace=workspace,
        access=Access.EDIT,
        timeout=90,
        story_id="S-0007",
        attempt=2,
        model="some-model",
        context={"verification_output": "E assert 1 == 2", "workspace_changed": False},
    )


def test_describes_the_request_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("dry-run touched the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    provider = DryRunProvider(tmp_path, {"provider": "dry-run"})
    assert provider.simulated and provider.changes_nothing
    result = provider.execute(make_request(tmp_path, "Implement the CSV export."))
    text = result.text
    for expected in (
        "DRY RUN",
        "story: S-0007",
        "phase: implement (attempt 2)",
        "access: edit",
        f"workspace: {tmp_path}",
        "timeout: 90s",
        "model: some-model",
        'verification_output: "E assert 1 == 2"',
        "workspace_changed: False",
        "You are the implementation agent.",
        "Implement the CSV export.",
    ):
        assert expected in text, expected
    assert list(tmp_path.iterdir()) == []
    assert result.files_changed == [] and result.usage.total_tokens == 0
    assert parse_decision(text)[0] is None


def test_long_prompts_keep_head_and_tail(tmp_path: Path) -> None:
    prompt = "HEAD-MARK " + "x" * 50_000 + " TAIL-MARK"
    text = DryRunProvider(tmp_path, {}).execute(make_request(tmp_path, prompt)).text
    assert "HEAD-MARK" in text and "TAIL-MARK" in text
    assert "characters not shown" in text
    assert len(text) < PROMPT_PREVIEW_CHARS + 2000


def test_truncate_middle_bounds() -> None:
    assert truncate_middle("short", 10) == "short"
    cut = truncate_middle("a" * 100 + "b" * 100, 50)
    assert cut.startswith("a" * 20) and cut.endswith("b" * 30)
    assert "[... 150 characters not shown ...]" in cut
