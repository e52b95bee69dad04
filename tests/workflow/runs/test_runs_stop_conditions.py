"""Issue 5 through the real CLI: each run-level stop condition halts `run --auto` at its
threshold, gracefully (state persisted, exit 6, the command to continue), in priority order."""

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
    run_events,
    story_states,
    write_rules,
)

#: Blocks a story at its first refinement (1 agent attempt): a cheap "rejected" story.
REJECT_AT_REFINE = """
  - phase: refine
    story: {sid}
    decision: REJECTED
    feedback: Acceptance criteria are missing for {sid}.
"""


def rules_rejecting(root: Path, *sids: str) -> None:
    write_rules(root, "rules:\n" + "".join(REJECT_AT_REFINE.format(sid=s) for s in sids))


def config(stop: str, *, escalations: int = 10, extra: str = "") -> str:
    return (
        "limits:\n  refinement_iterations: 0\n"
        f"run:\n  max_consecutive_escalations: {escalations}\n  stop_conditions:\n{stop}" + extra
    )


def test_run_wide_attempt_cap_stops_before_the_next_attempt(tmp_path: Path) -> None:
    """The cap counts implementation attempts (first ones included), not phase calls: with a
    cap of 1, S-0001's review sending it back stops the run before the second attempt."""
    root = tmp_path / "p"
    make_project(root, ["One", "Two"], config("    max_total_attempts: 1\n"))
    write_rules(
        root,
        "rules:\n  - phase: review\n    story: S-0001\n    decision: RECOVERY\n"
        "    feedback: The implementation changed nothing; do it again.\n",
    )
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 6, result.output
    state = only_run(root)
    assert state["run_status"] == "stopped"
    assert state["stop_reason"]["condition"] == "max_total_attempts"
    assert state["stop_reason"]["value"] == 1
    assert state["stop_reason"]["threshold"] == 1
    # One implementation attempt ran; the story stopped between two phases, nothing half-done.
    assert phases_started(root, "S-0001") == ["refine", "research", "plan", "implement", "review"]
    assert phases_started(root, "S-0002") == []
    fm = frontmatter(root, "S-0001")
    assert fm["plan_complete"] is True and not fm.get("implementation_complete")
    assert state["resumable"] is True
    assert state["resume_from"] == "S-0001"
    assert story_states(state)["S-0001"]["status"] == "in-progress"
    assert state["statistics"]["implementation_attempts"] == 1
    assert state["statistics"]["total_attempts"] == 5
    assert "max_total_attempts" in result.output
    assert "the run made 1 implementation attempt, the run-wide limit" in result.stderr
    assert "2 stories are left" in result.output
    # The way out said once, by the reason (issue 36): not again as `to continue: …`.
    assert result.stderr.count("'ai-sdlc run --continue'") == 1, result.stderr
    assert "to continue:" not in result.stderr
    assert "  hint: every finished story is kept\n" in result.stderr
    names = [e["action"] for e in run_events(root, state["run_id"])]
    assert names[0] == "run_started" and names[-1] == "run_stopped"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_run_whose_last_story_used_the_last_attempt_completes(tmp_path: Path, jobs: str) -> None:
    """The cap stops the next attempt, not a run with nothing left: one story, a cap of 1,
    done at its first attempt → completed, exit 0 (it said "halted … 0 stories are left: go
    on with 'ai-sdlc run --continue'", exit 6, a way out that leads nowhere)."""
    root = tmp_path / "p"
    make_project(root, ["Only"], config("    max_total_attempts: 1\n"))
    result = run_cli(root, "run", "--auto", "--jobs", jobs)
    assert result.returncode == 0, result.output
    assert "0 stories are left" not in result.output and "halted" not in result.output
    state = only_run(root)
    assert state["run_status"] == "completed" and state["stop_reason"] is None
    assert story_states(state)["S-0001"]["status"] == "done"


def test_consecutive_fails_halt_at_the_threshold(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["A", "B", "C"], config("    max_consecutive_fails: 2\n"))
    rules_rejecting(root, "S-0001", "S-0002", "S-0003")
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 6, result.output
    state = only_run(root)
    assert state["stop_reason"]["condition"] == "max_consecutive_fails"
    assert (state["stop_reason"]["value"], state["stop_reason"]["threshold"]) == (2, 2)
    assert phases_started(root, "S-0003") == []
    stats = state["statistics"]
    assert (stats["attempted"], stats["rejected"], stats["consecutive_fails"]) == (2, 2, 2)
    assert story_states(state)["S-0003"]["status"] == "pending"
    assert state["resume_from"] == "S-0003"


def test_reject_rate_judges_only_after_min_attempted(tmp_path: Path) -> None:
    root = tmp_path / "p"
    stop = "    min_attempted: 3\n    max_reject_rate: 0.3\n    max_consecutive_fails: 10\n"
    make_project(root, ["A", "B", "C", "D"], config(stop))
    rules_rejecting(root, "S-0001", "S-0003")
    result = run_cli(root, "run", "--auto", "--json")
    assert result.returncode == 6, result.output
    state = only_run(root)
    reason = state["stop_reason"]
    # S-0001 failing first (rate 1.0) did not halt: only 1 of 3 required stories attempted.
    assert reason["condition"] == "max_reject_rate"
    assert reason["value"] == round(2 / 3, 4) and reason["threshold"] == 0.3
    assert [s["status"] for s in state["stories"]] == ["blocked", "done", "blocked", "pending"]
    assert phases_started(root, "S-0004") == []
    *_, finished, error = (json.loads(line) for line in result.stdout.splitlines())
    assert finished["event"] == "run_finished"
    assert finished["run"]["stop_reason"]["condition"] == "max_reject_rate"
    # A halted run is a failure (exit 6): the stream ends with the error event saying why.
    assert error["event"] == "error" and error["exit_code"] == 6
    assert "max_reject_rate" in error["message"]


def test_retry_rate_halts_when_most_stories_need_retries(tmp_path: Path) -> None:
    root = tmp_path / "p"
    stop = "    min_attempted: 2\n    max_retry_rate: 0.4\n"
    fast = "resilience:\n  policies:\n    llm:\n      initial_delay: 0.01\n      max_delay: 0.05\n"
    make_project(root, ["A", "B", "C"], config(stop, extra=fast))
    write_rules(
        root,
        "rules:\n"
        + "".join(
            f"  - phase: research\n    story: {sid}\n    times: 1\n"
            "    fault: {kind: rate_limit, retry_after: 0.01}\n"
            for sid in ("S-0001", "S-0002")
        ),
    )
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 6, result.output
    state = only_run(root)
    assert state["stop_reason"]["condition"] == "max_retry_rate"
    assert state["stop_reason"]["value"] == 1.0
    stories = story_states(state)
    assert stories["S-0001"]["status"] == stories["S-0002"]["status"] == "done"
    assert stories["S-0001"]["retries"] == 1
    assert stories["S-0003"]["status"] == "pending"
    assert frontmatter(root, "S-0002")["recovery_breakdown"]["api_retry"] == 1


def test_stop_conditions_are_validated_with_file_and_line(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["A"], "run:\n  stop_conditions:\n    max_retry_rate: 1.5\n")
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 3, result.output
    assert "config.yaml:3" in result.stderr
    assert "run.stop_conditions.max_retry_rate" in result.stderr
    (root / ".ai-sdlc" / "config.yaml").write_text("notify:\n  webhook: ftp://example.org/x\n")
    bad_url = run_cli(root, "run", "--auto")
    assert bad_url.returncode == 3
    assert "http(s) URL" in bad_url.stderr
    assert only_run_absent(root)


def only_run_absent(root: Path) -> bool:
    return not (root / ".ai-sdlc" / "runs").exists()


def test_a_resumed_run_judges_rates_afresh_and_finishes(tmp_path: Path) -> None:
    """After a reject-rate halt the operator fixes the cause and resumes: the two rejections from
    before the fix no longer halt the run (the rates cover the stories attempted since the
    resume), while the totals carry over and the resume says so."""
    root = tmp_path / "p"
    stop = "    min_attempted: 2\n    max_reject_rate: 0.3\n    max_consecutive_fails: 10\n"
    make_project(root, ["A", "B", "C", "D"], config(stop))
    rules_rejecting(root, "S-0001", "S-0002")
    halted = run_cli(root, "run", "--auto")
    assert halted.returncode == 6, halted.output
    first = only_run(root)
    assert first["stop_reason"]["condition"] == "max_reject_rate"
    (root / ".ai-sdlc" / "scripted.yaml").unlink()  # the fix
    resumed = run_cli(root, "run", "--resume", first["run_id"])
    # The rates did not halt it; it finished what it could, and says the rest is blocked.
    assert resumed.returncode == 5, resumed.output
    state = only_run(root)
    assert state["stop_reason"]["condition"] == "all_escalated"
    assert "S-0001 (blocked: " in state["stop_reason"]["message"]
    assert [s["status"] for s in state["stories"]] == ["blocked", "blocked", "done", "done"]
    assert state["counters"]["total_attempts"] > first["counters"]["total_attempts"]
    assert "carried over: 2 attempts" in resumed.stderr
    assert "start afresh" in resumed.stderr
