"""`ai-sdlc watch` as a real process following a PR (issue 34): the real `gh` against the fake
GitHub, `pr.poll_seconds: 1`. Feedback given while it watches comes back as one pushed and
answered round; SIGINT then stops the daemon cleanly (exit 130, the story whole, in review).

No sleep synchronises anything: each step waits for what the daemon leaves behind (the fake
server's recorded queries, the story's events, the bare origin's branch tip), with a deadline."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from ai_sdlc.errors import ExitCode
from tests.support.git_support import git_env
from tests.support.pr_support import Loop, loop
from tests.support.runs_support import start_cli, stop_or_explain
from tests.support.waits import GUARD

__all__ = ["git_env", "loop"]  # fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("provider-sdks")]


def wait_until(what: str, done: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    """Until `done()` holds (polled; the daemon's own traces, not a time window), failing with
    the daemon's stderr when it dies or the deadline passes."""
    deadline = time.monotonic() + 90
    while not done():
        if proc.poll() is not None or time.monotonic() > deadline:
            _, err = stop_or_explain(proc, timeout=1) if proc.poll() is None else proc.communicate()
            raise AssertionError(f"never saw {what}; watch's stderr:\n{err}")
        time.sleep(0.05)


def test_the_watch_daemon_pushes_a_round_for_feedback_then_stops_on_sigint(loop: Loop) -> None:
    config = loop.repo.root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text().replace("poll_seconds: 60", "poll_seconds: 1"))
    assert loop.run().returncode == ExitCode.IN_REVIEW
    pr = loop.github.pull(1)
    before = loop.origin_tip(pr.head)
    looks = len(loop.github.calls("PullRequestFeedback"))

    proc = start_cli(loop.repo.root, "watch", env=loop.env)
    try:
        # Following the PR: two looks, so a poll interval went by with nothing to do.
        wait_until(
            "the daemon looking at the PR twice",
            lambda: len(loop.github.calls("PullRequestFeedback")) >= looks + 2,
            proc,
        )
        assert loop.origin_tip(pr.head) == before  # nothing new: nothing pushed
        [thread] = loop.github.review(
            pr, "alice", "CHANGES_REQUESTED", lines=(("hello.py", 1, "Drop the comment."),)
        )
        wait_until(
            "the round answered on the PR",
            lambda: any(e.get("action") == "pr_answered" for e in loop.events()),
            proc,
        )
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    proc.send_signal(signal.SIGINT)
    out, err = stop_or_explain(proc, timeout=GUARD)  # a daemon deaf to SIGINT fails here

    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    fm = loop.fm()  # the story file whole after the interrupt
    assert fm["status"] == "in-review"
    assert fm["pr_round"] == 1 and fm["total_recovery_attempts"] == 1
    assert dict(fm["recovery_breakdown"]) == {"pr_rework": 1}  # type: ignore[call-overload]
    after = loop.origin_tip(pr.head)
    assert after != before
    assert thread.resolved and after[:12] in thread.comments[-1].body
    [prompt] = loop.agent.prompts["rework"]
    assert "hello.py:1" in prompt and "Drop the comment." in prompt
    [answered] = [e for e in loop.events() if e.get("action") == "pr_answered"]
    assert answered["commit"] == after
    assert "Traceback" not in out
