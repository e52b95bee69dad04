"""The story owner's transaction: one locked read-reconcile-write of a story and its ledger.

Every operation of `transitions.StoryState` runs in `_txn`: under the story's lock it reads
`story.md` and the recovery ledger (`ledger`), checks the ledger's end against its copies
(`anchor`: a ledger lost, lowered or replaced is tamper, re-anchored at the highest surviving
record), reconciles the file's counters with the ledger (the ledger wins where the file is
lower; a hand-edit upward is honoured), lets the operation change both, then appends the
ledger entry (the truth first), writes the file and appends the events, still under the lock.
Kept apart from the operations so that what makes every write safe is read in one place.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

import msgspec

from ai_sdlc.fsutil import fsync_dir
from ai_sdlc.store import Story, StoryStore
from ai_sdlc.workflow.state.anchor import Anchoring, Mirrors, assess, events_high
from ai_sdlc.workflow.state.events import Clock, append_events, iso, utc_now
from ai_sdlc.workflow.state.ledger import DEFAULT_GLOBAL_LIMIT, Journal, LedgerState, line_hash

TOTAL = "total_recovery_attempts"
BREAKDOWN = "recovery_breakdown"


class Txn(msgspec.Struct):
    """One open transaction: the story as read (changed in place), its ledger state, the events
    to append once it is written, and the block it caused."""

    story: Story
    state: LedgerState
    now: str
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)
    blocked: str | None = None
    #: An artifact was renamed into the story's folder without a folder fsync (see `_txn`).
    unsynced: bool = False


class Transactions:
    """The transaction every state operation runs in (see the module docstring)."""

    def __init__(
        self,
        store: StoryStore,
        *,
        limit: int = DEFAULT_GLOBAL_LIMIT,
        clock: Clock = utc_now,
        on_recovery: Callable[[str, dict[str, Any]], None] = lambda _story, _event: None,
        on_tamper: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.limit = limit
        self.clock = clock
        #: Told of every recovery counted, once its transaction is written (progress display,
        #: the multi-story run's tally).
        self.on_recovery = on_recovery
        self.journal = Journal(store.ai_dir)
        #: The copies of each ledger head outside `.ai-sdlc/state` (`workflow.anchor`).
        self.mirrors = Mirrors(store.root)
        #: Told (story id, message) when a ledger was found tampered with; default: stderr.
        self.on_tamper = on_tamper or _warn

    def ledger(self, story_id: str) -> LedgerState:
        return self.journal.read(self.store.folder(story_id).name)

    @contextmanager
    def _txn(self, story_id: str, op: str) -> Iterator[Txn]:
        with self.store.edit(story_id) as story:
            now = iso(self.clock())
            anchoring, prev = self._anchor(story, now)
            before = anchoring.state
            snapshot = _snapshot(before)
            txn = Txn(story, LedgerState.from_json(json.loads(snapshot)), now)
            if anchoring.found:
                self._tampered(txn, anchoring)
            self._reconcile(txn, before)
            yield txn
            after = txn.state
            if _snapshot(after) != snapshot or (anchoring.rewrite and not anchoring.found):
                after.seq = before.seq + 1
                after.prev_total, after.prev_breakdown = before.total, dict(before.breakdown)
                self._append(story.id, Journal.encode(op, txn.now, after, prev), after)
            story.after_write.append(lambda: self._sync_folder(txn))
            story.after_write.append(lambda: append_events(story.folder, txn.events))
        for event in txn.events:
            if event["action"] == "recovery":
                self.on_recovery(story.id, event)

    def _append(self, story_id: str, line: bytes, state: LedgerState) -> str:
        """The copies first, then the ledger (a crash between leaves a copy one entry ahead,
        which the next transaction takes as the truth); returns the line's hash."""
        self.mirrors.write(story_id, line, state)
        self.journal.append_line(story_id, line)
        return line_hash(line)

    def _anchor(self, story: Story, now: str) -> tuple[Anchoring, str]:
        """The ledger's end checked against its copies (`workflow.anchor`). When something is
        wrong, the counters become the highest surviving record (the story file included) and
        a `tamper_detected` entry re-anchors the ledger there; returns the anchoring and the
        hash the transaction's own entry chains onto."""
        tail = self.journal.tail(story.id)
        copies = self.mirrors.read(story.id, tail)
        anchoring = assess(tail, copies, lambda: events_high(story.folder / "events.jsonl"))
        if not anchoring.found:
            return anchoring, anchoring.prev
        st = anchoring.state
        file_kinds = story.recovery_breakdown
        for kind, n in file_kinds.items():
            st.breakdown[kind] = max(st.breakdown.get(kind, 0), n)
        st.breakdown = {k: v for k, v in st.breakdown.items() if v}
        st.total = max(st.total, story.counter(TOTAL), sum(st.breakdown.values()))
        anchoring.sources["story.md"] = story.counter(TOTAL)
        prev = anchoring.prev
        if tail.replaced:
            moved = self.journal.set_aside(story.id, now.replace(":", ""))
            anchoring.found.extend(f"moved aside: {path}" for path in moved)
            prev = ""
        st.seq += 1
        st.prev_total, st.prev_breakdown = st.total, dict(st.breakdown)
        line = Journal.encode("tamper_detected", now, st, prev, found=anchoring.found)
        return anchoring, self._append(story.id, line, st)

    def _tampered(self, txn: Txn, anchoring: Anchoring) -> None:
        reason = (
            "the recovery ledger was lost, lowered or replaced outside ai-sdlc; the counters "
            f"stay at the highest surviving record ({txn.state.total}); only "
            "'ai-sdlc unblock --reset-retries' lowers them"
        )
        self._event(
            txn, "tamper_detected", found=anchoring.found, sources=anchoring.sources, reason=reason
        )
        self.on_tamper(
            txn.story.id,
            f"{txn.story.id}: tamper detected: {'; '.join(anchoring.found)}. {reason}",
        )

    def _reconcile(self, txn: Txn, before: LedgerState) -> None:
        """Make the file's counters agree with the ledger: lower figures are restored (the
        ledger is the truth), higher ones are a deliberate hand-edit and honoured, and the
        total is never below the sum of the breakdown."""
        story, st = txn.story, txn.state
        file_total = story.counter(TOTAL)
        file_kinds = story.recovery_breakdown
        if not before.started:
            st.breakdown = {k: v for k, v in file_kinds.items() if v}
            st.total = max(file_total, sum(st.breakdown.values()))
            if st.total != file_total:
                self._event(
                    txn,
                    "counters_reconciled",
                    reason=f"the breakdown adds up to {st.total}, more than the total {file_total}",
                )
                self._write_view(txn)
            return
        lowered: dict[str, dict[str, int]] = {}
        raised: dict[str, dict[str, int]] = {}
        merged = dict(st.breakdown)
        for kind in sorted(set(file_kinds) | set(st.breakdown)):
            ledger_n, file_n = st.breakdown.get(kind, 0), file_kinds.get(kind, 0)
            if file_n < ledger_n:
                lowered[f"{BREAKDOWN}.{kind}"] = {"file": file_n, "ledger": ledger_n}
            elif file_n > ledger_n:
                raised[f"{BREAKDOWN}.{kind}"] = {"file": file_n, "ledger": ledger_n}
            merged[kind] = max(ledger_n, file_n)
        if file_total < st.total:
            lowered[TOTAL] = {"file": file_total, "ledger": st.total}
        elif file_total > st.total:
            raised[TOTAL] = {"file": file_total, "ledger": st.total}
        st.breakdown = {k: v for k, v in merged.items() if v}
        st.total = max(file_total, st.total, sum(st.breakdown.values()))
        if lowered:
            crashed = file_total == st.prev_total and _nonzero(file_kinds) == _nonzero(
                st.prev_breakdown
            )
            reason = (
                "the story file lagged the ledger after a crash"
                if crashed
                else "recovery counters in story.md were lowered outside ai-sdlc; "
                "restored from the ledger (only 'ai-sdlc unblock --reset-retries' lowers them)"
            )
            self._event(
                txn,
                "ledger_resynced" if crashed else "tamper_detected",
                changed=lowered,
                reason=reason,
            )
            if not crashed:  # said where it is seen: the run's stderr, not only `log`
                figures = ", ".join(
                    f"{key} {change['file']} → {change['ledger']}"
                    for key, change in sorted(lowered.items(), key=lambda kv: kv[0] != TOTAL)
                )
                self.on_tamper(story.id, f"{story.id}: tamper detected: {figures}: {reason}")
        if raised:
            self._event(txn, "counters_hand_edited", changed=raised)
        if lowered or st.total != file_total:
            self._write_view(txn)

    @staticmethod
    def _sync_folder(txn: Txn) -> None:
        """An artifact renamed into the story's folder in this transaction is made durable by
        the folder fsync of the `story.md` write that follows it; only when `story.md` did not
        change is the folder fsynced here (before the events claim the artifact)."""
        if txn.unsynced and txn.story.written is None:
            fsync_dir(txn.story.folder)

    def _write_view(self, txn: Txn) -> None:
        """Write the ledger's figures into the file, touching only keys whose value differs."""
        st, fm = txn.state, txn.story.frontmatter
        if txn.story.counter(TOTAL) != st.total or TOTAL not in fm:
            fm[TOTAL] = st.total
        current = fm.get(BREAKDOWN)
        if isinstance(current, MutableMapping):
            for kind, n in st.breakdown.items():
                if current.get(kind) != n:
                    current[kind] = n
            for kind in list(current):
                if str(kind) not in st.breakdown and current[kind]:
                    current[kind] = 0
        elif st.breakdown:
            fm[BREAKDOWN] = dict(st.breakdown)

    def _event(self, txn: Txn, action: str, **data: Any) -> None:
        st = txn.state
        txn.events.append(
            {
                "time": txn.now,
                "action": action,
                **data,
                "counters": {TOTAL: st.total, BREAKDOWN: dict(st.breakdown)},
            }
        )


def _warn(_story_id: str, message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def _snapshot(state: LedgerState) -> str:
    """The ledger state as canonical JSON: a deep copy's source and the "did it change" test
    in one encoding (`dataclasses.asdict` costs several times more)."""
    return json.dumps(vars(state), sort_keys=True, ensure_ascii=False)


def _nonzero(kinds: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in kinds.items() if v}
