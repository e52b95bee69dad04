"""The ledger's entries: what an entry may hold, and what the end of its file says.

Each test pins a promise that `make mutants` found no other test pinning closely enough.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ai_sdlc.workflow.state.ledger import LedgerState, limit_message, line_hash
from tests.support.owner_support import (
    SID,
    append_entries,
    journal_in,
)

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


def test_the_newest_entry_is_the_state_and_its_line_the_chain_end(tmp_path: Path) -> None:
    journal = journal_in(tmp_path)
    assert journal.tail(SID).state == LedgerState()  # no ledger yet: a new story
    lines = append_entries(journal, 1, 2, 3)
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
    journal = journal_in(tmp_path)
    append_entries(journal, 1, 2)
    path = journal.path(SID)
    with path.open("ab") as fh:
        fh.write(b"not json\n[1]\n" + json.dumps({"total": 9}).encode() + b"\n")
    tail = journal.tail(SID)
    assert tail.state.seq == 2
    assert tail.problems == [f"{path}: 3 unreadable lines after the last entry"]
    assert tail.last_hash == line_hash(json.dumps({"total": 9}).encode())
    path.write_bytes(b"not json\n")
    only = journal.tail(SID)
    assert only.state == LedgerState()
    assert only.problems == [f"{path}: no readable entry (1 unreadable line)"]


def test_an_entry_that_does_not_chain_onto_the_line_before_is_reported(tmp_path: Path) -> None:
    journal = journal_in(tmp_path)
    lines = append_entries(journal, 1, 2, 3)
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
    journal = journal_in(tmp_path)
    lines = append_entries(journal, *range(1, 400), big="x" * 300)
    assert journal.path(SID).stat().st_size > 64 * 1024
    tail = journal.tail(SID)  # the window's first (partial) line is not checked or read
    assert (tail.state.seq, tail.problems, tail.line) == (399, [], lines[-1])
    # one entry longer than the window before an unreadable line: the whole file is read
    path = journal.path(SID)
    path.write_bytes(lines[0] + b"\n")
    path.unlink()
    big = append_entries(journal, 6, big="y" * (70 * 1024))
    with path.open("ab") as fh:
        fh.write(b"not json\n")
    whole = journal.tail(SID)
    assert (whole.state.seq, whole.line) == (1, big[0])
    assert whole.problems == [f"{path}: 1 unreadable line after the last entry"]


def test_a_ledger_replaced_by_something_else_is_reported_and_set_aside(tmp_path: Path) -> None:
    journal = journal_in(tmp_path)
    append_entries(journal, 1)
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
    journal = journal_in(tmp_path)
    append_entries(journal, 1)
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
