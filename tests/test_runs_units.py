"""The run-level pieces on their own: stop-condition order and thresholds, statistics, bounce
detection, the run repository, and the notifier's failure handling (real subprocesses, a real
HTTP server on 127.0.0.1)."""

from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError, UsageError
from ai_sdlc.workflow.runs.loops import is_step_back
from ai_sdlc.workflow.runs.notify import Notifier
from ai_sdlc.workflow.runs.runstate import (
    RunCounters,
    RunNotFoundError,
    RunRepository,
    RunState,
    StopReason,
    StoryRunState,
)
from ai_sdlc.workflow.runs.stopconditions import (
    RunStatistics,
    StopConditions,
    attempts_exhausted,
    compute_statistics,
    evaluate,
)


def stats(**changes: float) -> RunStatistics:
    base = dict(
        total_stories=10,
        attempted=5,
        approved=5,
        blocked=0,
        rejected=0,
        failed=0,
        waiting=0,
        retried=0,
        retry_rate=0.0,
        reject_rate=0.0,
        consecutive_fails=0,
        segment_attempted=5,
        segment_failing=0,
        segment_retried=0,
        total_attempts=10,
    )
    base.update(changes)
    return RunStatistics(**base)  # type: ignore[arg-type]


def test_conditions_trip_in_priority_order() -> None:
    conditions = StopConditions()
    everything = stats(consecutive_fails=3, reject_rate=0.9, retry_rate=0.9)
    order = []
    for fix in ({"consecutive_fails": 0}, {"reject_rate": 0.0}, {}):
        reason = evaluate(everything, conditions)
        assert reason is not None
        order.append(reason.condition)
        everything = stats(**{**everything.to_json(), **fix})
    assert order == [
        "max_consecutive_fails",
        "max_reject_rate",
        "max_retry_rate",
    ]
    assert evaluate(stats(), conditions) is None
    # The attempt cap is checked before each implementation attempt, not after an outcome.
    assert evaluate(stats(total_attempts=500), conditions) is None
    capped = attempts_exhausted(50, conditions, left=3)
    assert capped is not None and capped.condition == "max_total_attempts"
    assert "50 implementation attempts" in capped.message and "3 stories are left" in capped.message
    assert attempts_exhausted(49, conditions) is None


def test_rates_judge_only_from_min_attempted_and_only_above_the_maximum() -> None:
    conditions = StopConditions(max_reject_rate=0.3, min_attempted=4)
    assert evaluate(stats(segment_attempted=3, reject_rate=1.0), conditions) is None
    assert evaluate(stats(segment_attempted=10, reject_rate=0.3), conditions) is None
    tripped = evaluate(stats(segment_attempted=10, reject_rate=0.31, segment_failing=4), conditions)
    assert tripped == StopReason(
        "max_reject_rate",
        0.31,
        0.3,
        "reject rate 0.31 is above run.stop_conditions.max_reject_rate = 0.3 "
        "(4 of 10 attempted stories were blocked or failed)",
    )
    # Consecutive fails do not wait for min_attempted.
    streak = evaluate(stats(segment_attempted=2, consecutive_fails=3), conditions)
    assert streak is not None and streak.condition == "max_consecutive_fails"


def test_statistics_count_only_stories_the_run_worked_on() -> None:
    stories = [
        StoryRunState("S-0001", status="done", outcomes=1, retries=2),
        StoryRunState("S-0002", status="blocked", outcomes=1, rejections=1),
        StoryRunState("S-0006", status="blocked", outcomes=1),
        StoryRunState("S-0003", status="failed", outcomes=1, errors=1),
        StoryRunState("S-0004", status="waiting", outcomes=1),
        StoryRunState("S-0005"),
    ]
    result = compute_statistics(stories, RunCounters(total_attempts=12, consecutive_fails=2))
    assert result.to_json() == {
        "total_stories": 6,
        "attempted": 5,
        "approved": 1,
        "blocked": 2,  # a block is a block; one of them a rejection
        "rejected": 1,
        "failed": 1,
        "waiting": 1,
        "retried": 2,
        "retry_rate": 0.4,
        "reject_rate": 0.6,
        "segment_attempted": 5,
        "segment_failing": 3,
        "segment_retried": 2,
        "consecutive_fails": 2,
        "total_attempts": 12,
        "implementation_attempts": 0,
    }


@pytest.mark.parametrize(
    ("previous", "current", "back"),
    [
        ("review", "implement", True),
        ("review", "rework", True),
        ("review", "plan", True),
        ("implement", "implement", False),
        ("rework", "implement", False),
        ("plan", "implement", False),
        ("refine", "refine", False),
        (None, "review", False),
    ],
)
def test_a_bounce_is_a_step_back_in_the_cycle(
    previous: str | None, current: str, back: bool
) -> None:
    assert is_step_back(previous, current) is back


def test_repository_round_trip_listing_and_errors(tmp_path: Path) -> None:
    repo = RunRepository(tmp_path / ".ai-sdlc")
    newer = RunState("20250302T000000Z-00000b", "auto", "2025-03-02T00:00:00.000Z")
    older = RunState(
        "20250301T000000Z-00000a",
        "batch",
        "2025-03-01T00:00:00.000Z",
        stories=[StoryRunState("S-0001", bounces=2)],
    )
    older.stop_reason = StopReason("max_retry_rate", 0.75, 0.5, "too many retries")
    older.counters.streak = ["S-0001"]
    repo.create(newer)
    repo.create(older)
    assert [s.run_id for s in repo.list()] == [older.run_id, newer.run_id]
    assert repo.load(older.run_id) == older
    with pytest.raises(UsageError):
        repo.load("../../etc")
    with pytest.raises(RunNotFoundError):
        repo.load("20250303T000000Z-00000c")
    (repo.folder(newer.run_id) / "state.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match=r"state\.json"):
        repo.load(newer.run_id)


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(500)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def test_notifier_failures_are_reported_never_raised(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x?token=s3cret"
        failing = Notifier(
            command=[sys.executable, "-c", "import sys; sys.exit('notifier is down')"],
            webhook=url,
            cwd=tmp_path,
        )
        results = failing.send({"run_id": "r"})
    finally:
        server.shutdown()
        server.server_close()
    assert [(r.channel, r.ok, r.detail) for r in results] == [
        (f"command {sys.executable}", False, "exited 1: notifier is down"),
        ("webhook http://127.0.0.1", False, "HTTP 500"),
    ]
    slow = Notifier(
        command=[sys.executable, "-c", "import time; time.sleep(5)"],
        webhook="file:///etc/passwd",
        cwd=tmp_path,
        timeout=0.3,
    )
    timed_out, refused = slow.send({})
    assert (timed_out.ok, timed_out.detail) == (False, "timed out after 0.3s")
    assert (refused.ok, refused.detail) == (False, "only http and https URLs are posted to")
    assert not Notifier(command=None, webhook=None, cwd=tmp_path).enabled
