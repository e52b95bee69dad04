"""The state owner in process: exactly what each operation writes (story.md, ledger, events),
on an injected clock.

Each test pins a promise that `make mutants` found no other test pinning closely enough.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ai_sdlc.errors import AiSdlcError, BusyError, StoryBlockedError, UsageError
from ai_sdlc.providers.base import Phase, Usage
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.ledger import limit_message
from ai_sdlc.workflow.state.runlock import run_lock
from ai_sdlc.workflow.state.steps import RecoveryRecord
from ai_sdlc.workflow.state.transitions import PhaseLimit, StoryState
from tests.support.owner_support import (
    DAY,
    NOW,
    SID,
    STAMP,
    actions_of,
    hand_edit,
    owner_in,
)
from tests.support.runs_support import frontmatter, make_project, story_events

# --- the state owner, in process: what each operation writes ---------------------------------


def test_an_attempt_is_reserved_failed_counted_then_passed(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    first = owner.begin_action(SID, Phase.IMPLEMENT, checkpoint="cp-1")
    assert (first.attempt, first.last_failure, first.verified) == (1, None, None)
    assert owner.ledger(SID).open == {
        "kind": "implementation_retry",
        "phase": "implement",
        "attempt": 1,
        "time": STAMP,
        "checkpoint": "cp-1",
    }
    feedback = "E   assert 1 == 2\n" + "x" * 3000
    record = owner.fail_attempt(
        SID,
        Phase.IMPLEMENT,
        "implementation_retry",
        outcome="tests_failed",
        feedback=feedback,
        signature="sig",
        workspace_changed=True,
        reason="the tests failed",
        patch=(1, "diff --git a b\n"),
        usage=Usage(input_tokens=3, output_tokens=4, cost_usd=0.5),
    )
    assert record == RecoveryRecord(SID, "implementation_retry", 1, {"implementation_retry": 1})
    failure = {
        "phase": "implement",
        "outcome": "tests_failed",
        "signature": "sig",
        "feedback": feedback[:2000],
        "workspace_changed": True,
    }
    ledger = owner.ledger(SID)
    assert (ledger.open, ledger.last_failure, ledger.total, ledger.seq) == (None, failure, 1, 2)
    fm = frontmatter(root, SID)
    assert fm["total_recovery_attempts"] == 1
    assert fm["recovery_breakdown"]["implementation_retry"] == 1
    assert fm["implementation_retry_count"] == 1
    assert fm["usage"] == {"input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5, "calls": 1}
    folder = root / ".ai-sdlc" / "stories" / SID
    assert (folder / "attempts" / "1.patch").read_text() == "diff --git a b\n"
    second = owner.begin_action(SID, Phase.IMPLEMENT)
    assert (second.attempt, second.last_failure) == (2, failure)
    assert "checkpoint" not in (owner.ledger(SID).open or {})
    owner.complete_phase(
        SID,
        Phase.IMPLEMENT,
        verified={"passed": True},
        changes={"rework_pending": False},
        status="in-progress",
        artifact=("implement.md", "done"),
        note="fine",
    )
    ledger = owner.ledger(SID)
    assert (ledger.open, ledger.last_failure, ledger.verified) == (None, None, {"passed": True})
    assert ledger.total == 1 and ledger.attempts == {"implement": 2}
    fm = frontmatter(root, SID)
    assert (fm["status"], fm["updated"]) == ("in-progress", DAY)
    assert fm["rework_pending"] is False
    assert (folder / "implement.md").read_text() == "done"
    events = story_events(root, SID)
    assert [e["action"] for e in events] == [
        "phase_started",
        "phase",
        "recovery",
        "phase_started",
        "phase",
    ]
    failed, recovery, passed = events[1], events[2], events[4]
    assert (failed["outcome"], failed["attempt"], failed["feedback"]) == (
        "tests_failed",
        1,
        feedback[:2000],
    )
    assert (recovery["outcome"], recovery["recovery_kind"], recovery["phase"]) == (
        "recorded",
        "implementation_retry",
        "implement",
    )
    assert recovery["reason"] == "the tests failed" and recovery["time"] == STAMP
    assert recovery["counters"] == {
        "total_recovery_attempts": 1,
        "recovery_breakdown": {"implementation_retry": 1},
    }
    assert (passed["outcome"], passed["attempt"], passed["note"]) == ("completed", 2, "fine")
    assert owner.begin_action(SID, Phase.REVIEW).attempt == 1  # numbered per phase


def test_a_phase_limit_blocks_once_its_counter_passes_it(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    hand_edit(root, status="in-progress")
    limit = PhaseLimit("implementation_retry_count", 1, lambda n: f"{n} implementation retries")
    owner.begin_action(SID, Phase.IMPLEMENT)
    args = ("implementation_retry",)
    owner.fail_attempt(SID, Phase.IMPLEMENT, *args, outcome="f", feedback="", limit=limit)
    assert frontmatter(root, SID)["status"] == "in-progress"  # 1 is not above 1
    owner.begin_action(SID, Phase.IMPLEMENT)
    with pytest.raises(StoryBlockedError) as raised:
        owner.fail_attempt(SID, Phase.IMPLEMENT, *args, outcome="f", feedback="", limit=limit)
    assert raised.value.message == "2 implementation retries"
    assert raised.value.hint == "fix the cause, then run 'ai-sdlc unblock S-0001'"
    fm = frontmatter(root, SID)
    assert (fm["status"], fm["blocked_reason"], fm["blocked_at"]) == (
        "blocked",
        "2 implementation retries",
        STAMP,
    )
    ledger = owner.ledger(SID)
    assert (ledger.resume_status, ledger.total) == ("in-progress", 2)
    blocked = story_events(root, SID)[-1]
    assert (blocked["action"], blocked["outcome"]) == ("blocked", "phase_limit")
    with pytest.raises(StoryBlockedError, match="S-0001 is blocked: 2 implementation retries"):
        owner.ensure_can_act(SID)


def test_no_progress_blocks_at_once_and_the_global_limit_first(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path, limit=2)
    owner.begin_action(SID, Phase.IMPLEMENT)
    with pytest.raises(StoryBlockedError, match=r"^no progress\n"):
        owner.fail_attempt(
            SID, Phase.IMPLEMENT, "rework", outcome="f", feedback="", stalled="no progress"
        )
    assert owner.ledger(SID).total == 1
    owner.unblock(SID, reset_retries=False)
    with pytest.raises(StoryBlockedError) as raised:
        owner.fail_attempt(
            SID, Phase.IMPLEMENT, "rework", outcome="f", feedback="", stalled="no progress"
        )
    message = limit_message(SID, 2, 2, {"rework": 2})
    assert (raised.value.message, raised.value.hint) == (message, None)
    assert frontmatter(root, SID)["blocked_reason"] == message
    events = story_events(root, SID)
    assert [e.get("outcome") for e in events if e["action"] == "blocked"][-1] == (
        "global_recovery_limit"
    )
    assert [e["outcome"] for e in events if e["action"] == "recovery"][-1] == "blocked"


def test_an_api_retry_at_the_limit_blocks_and_says_the_figures(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path, limit=2)
    first = owner.record_recovery(SID, "api_retry", provider="x", attempt=None)
    assert first == RecoveryRecord(SID, "api_retry", 1, {"api_retry": 1}, None)
    event = story_events(root, SID)[-1]
    assert event["provider"] == "x" and "attempt" not in event
    with pytest.raises(StoryBlockedError) as raised:
        owner.record_recovery(SID, "api_retry")
    assert raised.value.message == limit_message(SID, 2, 2, {"api_retry": 2})
    with pytest.raises(ValueError, match="unknown recovery kind 'nap'"):
        owner.record_recovery(SID, "nap")


def test_a_released_attempt_is_not_counted(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    owner.release(SID, Phase.PLAN, "nothing open")
    assert actions_of(root) == []
    owner.begin_action(SID, Phase.PLAN)
    owner.release(SID, Phase.PLAN, "interrupted")
    ledger = owner.ledger(SID)
    assert (ledger.open, ledger.total) == (None, 0)
    assert json.loads(owner.journal.path(SID).read_bytes().splitlines()[-1])["op"] == "released"
    released = story_events(root, SID)[-1]
    assert (released["action"], released["phase"], released["attempt"], released["reason"]) == (
        "attempt_released",
        "plan",
        1,
        "interrupted",
    )


def test_a_dead_processs_attempt_is_counted_by_the_next_check(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    owner.begin_action(SID, Phase.REVIEW)
    later = StoryState(StoryStore(root), clock=lambda: NOW)
    later.ensure_can_act(SID)
    ledger = later.ledger(SID)
    assert (ledger.open, ledger.total, ledger.breakdown) == (None, 1, {"rework": 1})
    counted = story_events(root, SID)[-1]
    assert counted["stale"] is True and counted["phase"] == "review"
    assert counted["reason"] == (
        "an earlier run stopped during review attempt 1 (the process died); "
        "the attempt counts as a rework cycle"
    )
    assert frontmatter(root, SID)["retry_count"] == 1


def test_usage_adds_up_and_nothing_spent_writes_nothing(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    owner.add_usage(SID, Usage(input_tokens=10, output_tokens=5, cost_usd=0.1234567), calls=2)
    owner.add_usage(SID, Usage(input_tokens=1, output_tokens=2, cost_usd=0.1), calls=1)
    owner.add_usage(SID, Usage(input_tokens=1), calls=0)
    usage = frontmatter(root, SID)["usage"]
    assert usage == {"input_tokens": 12, "output_tokens": 7, "cost_usd": 0.223457, "calls": 3}
    path = root / ".ai-sdlc" / "stories" / SID / "story.md"
    text = path.read_text()
    owner.add_usage(SID, Usage(), calls=0)
    assert path.read_text() == text


def test_a_lowered_file_is_restored_and_a_raised_one_honoured(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    for _ in range(2):
        owner.record_recovery(SID, "api_retry")
    hand_edit(root, total_recovery_attempts=0, recovery_breakdown={"api_retry": 0})
    owner.ensure_can_act(SID)
    fm = frontmatter(root, SID)
    assert fm["total_recovery_attempts"] == 2 and fm["recovery_breakdown"]["api_retry"] == 2
    tamper = story_events(root, SID)[-1]
    assert tamper["action"] == "tamper_detected"
    assert tamper["changed"] == {
        "total_recovery_attempts": {"file": 0, "ledger": 2},
        "recovery_breakdown.api_retry": {"file": 0, "ledger": 2},
    }
    assert tamper["reason"] == (
        "recovery counters in story.md were lowered outside ai-sdlc; restored from the ledger "
        "(only 'ai-sdlc unblock --reset-retries' lowers them)"
    )
    hand_edit(root, total_recovery_attempts=5, recovery_breakdown={"api_retry": 3})
    owner.ensure_can_act(SID)
    raised = story_events(root, SID)[-1]
    assert raised["action"] == "counters_hand_edited"
    assert raised["changed"] == {
        "total_recovery_attempts": {"file": 5, "ledger": 2},
        "recovery_breakdown.api_retry": {"file": 3, "ledger": 2},
    }
    ledger = owner.ledger(SID)
    assert (ledger.total, ledger.breakdown) == (5, {"api_retry": 3})
    # a file one operation behind the ledger is a crash between the two, not tamper
    owner.record_recovery(SID, "api_retry")
    hand_edit(root, total_recovery_attempts=5, recovery_breakdown={"api_retry": 3})
    owner.ensure_can_act(SID)
    resynced = story_events(root, SID)[-1]
    assert resynced["action"] == "ledger_resynced"
    assert resynced["reason"] == "the story file lagged the ledger after a crash"
    assert frontmatter(root, SID)["total_recovery_attempts"] == 6


def test_a_new_storys_breakdown_above_its_total_raises_the_total(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    hand_edit(root, total_recovery_attempts=1, recovery_breakdown={"rework": 2, "api_retry": 1})
    owner.ensure_can_act(SID)
    event = story_events(root, SID)[-1]
    assert (event["action"], event["reason"]) == (
        "counters_reconciled",
        "the breakdown adds up to 3, more than the total 1",
    )
    assert frontmatter(root, SID)["total_recovery_attempts"] == 3
    assert owner.ledger(SID).total == 3


def test_finish_records_done_and_its_fields_in_one_transaction(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    owner.finish(SID, fields={"pr_url": "https://x/1"}, event={"action": "published", "n": 1})
    fm = frontmatter(root, SID)
    assert (fm["status"], fm["pr_url"], fm["updated"]) == ("done", "https://x/1", DAY)
    done, published = story_events(root, SID)[-2:]
    owner.finish(SID, fields={"branch": "b"})  # fields without an event
    assert frontmatter(root, SID)["branch"] == "b"
    assert (done["action"], done["outcome"]) == ("done", "completed")
    assert (published["action"], published["n"]) == ("published", 1)


def test_unblock_returns_to_the_status_blocked_from_and_reset_zeroes_every_counter(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path, limit=3)
    hand_edit(root, status="in-progress")
    owner.begin_action(SID, Phase.REVIEW)
    owner.fail_attempt(SID, Phase.REVIEW, "rework", outcome="f", feedback="")
    owner.record_recovery(SID, "api_retry")
    with pytest.raises(StoryBlockedError):
        owner.record_recovery(SID, "api_retry")
    plain = owner.unblock(SID, reset_retries=False)
    assert plain == {
        "id": SID,
        "was_blocked": True,
        "status": "in-progress",
        "reset_retries": False,
        "total_recovery_attempts": 3,
    }
    fm = frontmatter(root, SID)
    assert "blocked_reason" not in fm and "blocked_at" not in fm
    assert owner.ledger(SID).resume_status is None
    assert story_events(root, SID)[-1]["outcome"] == "unblocked"
    absent = [n for n in ("refinement_count", "implementation_retry_count") if n not in fm]
    again = owner.unblock(SID, reset_retries=True)
    assert (again["was_blocked"], again["status"], again["total_recovery_attempts"]) == (
        False,
        "in-progress",
        0,
    )
    fm = frontmatter(root, SID)
    assert (fm["total_recovery_attempts"], fm["retry_count"]) == (0, 0)
    assert not any(fm.get("recovery_breakdown", {}).values())
    ledger = owner.ledger(SID)
    assert (ledger.total, ledger.breakdown, ledger.chain) == (0, {}, 1)
    assert absent and not [n for n in absent if n in fm]  # a counter never set stays unset
    owner.unblock(SID, reset_retries=True)
    assert owner.ledger(SID).chain == 2
    event = story_events(root, SID)[-1]
    assert (event["action"], event["outcome"], event["reset_retries"]) == (
        "unblock",
        "not_blocked",
        True,
    )


def test_a_story_blocked_by_hand_returns_to_its_first_unpassed_phase(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    hand_edit(root, status="blocked", blocked_reason="by hand")
    assert owner.unblock(SID, reset_retries=False)["status"] == "ready"
    hand_edit(root, status="blocked", refinement_count=1)
    assert owner.unblock(SID, reset_retries=False)["status"] == "backlog"
    hand_edit(root, status="blocked", research_complete=True)
    assert owner.unblock(SID, reset_retries=False)["status"] == "in-progress"


def test_block_releases_the_open_attempt_and_keeps_the_status_to_return_to(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path)
    owner.begin_action(SID, Phase.PLAN)
    with pytest.raises(StoryBlockedError) as raised:
        owner.block(SID, "review FAILED", outcome="review_failed", artifact=("review.md", "no"))
    assert raised.value.hint == "fix the cause, then run 'ai-sdlc unblock S-0001'"
    ledger = owner.ledger(SID)
    assert (ledger.open, ledger.total, ledger.resume_status) == (None, 0, "backlog")
    blocked = story_events(root, SID)[-1]
    assert (blocked["outcome"], blocked["reason"]) == ("review_failed", "review FAILED")
    assert (root / ".ai-sdlc" / "stories" / SID / "review.md").read_text() == "no"
    with pytest.raises(StoryBlockedError):
        owner.block(SID, "again")
    assert owner.ledger(SID).resume_status == "backlog"  # not "blocked"
    assert story_events(root, SID)[-1]["outcome"] == "phase_limit"  # the default outcome


def test_a_checkpoint_restores_the_workflow_keys_and_artifacts_but_not_the_counters(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path)
    saved = StoryStore(root).get(SID)
    folder = root / ".ai-sdlc" / "stories" / SID
    (folder / "plan.md").write_text("before")
    hand_edit(root, status="in-progress", plan_complete=True, rework_pending=True)
    with StoryStore(root).edit(SID) as story:
        story.body = "changed body"
    (folder / "plan.md").write_text("after")
    (folder / "new.md").write_text("new")
    owner.record_recovery(SID, "api_retry")
    restored = owner.restore(
        SID,
        saved,
        {"plan.md": b"before", "new.md": None, "gone.md": None, "same.md": b""},
        phase="plan",
        reason="r" * 600,
    )
    assert restored == [
        "status",
        "plan_complete",
        "rework_pending",
        "body",
        "plan.md",
        "new.md",
        "same.md",
    ]
    assert "rework_pending" not in frontmatter(root, SID)  # not in the checkpoint: removed
    fm = frontmatter(root, SID)
    assert (fm["status"], fm["plan_complete"]) == ("backlog", saved.frontmatter["plan_complete"])
    assert fm["total_recovery_attempts"] == 1
    assert (folder / "plan.md").read_text() == "before" and not (folder / "new.md").exists()
    event = story_events(root, SID)[-1]
    assert (event["action"], event["phase"], event["reason"]) == (
        "rollback_initiated",
        "plan",
        "r" * 500,
    )
    assert owner.restore(SID, saved, {"same.md": b""}, phase="plan", reason="") == []


def test_approve_passes_the_pending_gate_once(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    gates = {"before_implementation": True}
    with pytest.raises(AiSdlcError) as refused:
        owner.approve(SID, gates)
    assert (refused.value.message, refused.value.hint) == (
        "S-0001 is not waiting at a gate (it is backlog)",
        "'ai-sdlc run S-0001' takes it on (it stops at a gate set in config: "
        "gates.before_implementation, gates.before_done)",
    )
    hand_edit(root, status="in-progress", plan_complete=True)
    assert owner.approve(SID, gates) == "before_implementation"
    assert frontmatter(root, SID)["approved_gates"] == ["before_implementation"]
    event = story_events(root, SID)[-1]
    assert (event["action"], event["outcome"]) == ("approve", "before_implementation")
    hand_edit(root, implementation_complete=True, reviews_complete=True)
    assert owner.approve(SID, {**gates, "before_done": True}) == "before_done"
    approved = frontmatter(root, SID)["approved_gates"]
    assert approved == ["before_implementation", "before_done"]
    owner.note(SID, "escalated", by="run")
    assert story_events(root, SID)[-1]["by"] == "run"


def test_fields_are_set_deleted_and_logged_with_their_event(tmp_path: Path) -> None:
    from ai_sdlc.workflow.state.transitions import DELETE

    root, owner = owner_in(tmp_path)
    owner.record_fields(SID, {"branch": "ai/s-0001", "pr_url": None}, {"action": "branched"})
    fm = frontmatter(root, SID)
    assert fm["branch"] == "ai/s-0001" and "pr_url" in fm and fm["pr_url"] is None
    assert story_events(root, SID)[-1]["action"] == "branched"
    owner.record_fields(SID, {"branch": DELETE, "worktree_path": DELETE})
    assert "branch" not in frontmatter(root, SID)
    owner.record_fields(SID, {"branch": "b"}, {"why": "no action given"})
    assert story_events(root, SID)[-1]["action"] == "fields"
    owner.complete_phase(SID, Phase.RESEARCH, body="new body\n")
    assert StoryStore(root).get(SID).body == "new body\n"


def test_a_lost_ledger_is_tamper_and_the_counters_stay_at_the_highest_record(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    told: list[tuple[str, str]] = []
    owner = StoryState(
        StoryStore(root), clock=lambda: NOW, on_tamper=lambda sid, msg: told.append((sid, msg))
    )
    for _ in range(3):
        owner.record_recovery(SID, "api_retry")
    seq = owner.ledger(SID).seq
    ledger = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    ledger.unlink()
    owner.ensure_can_act(SID)
    assert len(told) == 1 and told[0][0] == SID
    assert told[0][1].startswith(f"{SID}: tamper detected: ")
    assert told[0][1].endswith(
        "the counters stay at the highest surviving record (3); only "
        "'ai-sdlc unblock --reset-retries' lowers them"
    )
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [e["op"] for e in entries] == ["tamper_detected"]
    assert (entries[0]["total"], entries[0]["seq"], entries[0]["prev"]) == (3, seq + 1, "")
    event = story_events(root, SID)[-1]
    assert (event["action"], event["sources"]["story.md"]) == ("tamper_detected", 3)
    assert event["found"] and told[0][1].startswith(
        f"{SID}: tamper detected: {'; '.join(event['found'])}. "
    )
    assert told[0][1].endswith(event["reason"]) and event["reason"].startswith(
        "the recovery ledger was lost, lowered or replaced outside ai-sdlc"
    )
    owner.ensure_can_act(SID)  # re-anchored: nothing more to tell
    assert len(told) == 1
    assert len(ledger.read_text().splitlines()) == 1  # a check that changes nothing appends nothing
    ledger.unlink()
    ledger.symlink_to(tmp_path / "elsewhere")  # replaced: reported, then moved aside
    owner.ensure_can_act(SID)
    message = told[-1][1]
    assert f"{ledger} is a symbolic link, not the ledger file; the ledger has no entry" in message
    assert message.count("; ") >= 2 and f"; moved aside: {ledger}. " in message
    # kept as evidence under the transaction's time, without colons (a valid name everywhere)
    assert ledger.with_name(f"{SID}.jsonl.replaced-2030-01-02T010203.456Z").is_symlink()
    event = story_events(root, SID)[-1]
    entry = json.loads(ledger.read_text().splitlines()[-1])
    # the entry says what was found, and starts a new file's chain
    assert (entry["op"], entry["prev"], entry["found"]) == ("tamper_detected", "", event["found"])
    owner.ensure_can_act(SID)
    assert len(told) == 2  # the new file is sound: nothing more to tell


def test_shape_sets_only_what_changed_and_archive_refuses_a_dependency(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["First", "Second", "Third", "Fourth"])
    owner = StoryState(StoryStore(root), clock=lambda: NOW)
    changed = owner.shape(
        SID, {"title": "Renamed", "priority": 10, "labels": [], "epic": None, "status": "ready"}
    )
    assert changed == {
        "title": {"from": "First", "to": "Renamed"},
        "status": {"from": "backlog", "to": "ready"},
    }
    fm = frontmatter(root, SID)
    assert (fm["title"], fm["status"], fm["updated"]) == ("Renamed", "ready", DAY)
    assert "epic" not in fm and not fm.get("labels")
    event = story_events(root, SID)[-1]
    assert (event["action"], event["changed"]) == ("edited", changed)
    assert owner.shape(SID, {"title": "Renamed"}) == {}
    # an unchanged key is skipped, not the end of the list
    assert owner.shape(SID, {"title": "Renamed", "priority": 3}) == {
        "priority": {"from": 10, "to": 3}
    }
    event = story_events(root, SID)[-1]
    assert story_events(root, SID)[-1] == event  # nothing changed: nothing logged
    owner.shape(SID, {"epic": "E"})
    assert owner.shape(SID, {"epic": None}) == {"epic": {"from": "E", "to": None}}
    assert "epic" not in frontmatter(root, SID)
    owner.shape("S-0002", {"dependencies": [SID]})
    owner.shape("S-0003", {"dependencies": [SID]})
    with pytest.raises(UsageError) as refused:
        owner.archive(SID)
    assert refused.value.message == "S-0001 cannot be archived: S-0002, S-0003 depend on it"
    assert refused.value.hint == (
        "first drop it from their dependencies (ai-sdlc set S-0002 dependencies=...)"
    )
    owner.shape("S-0003", {"dependencies": []})
    with pytest.raises(UsageError, match="S-0002 depends on it"):
        owner.archive(SID)
    with run_lock(root / ".ai-sdlc", "S-0003", what="S-0003"), pytest.raises(BusyError) as busy:
        owner.archive("S-0003")
    assert busy.value.message.startswith(
        "cannot archive S-0003: S-0003 is already being run by another ai-sdlc process"
    )
    assert busy.value.hint == (
        "wait for it to finish, or stop it; a crashed run releases the lock by itself"
    )
    folder = owner.archive("S-0003")
    assert folder.is_dir() and "archive" in folder.parts[-2]
    archived = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    assert (archived[-1]["action"], archived[-1]["status"]) == ("archived", "backlog")
    text = (folder / "story.md").read_text()
    assert f"archived_at: '{DAY}'" in text or f"archived_at: {DAY}" in text
    # what a person may not set, and dependencies the backlog cannot honour
    with StoryStore(root).edit("S-0004") as story:
        story.frontmatter["status"] = "in-progress"
    with pytest.raises(UsageError) as status:
        owner.shape("S-0004", {"status": "ready"})
    assert status.value.message == "S-0004 is in-progress: its status cannot be set to ready"
    with pytest.raises(UsageError, match=r"^dependency S-0003 is archived\n"):
        owner.shape("S-0004", {"dependencies": ["S-0003"]})
    with pytest.raises(UsageError, match=r"^dependency S-0009 is not a story in this backlog\n"):
        owner.shape("S-0004", {"dependencies": ["S-0009"]})
    with pytest.raises(UsageError, match="cycle"):
        owner.shape(SID, {"dependencies": ["S-0002"]})  # S-0002 depends on S-0001


def test_a_crash_between_the_copies_and_the_ledger_is_closed_by_the_next_operation(
    tmp_path: Path,
) -> None:
    """The copies run one entry ahead of a ledger whose last append never happened: whatever
    operation comes next writes that entry, under its own name, without a tamper alarm."""
    root = tmp_path / "p"
    make_project(root, ["Story", "Other"])
    owner = StoryState(StoryStore(root), clock=lambda: NOW)
    ledger = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    operations = {
        "usage": lambda: owner.add_usage(SID, Usage(input_tokens=1), calls=1),
        "fields": lambda: owner.record_fields(SID, {"branch": "b"}),
        "approve": lambda: owner.approve(SID, {"before_implementation": True}),
        "edit": lambda: owner.shape(SID, {"title": "T"}),
        "blocked": lambda: owner.block(SID, "stop"),
        "unblock": lambda: owner.unblock(SID, reset_retries=False),
        "restore": lambda: owner.restore(SID, saved, {}, phase="plan", reason=""),
        "archive": lambda: owner.archive(SID),
    }
    saved = StoryStore(root).get(SID)
    hand_edit(root, status="in-progress", plan_complete=True)
    for total, (op, operation) in enumerate(operations.items(), start=1):
        owner.record_recovery(SID, "api_retry")
        lines = ledger.read_bytes().splitlines(keepends=True)
        ledger.write_bytes(b"".join(lines[:-1]))  # the append that never happened
        if op == "blocked":
            with pytest.raises(StoryBlockedError):
                operation()
        else:
            operation()
        last = json.loads(ledger.read_bytes().splitlines()[-1])
        assert (last["op"], last["total"]) == (op, total), last
    assert not [e for e in story_events(root, SID) if e["action"] == "tamper_detected"]


def test_an_unreadable_story_file_is_put_back_and_the_ledger_reapplied(tmp_path: Path) -> None:
    from ai_sdlc.workflow.state.transitions import DELETE

    root, owner = owner_in(tmp_path)
    path = root / ".ai-sdlc" / "stories" / SID / "story.md"
    saved = path.read_bytes()
    owner.record_recovery(SID, "api_retry")
    owner.record_recovery(SID, "api_retry")
    path.write_text("---\n: not yaml [\n---\n")
    owner.restore_file(SID, saved)
    fm = frontmatter(root, SID)
    assert fm["total_recovery_attempts"] == 2 and fm["recovery_breakdown"]["api_retry"] == 2
    assert story_events(root, SID)[-1]["action"] == "story_file_restored"
    assert repr(DELETE) == "DELETE"  # how the marker shows in a failing assertion


def test_a_checkpoint_restore_after_a_crash_writes_its_own_entry(tmp_path: Path) -> None:
    """As above, for the two restores: the entry closing the crash carries their names."""
    root, owner = owner_in(tmp_path)
    ledger = owner.journal.path(SID)
    path = root / ".ai-sdlc" / "stories" / SID / "story.md"
    saved, data = StoryStore(root).get(SID), path.read_bytes()

    def crash() -> None:
        owner.record_recovery(SID, "api_retry")
        ledger.write_bytes(b"".join(ledger.read_bytes().splitlines(keepends=True)[:-1]))

    crash()
    owner.restore(SID, saved, {}, phase="plan", reason="")
    assert json.loads(ledger.read_bytes().splitlines()[-1])["op"] == "restore"
    crash()
    path.write_text("---\n: not yaml [\n---\n")
    owner.restore_file(SID, data)
    assert json.loads(ledger.read_bytes().splitlines()[-1])["op"] == "restore_file"


def test_git_calls_run_under_the_github_policy(tmp_path: Path) -> None:
    from ai_sdlc.resilience import PolicyManager
    from ai_sdlc.resilience.clock import ManualClock
    from ai_sdlc.workflow.state.guard import GuardFactory

    clock = ManualClock()
    manager = PolicyManager(project_root=tmp_path, clock=clock, sleep=clock.sleep, budget=False)
    calls: list[int] = []
    assert GuardFactory(manager).git(lambda: calls.append(1) or "sha") == "sha"
    assert calls == [1]
    assert manager.metrics()["github"]["operations"] == 1


def test_a_failed_attempts_whole_output_is_kept_redacted_and_its_end_when_long(
    tmp_path: Path,
) -> None:
    from ai_sdlc.workflow.state.steps import OUTPUT_LIMIT

    root, owner = owner_in(tmp_path)
    folder = root / ".ai-sdlc" / "stories" / SID
    secret = "sk-ant-" + "a1B2c3D4e5" * 6  # built at run time: no secret in the repository
    for attempt, output in ((1, f"FAILED x\nkey={secret}\n"), (2, "ab" + "y" * OUTPUT_LIMIT)):
        owner.begin_action(SID, Phase.IMPLEMENT)
        owner.fail_attempt(
            SID, Phase.IMPLEMENT, "implementation_retry", outcome="f", feedback="", output=output
        )
        event = [e for e in story_events(root, SID) if e["action"] == "phase"][-1]
        assert event["output_file"] == f"attempts/{attempt}.output.txt"
    first = (folder / "attempts" / "1.output.txt").read_text()
    assert first.startswith("FAILED x\nkey=") and secret not in first
    second = (folder / "attempts" / "2.output.txt").read_text()
    assert second == "[... 2 characters omitted ...]\n" + "y" * OUTPUT_LIMIT


def test_each_operation_names_its_ledger_entry(tmp_path: Path) -> None:
    """An entry says which operation wrote it (an audit of the ledger reads them); the ones that
    change no figure write one only when they close a crash between the copies and the ledger."""
    _root, owner = owner_in(tmp_path)
    ledger = owner.journal.path(SID)

    def last_op() -> str:
        return str(json.loads(ledger.read_bytes().splitlines()[-1])["op"])

    owner.record_recovery(SID, "api_retry")
    assert last_op() == "recovery"
    owner.begin_action(SID, Phase.PLAN)
    assert last_op() == "reserve"
    owner.complete_phase(SID, Phase.PLAN)
    assert last_op() == "passed"
    owner.begin_action(SID, Phase.PLAN)
    owner.fail_attempt(SID, Phase.PLAN, "api_retry", outcome="f", feedback="")
    assert last_op() == "failed"
    for op, operation in (
        ("note", lambda: owner.note(SID, "escalated")),
        ("check", lambda: owner.ensure_can_act(SID)),
        ("done", lambda: owner.finish(SID)),
    ):
        owner.record_recovery(SID, "api_retry")
        ledger.write_bytes(b"".join(ledger.read_bytes().splitlines(keepends=True)[:-1]))
        operation()
        assert last_op() == op


def test_a_rollback_event_lists_what_it_restored(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    saved = StoryStore(root).get(SID)
    hand_edit(root, plan_complete=True)
    assert owner.restore(SID, saved, {}, phase="plan", reason="why") == ["plan_complete"]
    event = story_events(root, SID)[-1]
    assert (event["restored"], event["reason"]) == (["plan_complete"], "why")


def test_a_verification_that_ran_and_failed_is_counted_as_a_failed_result(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from ai_sdlc.resilience import PolicyManager
    from ai_sdlc.resilience.clock import ManualClock
    from ai_sdlc.workflow.state.guard import GuardFactory

    clock = ManualClock()
    manager = PolicyManager(project_root=tmp_path, clock=clock, sleep=clock.sleep, budget=False)
    guard = GuardFactory(manager)
    failed = SimpleNamespace(passed=False)
    assert guard.verification(lambda: failed) is failed
    guard.verification(lambda: SimpleNamespace(passed=True))
    guard.verification(lambda: "no verdict")  # nothing to read: not a failure
    report = manager.metrics()["verification"]
    assert (report["operations"], report["failed_results"]) == (3, 1)


def test_an_output_at_the_limit_is_kept_whole_and_one_that_cannot_be_kept_costs_no_count(
    tmp_path: Path,
) -> None:
    from ai_sdlc.workflow.state.steps import OUTPUT_LIMIT

    root, owner = owner_in(tmp_path)
    folder = root / ".ai-sdlc" / "stories" / SID
    owner.begin_action(SID, Phase.IMPLEMENT)
    exact = "z" * OUTPUT_LIMIT
    args = (SID, Phase.IMPLEMENT, "implementation_retry")
    owner.fail_attempt(*args, outcome="f", feedback="", output=exact)
    assert (folder / "attempts" / "1.output.txt").read_text() == exact
    (folder / "attempts" / "1.output.txt").unlink()
    (folder / "attempts").rmdir()
    (folder / "attempts").write_text("not a folder")  # the output cannot be written
    owner.begin_action(SID, Phase.IMPLEMENT)
    record = owner.fail_attempt(*args, outcome="f", feedback="", output="lost")
    assert record.total == 2 and owner.ledger(SID).total == 2
