"""Tests written to kill mutants that `make mutants` found surviving.

Each test pins a promise of the state owner, the ledger, the store, resilience or the stop
conditions that no other selected test pinned closely enough; docs/testing.md names the
mutants each one kills. Real files, real git, no mocks of our own code.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import AiSdlcError, BusyError, StoryBlockedError, UsageError
from ai_sdlc.providers.base import CallGuard, Phase, Usage
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.ledger import Journal, LedgerState, limit_message, line_hash
from ai_sdlc.workflow.state.runlock import run_lock
from ai_sdlc.workflow.state.steps import RecoveryRecord
from ai_sdlc.workflow.state.transitions import PhaseLimit, StoryState
from tests.support.runs_support import frontmatter, make_project, story_events

SID = "S-0001"


# --- the ledger: what an entry may hold, and what the end of its file says --------------------


def test_an_entry_keeps_only_sound_counts_and_well_formed_records() -> None:
    state = LedgerState.from_json(
        {
            "seq": 3,
            "total": True,  # a bool is not a count
            "breakdown": {"rework": -1, "api_retry": 2, 5: 1},
            "open": [1],
            "attempts": "implement",
            "last_failure": "failed",
            "resume_status": 7,
            "verified": [],
            "prev_total": 2.5,
            "prev_breakdown": {"rework": 1},
            "chain": 4,
        }
    )
    assert state == LedgerState(
        seq=3,
        total=0,
        breakdown={"rework": 0, "api_retry": 2, "5": 1},
        prev_breakdown={"rework": 1},
        chain=4,
    )
    full = LedgerState(
        seq=7,
        total=5,
        breakdown={"rework": 2, "api_retry": 3},
        open={"kind": "rework", "phase": "implement", "attempt": 2, "time": "t"},
        attempts={"implement": 2},
        last_failure={"phase": "implement", "feedback": "x"},
        resume_status="implementing",
        verified={"passed": True},
        prev_total=4,
        prev_breakdown={"rework": 1, "api_retry": 3},
        chain=1,
    )
    assert LedgerState.from_json(full.to_json()) == full
    copy = full.copy()
    assert copy == full and copy.breakdown is not full.breakdown
    assert not LedgerState().started and LedgerState(seq=1).started


def test_the_limit_message_names_the_figures_the_breakdown_and_the_way_out() -> None:
    assert limit_message(SID, 10, 10, {"rework": 3, "api_retry": 7}) == (
        "Global recovery limit exceeded (10/10) for S-0001. Breakdown: 3 rework cycles, "
        "7 API retries. Run 'ai-sdlc unblock S-0001 --reset-retries' after fixing the cause."
    )


def _journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / ".ai-sdlc")


def _entries(journal: Journal, *totals: int, big: str = "") -> list[bytes]:
    lines, prev = [], ""
    for seq, total in enumerate(totals, start=1):
        state = LedgerState(seq=seq, total=total, breakdown={"rework": total})
        line = Journal.encode("failed", "t", state, prev, note=big)
        journal.append_line(SID, line)
        lines.append(line)
        prev = line_hash(line)
    return lines


def test_the_newest_entry_is_the_state_and_its_line_the_chain_end(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    assert journal.tail(SID).state == LedgerState()  # no ledger yet: a new story
    lines = _entries(journal, 1, 2, 3)
    tail = journal.tail(SID)
    assert (tail.state.seq, tail.state.total, tail.problems, tail.replaced) == (3, 3, [], False)
    assert tail.line == lines[-1] and tail.last_hash == line_hash(lines[-1])
    assert journal.read(SID) == tail.state
    assert json.loads(lines[0])["prev"] == "" and json.loads(lines[1])["prev"] == line_hash(
        lines[0]
    )
    with journal.path(SID).open("ab") as fh:  # a crash mid-append: a torn last line
        fh.write(b'{"seq": 4, "tot')
    torn = journal.tail(SID)
    assert (torn.state.seq, torn.problems, torn.last_hash) == (3, [], line_hash(lines[-1]))


def test_unreadable_lines_after_the_last_entry_are_reported(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    _entries(journal, 1, 2)
    path = journal.path(SID)
    with path.open("ab") as fh:
        fh.write(b"not json\n[1]\n" + json.dumps({"total": 9}).encode() + b"\n")
    tail = journal.tail(SID)
    assert tail.state.seq == 2
    assert tail.problems == [f"{path}: 3 unreadable line(s) after the last entry"]
    assert tail.last_hash == line_hash(json.dumps({"total": 9}).encode())
    path.write_bytes(b"not json\n")
    only = journal.tail(SID)
    assert only.state == LedgerState()
    assert only.problems == [f"{path}: no readable entry (1 unreadable line(s))"]


def test_an_entry_that_does_not_chain_onto_the_line_before_is_reported(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    lines = _entries(journal, 1, 2, 3)
    path = journal.path(SID)
    path.write_bytes(lines[0] + b"\n" + lines[2] + b"\n")  # the middle line removed
    assert journal.tail(SID).problems == [
        f"{path}: the entry seq 3 does not chain onto the line before it "
        "(lines were removed, added or rewritten)"
    ]
    path.write_bytes(lines[1] + b"\n")  # the first line of a file chains onto ""
    assert len(journal.tail(SID).problems) == 1
    path.write_bytes(lines[0] + b"\n")
    assert journal.tail(SID).problems == []
    # an older ledger's entries carry no chain: nothing to check, whatever follows them
    old = {k: v for k, v in json.loads(lines[2]).items() if k != "prev"}
    path.write_bytes(json.dumps(old).encode() + b"\nnot json\n")
    assert (journal.tail(SID).state.seq, journal.tail(SID).problems) == (3, [])


def test_a_long_ledger_is_read_from_its_last_64_kib(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    lines = _entries(journal, *range(1, 400), big="x" * 300)
    assert journal.path(SID).stat().st_size > 64 * 1024
    tail = journal.tail(SID)  # the window's first (partial) line is not checked or read
    assert (tail.state.seq, tail.problems, tail.line) == (399, [], lines[-1])
    # one entry longer than the window before an unreadable line: the whole file is read
    path = journal.path(SID)
    path.write_bytes(lines[0] + b"\n")
    path.unlink()
    big = _entries(journal, 6, big="y" * (70 * 1024))
    with path.open("ab") as fh:
        fh.write(b"not json\n")
    whole = journal.tail(SID)
    assert (whole.state.seq, whole.line) == (1, big[0])
    assert whole.problems == [f"{path}: 1 unreadable line(s) after the last entry"]


def test_a_ledger_replaced_by_something_else_is_reported_and_set_aside(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    _entries(journal, 1)
    path = journal.path(SID)
    assert journal.set_aside(SID, "x") == [] and path.is_file()  # a sound ledger stays
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.jsonl")
    tail = journal.tail(SID)
    assert tail.replaced and tail.state == LedgerState()
    assert tail.problems == [f"{path} is a symbolic link, not the ledger file"]
    assert journal.set_aside(SID, "20261126T0000") == [str(path)]
    assert path.with_name(f"{SID}.jsonl.replaced-20261126T0000").is_symlink()
    assert not path.exists() and not path.is_symlink()
    path.mkdir()
    assert journal.tail(SID).problems == [f"{path} is a folder, not the ledger file"]
    assert journal.set_aside(SID, "d") == [str(path)] and not path.exists()
    os.mkfifo(path)
    assert journal.tail(SID).problems == [f"{path} is a special file, not the ledger file"]
    path.unlink()
    assert journal.set_aside(SID, "x") == []  # nothing in the way


def test_a_state_folder_replaced_by_a_file_is_reported_and_set_aside(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    _entries(journal, 1)
    folder = journal.folder
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    folder.write_text("x")
    tail = journal.tail(SID)
    assert tail.replaced and tail.problems == [f"{folder} is a file, not a folder"]
    assert journal.set_aside(SID, "s") == [str(folder)]
    assert folder.with_name("ledger.replaced-s").is_file() and not folder.exists()
    state = folder.parent
    os.rename(state, state.with_name("kept"))
    state.symlink_to(state.with_name("kept"))
    assert journal.tail(SID).problems == [f"{state} is a symbolic link, not a folder"]
    assert journal.set_aside(SID, "s") == [str(state)]


# --- the state owner, in process: what each operation writes ---------------------------------

#: Not today: a date written from the real clock instead of the injected one shows.
NOW = dt.datetime(2030, 1, 2, 1, 2, 3, 456000, tzinfo=dt.UTC)
STAMP = "2030-01-02T01:02:03.456Z"
DAY = "2030-01-02"


def _owner(tmp_path: Path, limit: int = 10) -> tuple[Path, StoryState]:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    return root, StoryState(StoryStore(root), limit=limit, clock=lambda: NOW)


def _actions(root: Path) -> list[str]:
    return [str(e["action"]) for e in story_events(root, SID)]


def _hand_edit(root: Path, **values: object) -> None:
    with StoryStore(root).edit(SID) as story:
        for key, value in values.items():
            story.frontmatter[key] = value


def test_an_attempt_is_reserved_failed_counted_then_passed(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path)
    _hand_edit(root, status="in-progress")
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
    root, owner = _owner(tmp_path, limit=2)
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
    root, owner = _owner(tmp_path, limit=2)
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
    root, owner = _owner(tmp_path)
    owner.release(SID, Phase.PLAN, "nothing open")
    assert _actions(root) == []
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
    root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path)
    for _ in range(2):
        owner.record_recovery(SID, "api_retry")
    _hand_edit(root, total_recovery_attempts=0, recovery_breakdown={"api_retry": 0})
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
    _hand_edit(root, total_recovery_attempts=5, recovery_breakdown={"api_retry": 3})
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
    _hand_edit(root, total_recovery_attempts=5, recovery_breakdown={"api_retry": 3})
    owner.ensure_can_act(SID)
    resynced = story_events(root, SID)[-1]
    assert resynced["action"] == "ledger_resynced"
    assert resynced["reason"] == "the story file lagged the ledger after a crash"
    assert frontmatter(root, SID)["total_recovery_attempts"] == 6


def test_a_new_storys_breakdown_above_its_total_raises_the_total(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
    _hand_edit(root, total_recovery_attempts=1, recovery_breakdown={"rework": 2, "api_retry": 1})
    owner.ensure_can_act(SID)
    event = story_events(root, SID)[-1]
    assert (event["action"], event["reason"]) == (
        "counters_reconciled",
        "the breakdown adds up to 3, more than the total 1",
    )
    assert frontmatter(root, SID)["total_recovery_attempts"] == 3
    assert owner.ledger(SID).total == 3


def test_finish_records_done_and_its_fields_in_one_transaction(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path, limit=3)
    _hand_edit(root, status="in-progress")
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
    root, owner = _owner(tmp_path)
    _hand_edit(root, status="blocked", blocked_reason="by hand")
    assert owner.unblock(SID, reset_retries=False)["status"] == "ready"
    _hand_edit(root, status="blocked", refinement_count=1)
    assert owner.unblock(SID, reset_retries=False)["status"] == "backlog"
    _hand_edit(root, status="blocked", research_complete=True)
    assert owner.unblock(SID, reset_retries=False)["status"] == "in-progress"


def test_block_releases_the_open_attempt_and_keeps_the_status_to_return_to(
    tmp_path: Path,
) -> None:
    root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path)
    saved = StoryStore(root).get(SID)
    folder = root / ".ai-sdlc" / "stories" / SID
    (folder / "plan.md").write_text("before")
    _hand_edit(root, status="in-progress", plan_complete=True, rework_pending=True)
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
    root, owner = _owner(tmp_path)
    gates = {"before_implementation": True}
    with pytest.raises(AiSdlcError) as refused:
        owner.approve(SID, gates)
    assert (refused.value.message, refused.value.hint) == (
        "S-0001 is not waiting at a gate",
        "gates are set in config: gates.before_implementation, gates.before_done",
    )
    _hand_edit(root, status="in-progress", plan_complete=True)
    assert owner.approve(SID, gates) == "before_implementation"
    assert frontmatter(root, SID)["approved_gates"] == ["before_implementation"]
    event = story_events(root, SID)[-1]
    assert (event["action"], event["outcome"]) == ("approve", "before_implementation")
    _hand_edit(root, implementation_complete=True, reviews_complete=True)
    assert owner.approve(SID, {**gates, "before_done": True}) == "before_done"
    approved = frontmatter(root, SID)["approved_gates"]
    assert approved == ["before_implementation", "before_done"]
    owner.note(SID, "escalated", by="run")
    assert story_events(root, SID)[-1]["by"] == "run"


def test_fields_are_set_deleted_and_logged_with_their_event(tmp_path: Path) -> None:
    from ai_sdlc.workflow.state.transitions import DELETE

    root, owner = _owner(tmp_path)
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
    _hand_edit(root, status="in-progress", plan_complete=True)
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

    root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path)
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

    root, owner = _owner(tmp_path)
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
    _root, owner = _owner(tmp_path)
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
    root, owner = _owner(tmp_path)
    saved = StoryStore(root).get(SID)
    _hand_edit(root, plan_complete=True)
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

    root, owner = _owner(tmp_path)
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


# --- the provider guard: why a provider is unavailable, in the user's words -------------------


def _guarded(
    tmp_path: Path, section: dict[str, Any], **options: Any
) -> tuple[list[dict[str, Any]], CallGuard]:
    """A `CallGuard` for S-0001's refine under policies from `section`; the retries it
    records are kept in the returned list."""
    from ai_sdlc.resilience import PolicyManager, load_settings
    from ai_sdlc.resilience.clock import ManualClock
    from ai_sdlc.workflow.state.guard import GuardFactory

    clock = ManualClock()
    options.setdefault("budget", False)
    manager = PolicyManager(
        load_settings(section), clock=clock, sleep=clock.sleep, rand=lambda: 0.5, **options
    )
    retries: list[dict[str, Any]] = []
    guard = GuardFactory(manager).for_story(SID, Phase.REFINE, lambda **r: retries.append(r))
    return retries, guard


def _failing(*messages: str) -> Callable[[], str]:
    from ai_sdlc.providers.base import TransientProviderError

    left = list(messages)

    def call() -> str:
        if left:
            raise TransientProviderError(left.pop(0), kind="server", status=503)
        return "answer"

    return call


def _llm(**policy: Any) -> dict[str, Any]:
    breaker = policy.pop("breaker", {"failure_threshold": 100})
    return {
        "policies": {"llm": {"initial_delay": 0.5, "jitter": "none", "breaker": breaker, **policy}}
    }


def test_a_provider_failing_past_its_retries_is_unavailable_with_the_count_and_why(
    tmp_path: Path,
) -> None:
    from ai_sdlc.errors import ProviderUnavailableError

    retries, guard = _guarded(tmp_path, _llm(max_attempts=3))
    with pytest.raises(ProviderUnavailableError) as raised:
        guard(_failing("503 one", "503 two", "503 three"))
    assert raised.value.message == (
        "S-0001 refine: the provider is still failing after 3 attempts (retries exhausted): "
        "503 three"
    )
    assert raised.value.hint == "run again later; every retry so far is counted on the story"
    assert [(r["attempt"], r["error"]) for r in retries] == [
        (1, "TransientProviderError"),
        (2, "TransientProviderError"),
    ]
    retries, guard = _guarded(tmp_path, _llm(max_attempts=1))
    with pytest.raises(ProviderUnavailableError) as once:
        guard(_failing("overloaded"))
    assert once.value.message == (
        "S-0001 refine: the provider is still failing after 1 attempt (retries exhausted): "
        "overloaded"
    )
    assert retries == []
    retries, guard = _guarded(tmp_path, _llm(max_attempts=2))
    with pytest.raises(ProviderUnavailableError, match=r"after 2 attempts \(retries exhausted\)"):
        guard(_failing("a", "b"))
    assert guard(_failing("a")) == "answer"


def test_a_provider_stopped_by_the_overall_timeout_or_the_budget_says_which(
    tmp_path: Path,
) -> None:
    from ai_sdlc.errors import ProviderUnavailableError
    from ai_sdlc.resilience import BudgetConfig, RetryBudget

    _, guard = _guarded(tmp_path, _llm(max_attempts=5, overall_timeout=1.0, initial_delay=2.0))
    with pytest.raises(ProviderUnavailableError) as timed_out:
        guard(_failing("slow", "slow"))
    assert timed_out.value.message == (
        "S-0001 refine: the provider is still failing after 1 attempt "
        "(the policy's overall timeout was reached): slow"
    )
    spent = RetryBudget(BudgetConfig(ratio=0, floor_per_second=0, burst=1))
    _, guard = _guarded(tmp_path, _llm(max_attempts=5), budget=spent)
    with pytest.raises(ProviderUnavailableError) as budget:
        guard(_failing("x", "y", "z"))
    assert budget.value.message == (
        "S-0001 refine: the provider is still failing after 2 attempts "
        "(the run's retry budget is spent): y"
    )


def test_an_open_breaker_makes_the_provider_unavailable_and_says_so(tmp_path: Path) -> None:
    from ai_sdlc.errors import ProviderUnavailableError

    _, guard = _guarded(tmp_path, _llm(max_attempts=3, breaker={"failure_threshold": 2}))
    with pytest.raises(ProviderUnavailableError) as tripped:
        guard(_failing("a", "b", "c"))
    assert tripped.value.message == (
        "S-0001 refine: the provider's circuit breaker is open "
        "(circuit breaker 'llm' is open; next trial call in 59.0 s)"
    )
    assert tripped.value.hint == "the provider failed repeatedly; wait, or see 'ai-sdlc metrics'"
    with pytest.raises(ProviderUnavailableError) as still:
        guard(_failing())
    assert still.value.message == tripped.value.message


# --- the state owner, in process: what the end-to-end ledger tests used to pin ----------------


def test_a_tamper_is_told_on_stderr_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _root, owner = _owner(tmp_path)
    for _ in range(2):  # one entry only: its copy would read as a crash before the append
        owner.record_recovery(SID, "api_retry")
    owner.journal.path(SID).unlink()
    owner.ensure_can_act(SID)
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {SID}: tamper detected: ") and err.endswith(
        "only 'ai-sdlc unblock --reset-retries' lowers them\n"
    )
    assert err.count("\n") == 1


def test_every_failed_attempt_keeps_its_own_patch(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
    attempts = root / ".ai-sdlc" / "stories" / SID / "attempts"
    for n in (1, 2):
        owner.begin_action(SID, Phase.IMPLEMENT)
        owner.fail_attempt(
            SID,
            Phase.IMPLEMENT,
            "implementation_retry",
            outcome="tests_failed",
            feedback="",
            patch=(n, f"diff {n}\n"),
        )
    assert sorted(p.name for p in attempts.iterdir()) == ["1.patch", "2.patch"]
    assert (attempts / "2.patch").read_text() == "diff 2\n"
    assert owner.ledger(SID).total == 2


def test_the_guard_is_built_from_the_projects_resilience_settings(tmp_path: Path) -> None:
    from ai_sdlc.config.layers import load_config
    from ai_sdlc.errors import InvalidInputError
    from ai_sdlc.workflow.state.guard import GuardFactory

    root = tmp_path / "p"
    store = make_project(
        root, ["Story"], "resilience:\n  policies:\n    llm:\n      max_delay: 2\n"
    )
    home = {"AI_SDLC_CONFIG_HOME": str(tmp_path / "home")}
    factory = GuardFactory.from_config(store, load_config(root, environ=home))
    assert factory.manager.policy("llm").retry.max_delay == 2
    # each layer is sound alone; together the delays contradict each other: the guard names
    # the project's file
    env = {**home, "AI_SDLC_RESILIENCE__POLICIES__LLM__INITIAL_DELAY": "5"}
    with pytest.raises(InvalidInputError) as raised:
        GuardFactory.from_config(store, load_config(root, environ=env))
    assert raised.value.message == (
        f"{root / '.ai-sdlc' / 'config.yaml'}: resilience.policies.llm.max_delay must be >= "
        "initial_delay (5), got 2"
    )


def test_each_retry_is_recorded_with_its_delay_reason_and_error(tmp_path: Path) -> None:
    retries, guard = _guarded(tmp_path, _llm(max_attempts=3, initial_delay=0.12345))
    assert guard(_failing("a", "b")) == "answer"
    error, reason = "TransientProviderError", "server (HTTP 503)"
    assert retries == [  # the delay in milliseconds, as the story's events show it
        {"attempt": 1, "delay": 0.123, "reason": reason, "error": error},
        {"attempt": 2, "delay": 0.247, "reason": reason, "error": error},
    ]


def test_an_action_records_its_workspace_and_names_its_phase_and_attempt(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
    owner.begin_action(SID, Phase.PLAN, fields={"branch": "ai/s-0001"})  # fields, no event
    assert frontmatter(root, SID)["branch"] == "ai/s-0001"
    assert [e["action"] for e in story_events(root, SID)] == ["phase_started"]
    owner.complete_phase(SID, Phase.PLAN)
    owner.begin_action(SID, Phase.PLAN, event={"action": "worktree_reused", "path": "w"})
    events = story_events(root, SID)
    assert [(e["action"], e.get("phase"), e.get("attempt")) for e in events] == [
        ("phase_started", "plan", 1),
        ("phase", "plan", 1),
        ("worktree_reused", None, None),
        ("phase_started", "plan", 2),
    ]
    assert events[2]["path"] == "w"


def test_a_failed_attempts_event_says_what_failed_and_how(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
    owner.begin_action(SID, Phase.REVIEW)
    owner.fail_attempt(
        SID,
        Phase.REVIEW,
        "rework",
        outcome="changes_requested",
        feedback="fix it",
        signature="sig-1",
        workspace_changed=False,
        reviewer="r",
    )
    failed, counted = [e for e in story_events(root, SID) if e["action"] in ("phase", "recovery")]
    assert {k: failed[k] for k in failed if k not in ("time", "counters")} == {
        "action": "phase",
        "phase": "review",
        "outcome": "changes_requested",
        "attempt": 1,
        "signature": "sig-1",
        "workspace_changed": False,
        "feedback": "fix it",
        "reviewer": "r",
    }  # no output given: no output file named
    assert (counted["phase"], counted["reason"]) == ("review", "")  # no reason given


def test_a_passed_phase_counts_one_call_and_touches_the_date_only_when_its_status_moves(
    tmp_path: Path,
) -> None:
    root, owner = _owner(tmp_path)
    _hand_edit(root, status="in-progress", updated="2020-01-01")
    owner.begin_action(SID, Phase.RESEARCH)
    owner.complete_phase(
        SID, Phase.RESEARCH, status="in-progress", usage=Usage(input_tokens=5, output_tokens=1)
    )
    fm = frontmatter(root, SID)
    assert fm["usage"] == {"input_tokens": 5, "output_tokens": 1, "calls": 1}
    assert str(fm["updated"]) == "2020-01-01"  # the status did not move
    passed = story_events(root, SID)[-1]
    assert (passed["action"], passed["phase"], passed["attempt"]) == ("phase", "research", 1)
    owner.complete_phase(SID, Phase.PLAN)  # nothing reserved for it: attempt 0
    assert story_events(root, SID)[-1]["attempt"] == 0


def test_usage_with_only_a_cost_or_only_a_call_is_kept_and_nothing_writes_nothing(
    tmp_path: Path,
) -> None:
    root, owner = _owner(tmp_path)
    path = root / ".ai-sdlc" / "stories" / SID / "story.md"
    text = path.read_bytes()
    owner.add_usage(SID, Usage(), calls=0)
    assert path.read_bytes() == text and "usage" not in frontmatter(root, SID)
    owner.add_usage(SID, Usage(cost_usd=0.25), calls=0)
    assert frontmatter(root, SID)["usage"]["cost_usd"] == 0.25
    owner.add_usage(SID, Usage(), calls=1)
    assert frontmatter(root, SID)["usage"]["calls"] == 1


def test_a_story_blocked_without_a_reason_or_already_at_the_limit_is_refused(
    tmp_path: Path,
) -> None:
    root, owner = _owner(tmp_path, limit=3)
    _hand_edit(root, status="blocked")
    with pytest.raises(StoryBlockedError) as raised:
        owner.ensure_can_act(SID)
    assert raised.value.message == "S-0001 is blocked: no reason"
    owner.unblock(SID, reset_retries=False)
    _hand_edit(root, total_recovery_attempts=3, recovery_breakdown={"rework": 3})
    with pytest.raises(StoryBlockedError, match="Global recovery limit exceeded"):
        owner.ensure_can_act(SID)
    blocked = story_events(root, SID)[-1]
    assert (blocked["action"], blocked["outcome"]) == ("blocked", "global_recovery_limit")


def test_the_files_breakdown_keeps_every_kind_it_lists(tmp_path: Path) -> None:
    root, owner = _owner(tmp_path)
    _hand_edit(root, recovery_breakdown={"rework": 0, "api_retry": 0})
    owner.record_recovery(SID, "api_retry")
    assert frontmatter(root, SID)["recovery_breakdown"] == {"rework": 0, "api_retry": 1}


def test_the_ledger_keeps_text_as_written_in_utf8(tmp_path: Path) -> None:
    _root, owner = _owner(tmp_path)
    owner.begin_action(SID, Phase.IMPLEMENT)
    owner.fail_attempt(
        SID, Phase.IMPLEMENT, "implementation_retry", outcome="f", feedback="attendu « é » ✗"
    )
    line = owner.journal.path(SID).read_bytes().splitlines()[-1]
    assert "attendu « é » ✗".encode() in line  # readable by a person auditing the ledger


def test_an_operation_that_changes_nothing_writes_no_entry_whatever_its_keys_order(
    tmp_path: Path,
) -> None:
    _root, owner = _owner(tmp_path)
    ledger = owner.journal.path(SID)
    owner.complete_phase(SID, Phase.IMPLEMENT, verified={"passed": True, "summary": "ok"})
    lines = ledger.read_bytes()
    owner.complete_phase(SID, Phase.IMPLEMENT, verified={"summary": "ok", "passed": True})
    assert ledger.read_bytes() == lines


def test_a_kind_lowered_or_dropped_in_the_file_is_restored_and_a_new_one_honoured(
    tmp_path: Path,
) -> None:
    root, owner = _owner(tmp_path)
    for _ in range(2):
        owner.record_recovery(SID, "api_retry")

    def check(**values: object) -> dict[str, Any]:
        _hand_edit(root, **values)
        owner.ensure_can_act(SID)
        return story_events(root, SID)[-1]

    # the total one entry back, but not the breakdown: not a crash, tamper
    event = check(total_recovery_attempts=1, recovery_breakdown={"api_retry": 0})
    assert (event["action"], event["changed"]) == (
        "tamper_detected",
        {
            "total_recovery_attempts": {"file": 1, "ledger": 2},
            "recovery_breakdown.api_retry": {"file": 0, "ledger": 2},
        },
    )
    # the breakdown one entry back, but not the total: tamper too
    event = check(total_recovery_attempts=0, recovery_breakdown={"api_retry": 1})
    assert event["action"] == "tamper_detected"
    # the kind dropped from the file, the total left alone: restored all the same
    event = check(recovery_breakdown={})
    assert event["changed"] == {"recovery_breakdown.api_retry": {"file": 0, "ledger": 2}}
    fm = frontmatter(root, SID)
    assert (fm["total_recovery_attempts"], fm["recovery_breakdown"]) == (2, {"api_retry": 2})
    # a kind the ledger never counted, written by hand: honoured, and the total follows it
    event = check(recovery_breakdown={"api_retry": 2, "rework": 3})
    assert (event["action"], event["changed"]) == (
        "counters_hand_edited",
        {"recovery_breakdown.rework": {"file": 3, "ledger": 0}},
    )
    assert frontmatter(root, SID)["total_recovery_attempts"] == 5
    assert owner.ledger(SID).breakdown == {"api_retry": 2, "rework": 3}


# --- the ledger's end: a file swapped after its check, the 64 KiB window, the entry's time ----


def _swap_after_check(
    monkeypatch: pytest.MonkeyPatch, path: Path, swap: Callable[[], None]
) -> None:
    """Replace the ledger file right after `tail` looked at it (the race its open guards)."""
    real = os.lstat
    done: list[bool] = []

    def lstat(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        info = real(target, *args, **kwargs)
        if os.fspath(target) == os.fspath(path) and not done:
            done.append(True)
            swap()
        return info

    monkeypatch.setattr(os, "lstat", lstat)


def test_a_ledger_swapped_for_a_link_after_its_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _journal(tmp_path)
    _entries(journal, 1)
    path = journal.path(SID)
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(path.read_bytes())  # a sound ledger, but not this story's file

    def to_link() -> None:
        path.unlink()
        path.symlink_to(elsewhere)

    _swap_after_check(monkeypatch, path, to_link)
    tail = journal.tail(SID)
    assert (tail.state, tail.line, tail.replaced) == (LedgerState(), b"", True)
    assert len(tail.problems) == 1 and tail.problems[0].startswith(f"{path} cannot be read: ")


def test_a_ledger_swapped_for_a_pipe_after_its_check_is_reported_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _journal(tmp_path)
    _entries(journal, 1)
    path = journal.path(SID)
    held: list[int] = []

    def to_pipe() -> None:
        path.unlink()
        os.mkfifo(path)
        held.append(os.open(path, os.O_RDWR))  # a writer: nothing can hang on it

    _swap_after_check(monkeypatch, path, to_pipe)
    try:
        tail = journal.tail(SID)
    finally:
        for fd in held:
            os.close(fd)
    assert (tail.state, tail.replaced, tail.problems) == (
        LedgerState(),
        True,
        [f"{path} was replaced"],
    )


def test_the_first_whole_line_of_the_64_kib_window_can_be_the_newest_entry(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    lines = _entries(journal, 1, 2, big="x" * (40 * 1024))
    path = journal.path(SID)
    with path.open("ab") as fh:
        fh.write(b"not json\nnot json either\n")
    assert path.stat().st_size > 64 * 1024 > len(lines[1]) + 30
    tail = journal.tail(SID)  # the window starts inside entry 1: entry 2 is its first whole line
    assert (tail.state.seq, tail.line) == (2, lines[1])
    # its chain reaches outside the window: not checked, and not taken for a break
    assert tail.problems == [f"{path}: 2 unreadable line(s) after the last entry"]


def test_a_short_ledger_is_read_whole_from_its_first_byte(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    lines = _entries(journal, 1)
    path = journal.path(SID)
    with path.open("ab") as fh:
        fh.write(b"x\ny\nz\n")
    tail = journal.tail(SID)  # the file's first line is whole, and chains onto ""
    assert (tail.state.seq, tail.line) == (1, lines[0])
    assert tail.problems == [f"{path}: 3 unreadable line(s) after the last entry"]


def test_a_long_ledger_is_judged_by_its_last_64_kib_alone(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    _entries(journal, 1)
    path = journal.path(SID)
    with path.open("ab") as fh:  # three unreadable lines; the window holds the last two whole
        fh.write(b"a" * (40 * 1024) + b"\n" + b"b" * (30 * 1024) + b"\n")
        fh.write(b"c" * (30 * 1024) + b"\n")
    tail = journal.tail(SID)  # the cost of a check does not grow with the ledger
    assert (tail.state, tail.line) == (LedgerState(), b"")
    assert tail.problems == [f"{path}: no readable entry (2 unreadable line(s))"]


def test_each_ledger_entry_records_when_it_was_written(tmp_path: Path) -> None:
    _root, owner = _owner(tmp_path)
    owner.record_recovery(SID, "api_retry")
    entry = json.loads(owner.journal.path(SID).read_bytes().splitlines()[-1])
    assert (entry["op"], entry["time"], entry["total"]) == ("recovery", STAMP, 1)


# --- a tamper re-anchors at the highest record, whichever holds it -------------------------------


def test_a_tamper_re_anchors_at_the_highest_of_the_ledger_the_file_and_the_events(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    owner = StoryState(
        StoryStore(root), limit=100, clock=lambda: NOW, on_tamper=lambda _sid, _msg: None
    )
    _hand_edit(root, total_recovery_attempts=5)  # adopted as is: a total with no breakdown
    owner.ensure_can_act(SID)
    owner.record_recovery(SID, "api_retry")
    ledger = owner.journal.path(SID)

    def tamper(**values: object) -> dict[str, Any]:
        """The ledger's end made unreadable and the file edited; the entry that re-anchors."""
        with ledger.open("ab") as fh:
            fh.write(b"not json\n")
        _hand_edit(root, **values)
        owner.ensure_can_act(SID)
        entry = json.loads(ledger.read_bytes().splitlines()[-1])
        assert entry["op"] == "tamper_detected"
        assert story_events(root, SID)[-1]["action"] == "tamper_detected"
        return dict(entry)

    # the ledger's total above the file's and its own breakdown's
    entry = tamper(total_recovery_attempts=0, recovery_breakdown={"api_retry": 1})
    assert (entry["total"], entry["breakdown"]) == (6, {"api_retry": 1})
    # the file's total above the ledger's: the highest record, not a hand-edit on top
    assert tamper(total_recovery_attempts=9)["total"] == 9
    # a kind raised in the file: the total is at least the breakdown's sum
    entry = tamper(recovery_breakdown={"api_retry": 1, "rework": 20})
    assert (entry["total"], entry["breakdown"]) == (21, {"api_retry": 1, "rework": 20})
    # a kind the file lists at 0 and the ledger never counted adds nothing
    entry = tamper(recovery_breakdown={"api_retry": 1, "rework": 20, "refinement": 0})
    assert (entry["total"], entry["breakdown"]) == (21, {"api_retry": 1, "rework": 20})
    # the ledger and its copy left with no readable entry, the file zeroed: the events (kept
    # with the story) still hold 21
    copy = owner.mirrors.home.folder / "ledger" / f"{SID}.jsonl"
    copy.write_bytes(b"not json\n")
    ledger.write_bytes(b"")
    entry = tamper(total_recovery_attempts=0, recovery_breakdown={})
    assert (entry["total"], entry["breakdown"]) == (21, {"api_retry": 1, "rework": 20})
    assert frontmatter(root, SID)["total_recovery_attempts"] == 21
