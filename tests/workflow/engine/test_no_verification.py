"""No verification configured means nothing was verified: the run says so once, the review is
told (the prompt carries it), and nothing ever claims "verification passed"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CliRunner

pytestmark = pytest.mark.e2e


def test_without_verify_commands_nothing_claims_a_pass(cli: CliRunner, project: Path) -> None:
    cli("add", "Unverified change")
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    said = result.stderr.count("no verification configured")
    assert said == 1, result.stderr
    assert "verification passed" not in result.output
    shown = cli("show", "S-0001")
    assert "verify:    not configured: nothing is built or tested" in shown.stdout
    assert json.loads(cli("show", "S-0001", "--json").stdout)["verification"] == []
    review = (project / ".ai-sdlc" / "stories" / "S-0001" / "review.md").read_text()
    assert "No verification is configured" in review
    assert "Verification passed" not in review


def test_the_review_hears_whether_anything_was_verified(cli: CliRunner, project: Path) -> None:
    cli("add", "Verified change")
    cli("config", "verify.test", "true")
    cli("add", "Unverified change")
    prompts = {}
    for sid, configured in (("S-0001", True), ("S-0002", False)):
        if not configured:
            cli("config", "verify.test", "")
        result = cli("run", sid, "--json")
        assert result.returncode == 0, result.output
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        names = [e.get("event") for e in lines]
        assert ("verification_skipped" in names) is not configured
        assert ("verification_finished" in names) is configured
        prompts[sid] = (project / ".ai-sdlc" / "stories" / sid / "review.md").read_text()
    assert "Verification passed" in prompts["S-0001"]
    assert "No verification is configured" in prompts["S-0002"]


def test_the_review_prompt_carries_the_verification_note() -> None:
    from ai_sdlc.providers.base import Phase
    from ai_sdlc.workflow.engine.agents import StoryView, build_prompt
    from ai_sdlc.workflow.engine.judging import verification_note

    story = StoryView("S-0001", "Title", "Body\n", {})
    for context, expected in (
        ({"verification_configured": False}, "No verification is configured"),
        ({"verification_configured": True, "verification_passed": True}, "passed"),
        (
            {"verification_passed": False, "verification_output": "E  assert 1 == 2"},
            "FAILED on this change:\nE  assert 1 == 2",
        ),
    ):
        _, prompt = build_prompt(Phase.REVIEW, story, verification=verification_note(context))
        assert "## Verification" in prompt and expected in prompt
