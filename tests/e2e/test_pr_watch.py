"""`watch` following the PRs of two stories in review: the real runs (`Session.run_many`, as
`ai-sdlc watch` composes them), the real `gh`, the fake GitHub API counting the calls. The clock
and the wait for file changes are injected: each wait must end by the next PR look, and each
interval makes one look per PR (one GraphQL query each), plus one after a round's push.
`run --auto` then does the same in one pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ai_sdlc.config import load_config
from ai_sdlc.errors import ExitCode
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.session import Session
from ai_sdlc.workflow.watch import Watch
from tests.conftest import run_cli
from tests.support.git_support import git_env
from tests.support.pr_support import Loop, loop

__all__ = ["git_env", "loop"]  # fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("provider-sdks")]


class Ticks:
    """The watch's `Changes`: no story file changes; each wait lets the injected clock run to
    the timeout the watch asks for, then does the next scripted thing on GitHub."""

    name = "ticks"

    def __init__(self, clock: list[float], script: list[Callable[[], None]]) -> None:
        self.clock = clock
        self.script = script
        self.timeouts: list[float | None] = []

    def start(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)
        if timeout is None or not self.script:
            raise KeyboardInterrupt  # nothing to wake for: the test ends the watch
        self.clock[0] += timeout
        self.script.pop(0)()

    def close(self) -> None:
        pass


def test_watch_and_run_auto_pick_up_feedback_with_one_query_per_pr(loop: Loop) -> None:
    stories = [loop.story, loop.add("Greet twice")]
    for sid in stories:
        assert loop.run(story=sid).returncode == ExitCode.IN_REVIEW
        assert loop.fm(sid)["status"] == "in-review"
    github = loop.github
    numbers = {sid: int(str(loop.fm(sid)["pr_url"]).rsplit("/", 1)[1]) for sid in stories}
    interval = load_config(loop.repo.root).typed().pr.poll_seconds
    marks: list[int] = []

    def looks() -> dict[int, int]:
        """PullRequestFeedback queries per PR number since the last mark."""
        start = marks[-1] if marks else 0
        counted: dict[int, int] = {}
        for request in github.requests[start:]:
            if request.operation == "PullRequestFeedback":
                number = int(request.body["variables"]["number"])
                counted[number] = counted.get(number, 0) + 1
        return counted

    per_interval: list[dict[int, int]] = []
    others: list[list[str]] = []

    def close_interval() -> None:
        per_interval.append(looks())
        start = marks[-1] if marks else 0
        others.append(
            [
                r.operation or r.path
                for r in github.requests[start:]
                if r.operation != "PullRequestFeedback"
            ]
        )
        marks.append(len(github.requests))

    def feedback_on_the_second() -> None:
        close_interval()
        pr = github.pull(numbers[stories[1]])
        github.review(pr, "alice", "CHANGES_REQUESTED", lines=(("hello.py", 2, "Rename it."),))

    marks.append(len(github.requests))
    clock = [1000.0]
    changes = Ticks(clock, [feedback_on_the_second, close_interval, close_interval])
    store = StoryStore(loop.repo.root)

    def run(ids: list[str]) -> Any:
        with Session.open(store, provider_name=None, emit=lambda _e: None) as session:
            return session.run_many(story_ids=ids, jobs=1)

    watch = Watch(
        store,
        run=run,
        emit=lambda _e: None,
        changes=changes,
        pr_interval=interval,
        monotonic=lambda: clock[0],
    )
    result = watch.serve()

    assert result.stopped_by == "SIGINT"
    # Every wait ended by the next PR look (one interval after the last).
    assert changes.timeouts[:3] == [interval, interval, interval]
    first, second, third = per_interval
    assert first == {1: 1, 2: 1} and others[0] == []
    # The feedback given during the first interval is acted on at the next look: one round,
    # and one more look after its push (the threads answered).
    assert second == {1: 1, 2: 2}
    assert loop.fm(stories[1])["pr_round"] == 1
    assert loop.fm(stories[1])["status"] == "in-review"
    assert "AddThreadReply" in others[1] and "ResolveThread" in others[1]
    assert third == {1: 1, 2: 1} and others[2] == []
    assert loop.fm(stories[0]).get("total_recovery_attempts", 0) == 0

    # `run --auto` (one pass, as cron runs it) looks at each PR once too: the first, with new
    # feedback, a look and one more after its round's push; the second, nothing new, one look.
    github.review(github.pull(numbers[stories[0]]), "alice", "CHANGES_REQUESTED", "Again.")
    before = len(github.calls("PullRequestFeedback"))

    auto = run_cli(loop.repo.root, "run", "--auto", env=loop.env, timeout=180)

    assert auto.returncode == ExitCode.IN_REVIEW, auto.output
    assert loop.fm(stories[0])["status"] == "in-review" and loop.fm(stories[0])["pr_round"] == 1
    assert loop.fm(stories[1])["status"] == "in-review" and loop.fm(stories[1])["pr_round"] == 1
    assert loop.fm(stories[1])["total_recovery_attempts"] == 1  # not reworked again
    assert len(github.calls("PullRequestFeedback")) - before == 3
