"""The ledger's end: a file swapped after its check, the 64 KiB window, the entry's time.

Each test pins a promise that `make mutants` found no other test pinning closely enough.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.workflow.state.ledger import LedgerState
from tests.support.owner_support import (
    SID,
    STAMP,
    append_entries,
    journal_in,
    owner_in,
)

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
    journal = journal_in(tmp_path)
    append_entries(journal, 1)
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
    journal = journal_in(tmp_path)
    append_entries(journal, 1)
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
    journal = journal_in(tmp_path)
    lines = append_entries(journal, 1, 2, big="x" * (40 * 1024))
    path = journal.path(SID)
    with path.open("ab") as fh:
        fh.write(b"not json\nnot json either\n")
    assert path.stat().st_size > 64 * 1024 > len(lines[1]) + 30
    tail = journal.tail(SID)  # the window starts inside entry 1: entry 2 is its first whole line
    assert (tail.state.seq, tail.line) == (2, lines[1])
    # its chain reaches outside the window: not checked, and not taken for a break
    assert tail.problems == [f"{path}: 2 unreadable lines after the last entry"]


def test_a_short_ledger_is_read_whole_from_its_first_byte(tmp_path: Path) -> None:
    journal = journal_in(tmp_path)
    lines = append_entries(journal, 1)
    path = journal.path(SID)
    with path.open("ab") as fh:
        fh.write(b"x\ny\nz\n")
    tail = journal.tail(SID)  # the file's first line is whole, and chains onto ""
    assert (tail.state.seq, tail.line) == (1, lines[0])
    assert tail.problems == [f"{path}: 3 unreadable lines after the last entry"]


def test_a_long_ledger_is_judged_by_its_last_64_kib_alone(tmp_path: Path) -> None:
    journal = journal_in(tmp_path)
    append_entries(journal, 1)
    path = journal.path(SID)
    with path.open("ab") as fh:  # three unreadable lines; the window holds the last two whole
        fh.write(b"a" * (40 * 1024) + b"\n" + b"b" * (30 * 1024) + b"\n")
        fh.write(b"c" * (30 * 1024) + b"\n")
    tail = journal.tail(SID)  # the cost of a check does not grow with the ledger
    assert (tail.state, tail.line) == (LedgerState(), b"")
    assert tail.problems == [f"{path}: no readable entry (2 unreadable lines)"]


def test_each_ledger_entry_records_when_it_was_written(tmp_path: Path) -> None:
    _root, owner = owner_in(tmp_path)
    owner.record_recovery(SID, "api_retry")
    entry = json.loads(owner.journal.path(SID).read_bytes().splitlines()[-1])
    assert (entry["op"], entry["time"], entry["total"]) == ("recovery", STAMP, 1)
