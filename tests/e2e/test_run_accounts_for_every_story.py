"""An unattended run accounts for every story: a story file that cannot be read is named with
its file:line reason and `run --auto` exits 3 ("completed without every story"), as `status`
does on the same file, both when the run did other work and when it found nothing else to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project


@pytest.mark.e2e
def test_run_auto_names_an_unreadable_story_and_fails(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, ["Readable", "Broken"], config='verify:\n  test: "true"\n')
    broken = root / ".ai-sdlc" / "stories" / "S-0002" / "story.md"
    text = broken.read_text()
    broken.write_text(text.replace("title: Broken", "title: Fix: crash", 1))
    assert run_cli(root, "status").returncode == 3

    result = run_cli(root, "run", "--auto")
    assert result.returncode == 3, result.output
    assert "completed without every story" in result.stdout, result.output
    assert "S-0002/story.md:" in result.stderr, result.stderr
    assert "S-0001: done" in result.stdout, result.output

    again = run_cli(root, "run", "--auto", "--json")
    assert again.returncode == 3, again.output
    finished = json.loads(again.stdout.splitlines()[-1])
    assert any("S-0002/story.md:" in u["message"] for u in finished["idle"]["unreadable"])
    assert "S-0002/story.md:" in again.stderr
