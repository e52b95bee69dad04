"""The repository's own backlog (.ai-sdlc/ at the top) is managed with ai-sdlc and must load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import run_cli
from tests.support.paths import ROOT

REPO = ROOT


def test_own_backlog_loads_and_covers_the_guardrails(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(REPO / ".ai-sdlc", copy / ".ai-sdlc", ignore=shutil.ignore_patterns(".cache"))
    result = run_cli(copy, "status", "--json")
    assert result.returncode == 0, result.output
    titles = " | ".join(s["title"].lower() for s in json.loads(result.stdout)["stories"])
    for topic in (
        "global recovery",
        "failure-loop",
        "retry engine",
        "stop conditions",
        "rollback and cooldown",
    ):
        assert topic in titles, topic
