"""`ai-sdlc report <run>` after a story of the run is archived: archiving moves the story's folder
to `.ai-sdlc/archive/`, it does not destroy its history, so the report still has its title, its
phases and its events (as `runs show` already had)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project

pytestmark = pytest.mark.e2e


def test_a_run_is_reported_after_its_stories_are_archived(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Export the ledger", "Import the ledger"])
    ran = run_cli(root, "run", "--auto")
    assert ran.returncode == 0, ran.output
    before = run_cli(root, "report", "--json")
    assert before.returncode == 0, before.output
    run_id = json.loads(before.stdout)["run"]["run_id"]

    archived = run_cli(root, "archive", "S-0001")
    assert archived.returncode == 0, archived.output
    assert (root / ".ai-sdlc" / "archive" / "S-0001" / "story.md").is_file()

    after = run_cli(root, "report", run_id, "--json")
    assert after.returncode == 0, after.output
    # The archived story's title, phases and events are all still there.
    assert json.loads(after.stdout)["stories"] == json.loads(before.stdout)["stories"]
    story = json.loads(after.stdout)["stories"][0]
    assert story["id"] == "S-0001" and story["title"] == "Export the ledger"
    assert story["events"] and story["phases"]

    summary = run_cli(root, "report", run_id)
    assert summary.returncode == 0, summary.output
    assert "S-0001  done" in summary.stdout
