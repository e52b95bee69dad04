"""Issue 26 "Runs count what happened", through the real CLI: a run that finds nothing to do
because every remaining story is blocked (or waits on a blocked one) says which, why and the
`unblock` that clears it; it exits 5 when the user named those stories (`--epic`), 0 when the
run picked from the backlog itself (`run`, `run --auto`, `watch --once`: issue 36 item 11, a
cron job does not fail for as long as one story stays blocked); one with nothing left (all
done, or no story) exits 0; a batch whose story is skipped for a dependency outside the run
says why and exits 1, as `run ID` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import (
    frontmatter,
    make_project,
    only_run,
    phases_started,
    run_states,
    story_states,
)


def edit(root: Path, sid: str, old: str, new: str) -> None:
    path = root / ".ai-sdlc" / "stories" / sid / "story.md"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def add_field(root: Path, sid: str, line: str) -> None:
    edit(root, sid, "\nstatus:", f"\n{line}\nstatus:")


def blocked_base(tmp_path: Path) -> Path:
    """S-0001 blocked (a human must act), S-0002 (ready) depends on it, both in epic E1."""
    root = tmp_path / "p"
    make_project(root, ["Base", "Needs base"])
    edit(root, "S-0001", "status: backlog", "status: blocked")
    add_field(root, "S-0001", "blocked_reason: waiting for the vendor")
    edit(root, "S-0002", "status: backlog", "status: ready")
    add_field(root, "S-0002", "dependencies: [S-0001]")
    for sid in ("S-0001", "S-0002"):
        add_field(root, sid, "epic: E1")
    return root


HINT = "hint: once the cause is fixed, 'ai-sdlc unblock S-0001' lets the next run take it"


def test_an_epic_left_blocked_says_so_and_exits_5(tmp_path: Path) -> None:
    root = blocked_base(tmp_path)
    result = run_cli(root, "run", "--auto", "--epic", "E1")
    assert result.returncode == 5, result.output
    assert "2 remaining stories cannot start (1 blocked)" in result.stdout
    assert "S-0001: blocked: waiting for the vendor" in result.stdout
    assert "S-0002: waits on S-0001 (blocked)" in result.stdout
    assert HINT in result.stderr
    assert "no story has an actionable next step" not in result.output
    assert "Traceback" not in result.output
    assert phases_started(root, "S-0001") == phases_started(root, "S-0002") == []
    assert run_states(root) == []  # nothing ran: no empty run recorded
    quiet = run_cli(root, "-q", "run", "--auto", "--epic", "E1")
    assert quiet.returncode == 5 and HINT in quiet.stderr  # the way out survives -q


@pytest.mark.parametrize(
    "command",
    [("run", "--auto"), ("run",), ("watch", "--once")],
    ids=["auto", "bare-run", "watch-once"],
)
def test_a_backlog_blocked_before_the_run_is_a_note_and_exits_0(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A run that picks its own stories did nothing wrong when the only ones left were blocked
    before it: it names them and the way out on stderr and exits 0, every time (a cron job
    stays green; the run that blocked the story exited 5)."""
    root = blocked_base(tmp_path)
    for _ in range(2):
        result = run_cli(root, *command)
        assert result.returncode == 0, result.output
        assert "2 remaining stories cannot start (1 blocked)" in result.stderr
        assert "S-0001: blocked: waiting for the vendor" in result.stderr
        assert "S-0002: waits on S-0001 (blocked)" in result.stderr
        assert HINT in result.stderr
        assert result.stdout == "" and "error:" not in result.output
    assert phases_started(root, "S-0001") == phases_started(root, "S-0002") == []
    assert run_states(root) == []  # nothing ran: no empty run recorded


def test_the_json_of_a_blocked_backlog_names_each_story_and_why(tmp_path: Path) -> None:
    root = blocked_base(tmp_path)
    result = run_cli(root, "run", "--auto", "--epic", "E1", "--json")
    assert result.returncode == 5, result.output
    finished = json.loads(result.stdout.splitlines()[-1])
    assert finished["event"] == "run_finished" and finished["run"] is None
    idle = finished["idle"]
    assert idle["exit_code"] == 5
    assert {h["story"]: (h["kind"], h["reason"], h["waits_on"]) for h in idle["held"]} == {
        "S-0001": ("blocked", "blocked: waiting for the vendor", []),
        "S-0002": ("dependency", "waits on S-0001 (blocked)", ["S-0001"]),
    }


def test_watch_once_json_ends_with_why_nothing_was_ready(tmp_path: Path) -> None:
    root = blocked_base(tmp_path)
    result = run_cli(root, "watch", "--once", "--json")
    assert result.returncode == 0, result.output
    finished = json.loads(result.stdout.splitlines()[-1])
    assert finished["event"] == "watch_finished" and finished["runs"] == []
    assert [h["story"] for h in finished["idle"]["held"]] == ["S-0001", "S-0002"]
    assert finished["idle"]["exit_code"] == 0


def test_a_story_at_the_global_limit_counts_as_blocked(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Spent"])
    edit(root, "S-0001", "status: backlog", "status: ready")
    add_field(root, "S-0001", "total_recovery_attempts: 10")
    add_field(root, "S-0001", "epic: E1")
    result = run_cli(root, "run", "--auto", "--epic", "E1")
    assert result.returncode == 5, result.output
    assert "S-0001: blocked: global recovery limit reached (10/10)" in result.stdout
    assert "'ai-sdlc unblock S-0001 --reset-retries'" in result.stderr


@pytest.mark.parametrize("command", [("run", "--auto"), ("run",), ("watch", "--once")])
def test_a_backlog_all_done_or_empty_has_nothing_to_run_and_exits_0(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    root = tmp_path / "p"
    make_project(root, ["One", "Two"])
    for sid in ("S-0001", "S-0002"):
        edit(root, sid, "status: backlog", "status: done")
    done = run_cli(root, *command)
    assert done.returncode == 0, done.output
    assert "no story has an actionable next step" in done.stderr
    assert "blocked" not in done.output
    empty = tmp_path / "empty"
    make_project(empty, [])
    nothing = run_cli(empty, *command)
    assert nothing.returncode == 0, nothing.output
    assert "no story has an actionable next step" in nothing.stderr


def test_waiting_only_for_an_approval_is_not_blocked(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Planned"], config="gates:\n  before_implementation: true\n")
    edit(root, "S-0001", "status: backlog", "status: in-progress")
    for flag in ("research_complete", "plan_complete"):
        edit(root, "S-0001", f"{flag}: false", f"{flag}: true")
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 0, result.output
    assert "1 remaining story cannot start:" in result.stderr
    assert "S-0001: waiting for approval: run 'ai-sdlc approve S-0001'" in result.stderr


def dependent_outside(tmp_path: Path) -> Path:
    """S-0002 depends on S-0001, which is in the backlog (not done)."""
    root = tmp_path / "p"
    make_project(root, ["Base", "Needs base"])
    add_field(root, "S-0002", "dependencies: [S-0001]")
    return root


def test_a_batch_skipping_its_story_for_a_dependency_outside_says_why_and_exits_1(
    tmp_path: Path,
) -> None:
    root = dependent_outside(tmp_path)
    result = run_cli(root, "run", "--batch", "S-0002")
    assert result.returncode == 1, result.output
    assert "completed without every story" in result.stdout
    assert "skipped S-0002" in result.stderr
    assert "depends on S-0001, which is backlog and not in this run" in result.stderr
    # The way out as commands that work, with the ids (not `--batch DEPENDENCY ID`).
    assert (
        "hint: run what it depends on first ('ai-sdlc run S-0001'), or add it to the batch "
        "('ai-sdlc run --batch S-0001 S-0002')"
    ) in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert phases_started(root, "S-0002") == []
    state = story_states(only_run(root))
    assert state["S-0002"]["status"] == "skipped"
    # The same refusal as `run ID`; `--ignore-dependencies` insists only for one story.
    single = run_cli(root, "run", "S-0002")
    assert single.returncode == 1 and "depends on S-0001 (backlog)" in single.stderr
    refused = run_cli(root, "run", "--batch", "S-0002", "--ignore-dependencies")
    assert refused.returncode == 2, refused.output


def test_a_batch_with_its_dependency_inside_completes_with_exit_0(tmp_path: Path) -> None:
    root = dependent_outside(tmp_path)
    result = run_cli(root, "run", "--batch", "S-0002", "S-0001")
    assert result.returncode == 0, result.output
    assert "completed." in result.stdout
    assert frontmatter(root, "S-0001")["status"] == frontmatter(root, "S-0002")["status"] == "done"
