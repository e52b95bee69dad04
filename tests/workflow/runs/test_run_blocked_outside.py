"""A run whose every story waits on a story blocked *outside* it (`run --auto --epic E2`, the
blocked dependency in E1) has left its backlog blocked as surely as one whose own story is
blocked: through the real CLI it names the story and the blocked dependency on stderr and
exits 5 (docs/runs.md "Nothing to run"); a dependency outside the run that is merely not done
yet is still a note, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_run_exit import add_field, edit
from tests.conftest import run_cli
from tests.support.runs_support import make_project, phases_started, run_states


def blocked_in_another_epic(tmp_path: Path, titles: list[str]) -> Path:
    """S-0001 blocked in epic E1; S-0002 ready, depending on it."""
    root = tmp_path / "p"
    make_project(root, titles)
    edit(root, "S-0001", "status: backlog", "status: blocked")
    add_field(root, "S-0001", "blocked_reason: waiting for the vendor")
    add_field(root, "S-0001", "epic: E1")
    edit(root, "S-0002", "status: backlog", "status: ready")
    add_field(root, "S-0002", "dependencies: [S-0001]")
    return root


def test_an_auto_run_whose_story_waits_on_a_blocked_story_outside_it_exits_5(
    tmp_path: Path,
) -> None:
    root = blocked_in_another_epic(tmp_path, ["Base", "Needs base"])
    add_field(root, "S-0002", "epic: E2")

    result = run_cli(root, "run", "--auto", "--epic", "E2")

    assert result.returncode == 5, result.output
    assert (
        "error: S-0002 cannot start: it depends on S-0001, which is blocked outside this run "
        "(waiting for the vendor); unblock S-0001 ('ai-sdlc unblock S-0001')"
    ) in " ".join(result.stderr.split())
    assert "1 remaining story cannot start (1 waiting on a blocked story outside this run)" in (
        result.stdout
    )
    assert "S-0002: waits on S-0001 (blocked)" in result.stdout
    assert "Traceback" not in result.output
    assert phases_started(root, "S-0001") == phases_started(root, "S-0002") == []
    assert run_states(root) == []  # nothing ran: no empty run recorded


def test_a_blocked_story_further_down_the_chain_is_named_and_in_the_json(tmp_path: Path) -> None:
    """S-0003 (E2) waits on S-0002 (E1, ready), which waits on the blocked S-0001."""
    root = blocked_in_another_epic(tmp_path, ["Base", "Middle", "Top"])
    add_field(root, "S-0002", "epic: E1")
    add_field(root, "S-0003", "dependencies: [S-0002]")
    add_field(root, "S-0003", "epic: E2")

    result = run_cli(root, "run", "--auto", "--epic", "E2", "--json")

    assert result.returncode == 5, result.output
    assert "S-0003 cannot start: it depends on S-0001, which is blocked outside this run" in (
        " ".join(result.stderr.split())
    )
    finished = json.loads(result.stdout.splitlines()[-1])
    assert finished["run"] is None and finished["idle"]["exit_code"] == 5
    [held] = finished["idle"]["held"]
    assert (held["story"], held["kind"], held["waits_on"]) == ("S-0003", "dependency", ["S-0002"])
    assert held["blocked_by"] == [{"story": "S-0001", "reason": "waiting for the vendor"}]


def test_a_dependency_outside_the_run_that_is_only_not_done_is_a_note_exit_0(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_project(root, ["Base", "Needs base"])
    add_field(root, "S-0001", "epic: E1")
    edit(root, "S-0002", "status: backlog", "status: ready")
    add_field(root, "S-0002", "dependencies: [S-0001]")
    add_field(root, "S-0002", "epic: E2")

    result = run_cli(root, "run", "--auto", "--epic", "E2")

    assert result.returncode == 0, result.output
    assert "S-0002: waits on S-0001 (backlog)" in result.stderr
    assert "error:" not in result.output


def mixed_run(tmp_path: Path) -> Path:
    """Epic E2: S-0002 waits on the blocked S-0001 (E1); S-0003 is free to run."""
    root = blocked_in_another_epic(tmp_path, ["Base", "Needs base", "Free"])
    add_field(root, "S-0002", "epic: E2")
    edit(root, "S-0003", "status: backlog", "status: ready")
    add_field(root, "S-0003", "epic: E2")
    return root


def test_a_run_that_did_its_work_but_left_a_story_waiting_on_a_blocked_one_exits_5(
    tmp_path: Path,
) -> None:
    root = mixed_run(tmp_path)

    result = run_cli(root, "run", "--auto", "--epic", "E2")

    assert result.returncode == 5, result.output
    assert "S-0003: done" in result.stdout
    assert "completed without every story" in result.stdout
    assert (
        "error: S-0002 cannot start: it depends on S-0001, which is blocked outside this run "
        "(waiting for the vendor); unblock S-0001 ('ai-sdlc unblock S-0001')"
    ) in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert phases_started(root, "S-0002") == []
    [state] = run_states(root)
    assert state["run_status"] == "completed"


def test_a_parallel_run_names_the_waiting_story_and_its_blocker_in_the_json(
    tmp_path: Path,
) -> None:
    root = mixed_run(tmp_path)

    result = run_cli(root, "run", "--auto", "--epic", "E2", "--jobs", "2", "--json")

    assert result.returncode == 5, result.output
    finished = json.loads(result.stdout.splitlines()[-1])
    assert finished["event"] == "run_finished" and finished["run"]["run_status"] == "completed"
    assert [(o["story_id"], o["result"]) for o in finished["outcomes"]] == [("S-0003", "done")]
    [held] = finished["held"]
    assert (held["story"], held["kind"], held["waits_on"]) == ("S-0002", "dependency", ["S-0001"])
    assert held["blocked_by"] == [{"story": "S-0001", "reason": "waiting for the vendor"}]


def test_a_run_that_skipped_a_story_whose_outside_dependency_is_only_not_done_exits_0(
    tmp_path: Path,
) -> None:
    root = mixed_run(tmp_path)
    edit(root, "S-0001", "status: blocked", "status: backlog")

    result = run_cli(root, "run", "--auto", "--epic", "E2", "--json")

    assert result.returncode == 0, result.output
    finished = json.loads(result.stdout.splitlines()[-1])
    assert finished["held"] == []
    assert [s["status"] for s in finished["run"]["stories"]] == ["skipped", "done"]


def test_an_auto_run_that_skipped_a_story_waiting_on_a_story_blocked_before_it_exits_0(
    tmp_path: Path,
) -> None:
    """Without `--epic` the run picked its stories itself: the one it could not start is a
    warning naming the blocked story and its `unblock`, and the run exits as its work earned
    (issue 36 item 11: a cron job stays green while one story stays blocked)."""
    root = mixed_run(tmp_path)

    result = run_cli(root, "run", "--auto")

    assert result.returncode == 0, result.output
    assert "S-0003: done" in result.stdout
    assert (
        "warning: S-0002 cannot start: it depends on S-0001, which is blocked outside this run "
        "(waiting for the vendor); unblock S-0001 ('ai-sdlc unblock S-0001')"
    ) in " ".join(result.stderr.split())
    assert "error:" not in result.output
    assert phases_started(root, "S-0002") == []
