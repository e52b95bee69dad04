"""Cooldown after a crash: the same story is not retried before `cooldown_until`; the run works
on other stories meanwhile, then waits showing the countdown. In-process with an injected clock
and sleep (real store, scripted provider, runner and run loop), and once for real via the CLI."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.runs.cooldown import parse, wait_until
from ai_sdlc.workflow.session import Session
from tests.conftest import run_cli
from tests.support.runs_support import make_project, only_run, run_events, story_events, write_rules

AUTH_FAULT_ONCE = (
    "rules:\n  - phase: research\n    story: S-0001\n    times: 1\n"
    "    fault: {kind: auth, message: token expired}\n"
)


class FakeTime:
    """A wall clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.moment = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
        self.sleeps: list[float] = []

    def now(self) -> dt.datetime:
        return self.moment

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.moment += dt.timedelta(seconds=seconds)


def _times(events: list[dict[str, Any]], action: str, phase: str) -> list[dt.datetime]:
    return [parse(e["time"]) for e in events if e["action"] == action and e.get("phase") == phase]


def test_a_crashed_story_waits_for_its_cooldown_while_others_run(tmp_path: Path) -> None:
    root = tmp_path / "p"
    store = make_project(root, ["Crashes once", "Healthy"], "run:\n  cooldown_seconds: 5\n")
    write_rules(root, AUTH_FAULT_ONCE)
    fake = FakeTime()
    shown: list[dict[str, Any]] = []
    session = Session.open(
        StoryStore(root),
        provider_name="scripted",
        emit=shown.append,
        clock=fake.now,
        sleep=fake.sleep,
    )
    report = session.run_many()
    assert report is not None
    state = report.state
    assert state.run_status == "completed"
    first = state.story("S-0001")
    assert first is not None
    assert (first.status, first.errors) == ("done", 1)
    assert first.last_error is not None and "token expired" in first.last_error
    # The healthy story ran during the cooldown; then the run waited the rest of it.
    order = [o.story_id for o in report.outcomes]
    assert order == ["S-0001", "S-0002", "S-0001"]
    assert sum(fake.sleeps) == 5.0
    assert [e["remaining"] for e in shown if e["event"] == "cooldown"] == [5.0, 4.0, 3.0, 2.0, 1.0]
    cooled = [e for e in run_events(root, state.run_id) if e["action"] == "story_cooldown"]
    until = parse(cooled[0]["until"])
    research = _times(story_events(root, "S-0001"), "phase_started", "research")
    assert len(research) == 2
    assert research[1] >= until > research[0]
    # The crash inside research was rolled back, the fault's counters kept.
    rollback = [e for e in story_events(root, "S-0001") if e["action"] == "rollback_initiated"]
    assert rollback[0]["phase"] == "research"
    assert store.get("S-0002").status == "done"


def test_wait_until_counts_down_and_returns_at_the_deadline() -> None:
    fake = FakeTime()
    until = (fake.now() + dt.timedelta(seconds=2.5)).isoformat()
    ticks: list[float] = []
    wait_until(until, clock=fake.now, sleep=fake.sleep, tick=ticks.append)
    assert ticks == [2.5, 1.5, 0.5]
    assert fake.sleeps == [1.0, 1.0, 0.5]
    wait_until(until, clock=fake.now, sleep=fake.sleep, tick=ticks.append)
    assert ticks == [2.5, 1.5, 0.5]  # already past: no wait at all


def test_cooldown_is_respected_for_real_through_the_cli(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Crashes once"], "run:\n  cooldown_seconds: 0.3\n")
    write_rules(root, AUTH_FAULT_ONCE)
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 0, result.output
    assert "cooldown:" in result.stderr
    state = only_run(root)
    cooled = [e for e in run_events(root, state["run_id"]) if e["action"] == "story_cooldown"]
    until = parse(cooled[0]["until"])
    research = _times(story_events(root, "S-0001"), "phase_started", "research")
    assert research[1] >= until
    assert (until - research[0]).total_seconds() >= 0.3
