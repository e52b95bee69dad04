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


# --- stop conditions and failure loops, exactly (mutation survivors) -------------------------


def test_stop_conditions_come_from_the_project_config(tmp_path: Path) -> None:
    from ai_sdlc.config import load_config
    from tests.support.runs_support import make_project

    make_project(
        tmp_path,
        [],
        "run:\n  stop_conditions:\n    max_retry_rate: 0.25\n    max_reject_rate: 0.125\n"
        "    max_consecutive_fails: 7\n    max_total_attempts: 90\n    min_attempted: 6\n",
    )
    conditions = StopConditions.from_config(load_config(tmp_path, environ={}))
    assert conditions == StopConditions(
        max_retry_rate=0.25,
        max_reject_rate=0.125,
        max_consecutive_fails=7,
        max_total_attempts=90,
        min_attempted=6,
    )


def test_each_stop_reason_says_what_tripped_and_the_key_to_change() -> None:
    conditions = StopConditions(max_consecutive_fails=3, max_retry_rate=0.4, min_attempted=2)
    streak = evaluate(stats(consecutive_fails=3), conditions)
    assert streak == StopReason(
        "max_consecutive_fails",
        3,
        3,
        "3 stories in a row failed (run.stop_conditions.max_consecutive_fails = 3)",
    )
    retries = evaluate(stats(attempted=5, retried=3, segment_retried=3, retry_rate=0.6), conditions)
    assert retries == StopReason(
        "max_retry_rate",
        0.6,
        0.4,
        "retry rate 0.60 is above run.stop_conditions.max_retry_rate = 0.4 "
        "(3 of 5 attempted stories needed a retry)",
    )
    # a rate at its threshold is not above it
    assert evaluate(stats(attempted=5, retried=2, retry_rate=0.4), conditions) is None


def test_a_step_back_needs_two_known_phases_the_second_earlier() -> None:
    assert is_step_back("review", "implement") and is_step_back("plan", "refine")
    assert not is_step_back("implement", "review")
    assert not is_step_back("rework", "implement")  # the same place in the cycle
    assert not is_step_back(None, "plan")
    assert not is_step_back("unknown", "plan")
    assert not is_step_back("review", "unknown")


def test_bounce_reasons_and_failure_loops_say_what_to_look_at() -> None:
    from ai_sdlc.workflow.runs.loops import ALL_ESCALATED, FailureLoop, bounce_reason

    assert bounce_reason(3, 2, "review", "implement") == (
        "Bounce loop: work went back to an earlier phase 3 times in this run "
        "(last review → implement; limit run.max_bounces = 2). "
        "The story keeps being sent back; look at the review feedback in its events.jsonl"
    )
    loop = FailureLoop(ALL_ESCALATED, ["S-0001"], "review", "why", "tail", 1, 2)
    data = loop.to_json()
    assert data["message"] == loop.message and data["loop_type"] == ALL_ESCALATED
    assert data["stories"] == ["S-0001"]


def test_the_failure_tail_is_the_last_feedback_else_the_last_block_reason(
    tmp_path: Path,
) -> None:
    from ai_sdlc.workflow.runs.loops import failure_tail
    from ai_sdlc.workflow.state.events import append_events

    folder = tmp_path / "S-0001"
    folder.mkdir()
    assert failure_tail(folder) == ""
    append_events(
        folder,
        [
            {"action": "recovery", "reason": "not a block"},
            {"action": "blocked", "reason": 7},
        ],
    )
    assert failure_tail(folder) == ""  # neither feedback nor a block with a reason
    append_events(folder, [{"action": "blocked", "reason": "first block"}])
    append_events(folder, [{"action": "blocked", "reason": "Global recovery limit"}])
    assert failure_tail(folder) == "Global recovery limit"
    append_events(
        folder,
        [
            {"action": "phase", "feedback": "  indented first\nsecond\nthird\n\n"},
            {"action": "phase", "feedback": "   "},  # blank feedback does not replace it
            {"action": "blocked", "reason": "a later block"},
        ],
    )
    assert failure_tail(folder) == "  indented first\nsecond\nthird"
    assert failure_tail(folder, lines=2) == "second\nthird"


def test_no_story_attempted_means_rates_of_zero_and_the_cap_names_its_key() -> None:
    from ai_sdlc.workflow.runs.stopconditions import attempts_exhausted

    empty = compute_statistics([], RunCounters())
    assert (empty.attempted, empty.retry_rate, empty.reject_rate) == (0, 0.0, 0.0)
    assert attempts_exhausted(49, StopConditions(max_total_attempts=50)) is None
    assert attempts_exhausted(50, StopConditions(max_total_attempts=50)) == StopReason(
        "max_total_attempts",
        50,
        50,
        "the run made 50 implementation attempts, the run-wide limit "
        "(run.stop_conditions.max_total_attempts = 50)",
    )


def test_the_attempt_cap_names_the_stories_left_and_how_to_go_on() -> None:
    conditions = StopConditions(max_total_attempts=20)
    one = attempts_exhausted(20, conditions, left=1)
    assert one is not None and one.message == (
        "the run made 20 implementation attempts, the run-wide limit "
        "(run.stop_conditions.max_total_attempts = 20); 1 story is left: go on with "
        "'ai-sdlc run --continue' (another 20 attempts), or set this run's cap with "
        "'ai-sdlc run --continue --max-attempts N'"
    )
    single = attempts_exhausted(1, StopConditions(max_total_attempts=1), left=1)
    assert single is not None and "made 1 implementation attempt, the" in single.message
    assert "(another 1 attempt)" in single.message
    two = attempts_exhausted(21, conditions, left=2)
    assert two is not None and "; 2 stories are left: go on with" in two.message
    assert (two.value, two.threshold) == (21, 20)


def test_rates_are_judged_once_exactly_min_attempted_stories_were_attempted() -> None:
    conditions = StopConditions(max_reject_rate=0.3, min_attempted=4)
    tripped = evaluate(stats(segment_attempted=4, reject_rate=0.5, segment_failing=2), conditions)
    assert tripped is not None and tripped.condition == "max_reject_rate"
    assert evaluate(stats(segment_attempted=3, reject_rate=0.67), conditions) is None


def test_a_resumed_runs_rates_cover_only_the_stories_of_its_segment() -> None:
    """Before the resume (segment 1) two stories failed; after it (segment 2) one story needed
    a single retry and one was approved. Totals cover both segments; rates only segment 2."""
    stories = [
        StoryRunState("S-0001", status="blocked", outcomes=1, segment=1, retries=3),
        StoryRunState("S-0002", status="failed", outcomes=1, segment=1, errors=1),
        StoryRunState("S-0003", status="done", outcomes=1, segment=2, retries=1),
        StoryRunState("S-0004", status="done", outcomes=2, segment=2),
        StoryRunState("S-0005", segment=2),  # not worked on
    ]
    counters = RunCounters(total_attempts=30, consecutive_fails=0, implementation_attempts=9)
    result = compute_statistics(stories, counters, segment=2)
    assert (result.attempted, result.retried, result.blocked, result.failed) == (4, 3, 1, 1)
    assert (result.segment_attempted, result.segment_failing, result.segment_retried) == (2, 0, 1)
    assert (result.retry_rate, result.reject_rate) == (0.5, 0.0)
    assert (result.total_attempts, result.implementation_attempts) == (30, 9)


def test_rates_are_rounded_to_four_places() -> None:
    stories = [
        StoryRunState("S-0001", status="blocked", outcomes=1),
        StoryRunState("S-0002", status="done", outcomes=1, retries=1),
        StoryRunState("S-0003", status="done", outcomes=1, retries=1),
    ]
    result = compute_statistics(stories, RunCounters())
    assert (result.reject_rate, result.retry_rate) == (0.3333, 0.6667)
