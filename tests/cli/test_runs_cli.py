"""`ai-sdlc runs`, `runs show`, `run --batch` and the option checks of multi-story runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project, phases_started, run_states


def test_batch_runs_the_given_stories_in_order_and_runs_lists_them(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["First by priority", "Second", "Not in the batch"])
    empty = run_cli(root, "runs", "--json")
    assert json.loads(empty.stdout) == {"runs": []}

    batch = run_cli(root, "run", "--batch", "S-0002", "S-0001", "--json")
    assert batch.returncode == 0, batch.output
    events = [json.loads(line) for line in batch.stdout.splitlines()]
    started = [e["story"] for e in events if e["event"] == "story_started"]
    assert started == ["S-0002", "S-0001"]
    assert phases_started(root, "S-0003") == []
    assert events[0]["event"] == "run_started"
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["run"]["run_status"] == "completed"

    auto = run_cli(root, "run", "--auto")
    assert auto.returncode == 0, auto.output
    listing = json.loads(run_cli(root, "runs", "--json").stdout)["runs"]
    assert [(r["mode"], r["run_status"], r["active"]) for r in listing] == [
        ("batch", "completed", False),
        ("auto", "completed", False),
    ]
    assert [s["story_id"] for s in listing[1]["stories"]] == ["S-0003"]
    assert listing[0]["statistics"]["approved"] == 2
    assert listing == [s | {"active": False} for s in run_states(root)]

    shown = run_cli(root, "runs", "show", listing[0]["run_id"])
    assert shown.returncode == 0, shown.output
    assert f"Run {listing[0]['run_id']} · batch · completed" in shown.stdout
    assert "S-0002  done" in shown.stdout
    shown_json = json.loads(run_cli(root, "runs", "show", listing[1]["run_id"], "--json").stdout)
    assert shown_json["run_id"] == listing[1]["run_id"]

    nothing = run_cli(root, "run", "--auto")
    assert nothing.returncode == 0
    assert "Nothing to run" in nothing.stderr
    assert len(run_states(root)) == 2  # no empty run recorded
    finished = run_cli(root, "run", "--continue")
    assert finished.returncode == 1
    assert "nothing to resume" in finished.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "S-0001", "S-0002"], "several with --batch"),
        (["run", "--batch"], "--batch needs the story ids"),
        (["run", "--auto", "--batch", "S-0001"], "not both"),
        (["run", "--resume", "20250101T000000Z-abcdef", "--auto"], "--resume/--continue take"),
        (["run", "--resume", "../../etc"], "is not a run id"),
        (["run", "--continue"], "no run to continue"),
        (["run", "--auto", "--step", "plan"], "cannot be used with a run"),
        (["runs", "show", "nonsense"], "is not a run id"),
    ],
)
def test_bad_run_options_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    root = tmp_path / "p"
    make_project(root, ["A", "B"])
    result = run_cli(root, *args)
    assert result.returncode == 2, result.output
    assert message in result.stderr
    assert run_states(root) == []


def test_unknown_run_id_is_not_found(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["A"])
    result = run_cli(root, "runs", "show", "20250101T000000Z-abcdef")
    assert result.returncode == 1
    assert "no run 20250101T000000Z-abcdef" in result.stderr
