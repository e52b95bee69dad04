"""What a story run writes, and when: resilience metrics are flushed at the run's boundaries (and
exact once it ends, summed over processes), and the state owner's check right after its own
transaction sees any change made since, byte for byte."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.resilience import PolicyManager
from ai_sdlc.resilience.clock import ManualClock
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import run_cli
from tests.support.runs_support import make_project


def _metrics(root: Path) -> dict[str, dict[str, float]]:
    path = root / ".ai-sdlc" / "state" / "metrics.json"
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text())["policies"])


def test_metrics_are_flushed_once_the_interval_passed_and_at_once_on_a_stop(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    manager = PolicyManager(
        project_root=tmp_path, clock=clock, sleep=clock.sleep, budget=False, flush_interval=2.0
    )
    manager.execute_with_policy("github", lambda: None)
    clock.advance(1.5)
    manager.execute_with_policy("github", lambda: None)
    manager.flush_if_due()
    assert _metrics(tmp_path) == {}  # both within the interval: pending, in memory
    clock.advance(0.5)
    manager.execute_with_policy("github", lambda: None)  # 2 s since the last flush
    assert _metrics(tmp_path)["github"]["operations"] == 3
    manager.execute_with_policy("github", lambda: None)
    assert _metrics(tmp_path)["github"]["operations"] == 3

    def stop(attempt: int, delay: float, error: BaseException, reason: str) -> None:
        raise StoryBlockedError("global recovery limit", story_id="S-0001")

    def fails() -> None:
        raise TimeoutError("timed out")

    with pytest.raises(StoryBlockedError):
        manager.execute_with_policy("verification", fails, on_retry=stop)
    flushed = _metrics(tmp_path)  # a guardrail stop flushes everything at once
    assert flushed["github"]["operations"] == 4
    assert flushed["verification"]["aborted"] == 1


def test_metrics_are_exact_after_each_run(tmp_path: Path) -> None:
    root = tmp_path / "p"
    passes = shlex.join([sys.executable, "-c", "pass"])
    make_project(root, ["First", "Second"], f"verify:\n  test: {json.dumps(passes)}\n")
    for sid, runs in (("S-0001", 1), ("S-0002", 2)):
        result = run_cli(root, "run", sid)
        assert result.returncode == 0, result.output
        report = json.loads(run_cli(root, "metrics", "--json").stdout)["policies"]
        # One agent call per phase (refine, research, plan, implement, review) and one
        # verification per implementation attempt, every one counted by the time the run ends.
        assert report["llm"]["operations"] == 5 * runs
        assert report["llm"]["successes"] == 5 * runs
        assert report["verification"]["operations"] == runs
        # Not a git repository: what an attempt changed is hashed in-process (no git, no
        # `github` policy operation; in a repository git is asked, see test_git_calls.py).
        assert report.get("github", {}).get("operations", 0) == 0


def test_the_check_after_the_owners_own_write_sees_any_later_change(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", ["Story"])
    owner = StoryState(store, limit=3)
    owner.record_recovery("S-0001", "api_retry")
    assert owner.ensure_can_act("S-0001").counter("total_recovery_attempts") == 1
    owner.record_recovery("S-0001", "api_retry")

    # A hand edit right after the owner's write, in place and the same size (so the file's
    # timestamps may well not move): the counter raised to the limit is seen.
    path = store.story_path("S-0001")
    text = path.read_bytes()
    path.write_bytes(text.replace(b"total_recovery_attempts: 2", b"total_recovery_attempts: 3"))
    with pytest.raises(StoryBlockedError, match="Global recovery limit exceeded"):
        owner.ensure_can_act("S-0001")


def test_the_check_after_the_owners_own_write_sees_another_owners_write(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", ["Story"])
    owner = StoryState(store)
    owner.record_recovery("S-0001", "api_retry")
    assert owner.ensure_can_act("S-0001").counter("total_recovery_attempts") == 1
    owner.record_recovery("S-0001", "api_retry")
    elsewhere = StoryState(store)  # another process's owner
    elsewhere.record_recovery("S-0001", "refinement")
    story = owner.ensure_can_act("S-0001")
    assert story.counter("total_recovery_attempts") == 3
    assert story.recovery_breakdown == {"api_retry": 2, "refinement": 1}

    # The ledger lowered in the file right after the owner's write is restored by the check.
    owner.record_recovery("S-0001", "api_retry")
    path = store.story_path("S-0001")
    path.write_bytes(
        path.read_bytes().replace(b"total_recovery_attempts: 4", b"total_recovery_attempts: 0")
    )
    assert owner.ensure_can_act("S-0001").counter("total_recovery_attempts") == 4
    assert b"total_recovery_attempts: 4" in path.read_bytes()
