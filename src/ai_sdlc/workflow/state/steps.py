"""The building blocks the story owner's operations are made of, inside one transaction.

Settle an attempt (and count a dead process's reservation before anything else), count one
recovery (ledger and file together; the global limit blocks), block and refuse, apply
frontmatter changes, add usage, write an artifact or an attempt's patch. Each works on the
open transaction (`txn.Txn`) and is only ever called from `transitions.StoryState`'s
operations, which decide what one action changes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from typing import Any

import msgspec

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.providers.base import Phase, Usage
from ai_sdlc.secrets import redact
from ai_sdlc.untrusted import strip_controls
from ai_sdlc.wording import article
from ai_sdlc.workflow.state.ledger import (
    IMPLEMENTATION_RETRY,
    KIND_LABELS,
    LEGACY_COUNTER,
    limit_message,
)
from ai_sdlc.workflow.state.txn import Transactions, Txn

#: Longest verification output kept whole for `ai-sdlc log --full` (characters).
OUTPUT_LIMIT = 1_000_000


def output_name(attempt: int) -> str:
    """Where a failed attempt's whole verification output is kept, in the story's folder."""
    return f"attempts/{attempt}.output.txt"


class RecoveryRecord(msgspec.Struct, frozen=True):
    story_id: str
    kind: str
    total: int
    breakdown: dict[str, int]
    #: The block this recovery caused (global limit or phase limit), or None.
    blocked: str | None = None


class Steps(Transactions):
    """What an operation does inside its transaction (see the module docstring)."""

    def _settle_stale(self, txn: Txn) -> None:
        """A reservation left open by a process that died: count it before anything else."""
        open_ = txn.state.open
        if open_ is None:
            return
        txn.state.open = None
        kind = str(open_.get("kind"))
        if kind not in KIND_LABELS:
            kind = IMPLEMENTATION_RETRY
        reason = (
            f"an earlier run stopped during {open_.get('phase')} attempt {open_.get('attempt')} "
            f"(the process died); the attempt counts as {article(KIND_LABELS[kind][0])}"
        )
        self._count(txn, kind, phase=open_.get("phase"), reason=reason, stale=True)

    def _settle(self, txn: Txn, phase: Phase) -> int:
        """Close the attempt in flight; returns its number."""
        open_ = txn.state.open
        txn.state.open = None
        if open_ is not None and isinstance(open_.get("attempt"), int):
            return int(open_["attempt"])
        return txn.state.attempts.get(phase.value, 0)

    def _count(self, txn: Txn, kind: str, **details: Any) -> None:
        """One recovery of `kind`: ledger and file +1 together; the global limit blocks."""
        if kind not in KIND_LABELS:
            raise ValueError(f"unknown recovery kind {kind!r}")
        st, fm = txn.state, txn.story.frontmatter
        st.breakdown[kind] = st.breakdown.get(kind, 0) + 1
        st.total += 1
        self._write_view(txn)
        legacy = LEGACY_COUNTER.get(kind)
        if legacy:
            fm[legacy] = txn.story.counter(legacy) + 1
        at_limit = st.total >= self.limit
        self._event(
            txn,
            "recovery",
            outcome="blocked" if at_limit else "recorded",
            recovery_kind=kind,
            **{k: v for k, v in details.items() if v is not None},
        )
        if at_limit and txn.blocked is None:
            self._block(
                txn, limit_message(txn.story.id, st.total, self.limit, st.breakdown), "global"
            )

    def _refuse_if_stopped(self, txn: Txn) -> None:
        fm = txn.story.frontmatter
        if txn.blocked is not None:
            return
        if fm.get("status") == "blocked":
            txn.blocked = f"{txn.story.id} is blocked: {fm.get('blocked_reason') or 'no reason'}"
            return
        if txn.state.total >= self.limit:
            st = txn.state
            self._block(
                txn, limit_message(txn.story.id, st.total, self.limit, st.breakdown), "global"
            )

    def _block(self, txn: Txn, reason: str, outcome: str) -> None:
        fm = txn.story.frontmatter
        reason = redact(reason)
        status = fm.get("status")
        if status != "blocked":
            txn.state.resume_status = str(status) if status else None
        txn.state.open = None
        fm["status"] = "blocked"
        fm["blocked_reason"] = reason
        fm["blocked_at"] = txn.now
        txn.blocked = reason
        self._event(
            txn,
            "blocked",
            outcome="global_recovery_limit" if outcome == "global" else outcome,
            reason=reason,
        )

    def _raise_if_blocked(self, txn: Txn) -> None:
        if txn.blocked is None:
            return
        story_id = txn.story.id
        raise StoryBlockedError(
            txn.blocked, story_id=story_id, hint=unblock_hint(story_id, txn.blocked)
        )

    def _apply(
        self,
        txn: Txn,
        changes: Mapping[str, Any],
        *,
        status: str | None = None,
        body: str | None = None,
    ) -> None:
        fm = txn.story.frontmatter
        for key, value in changes.items():
            if value is _DELETE:
                if key in fm:
                    del fm[key]
            elif fm.get(key) != value or key not in fm:
                fm[key] = value
        if body is not None and body != txn.story.body:
            txn.story.body = body
        if status is not None and fm.get("status") != status:
            fm["status"] = status
            fm["updated"] = _date(self.clock())

    def _fields(self, txn: Txn, fields: Mapping[str, Any], event: Mapping[str, Any] | None) -> None:
        self._apply(txn, fields)
        if event:
            data = {k: v for k, v in event.items() if k != "action"}
            self._event(txn, str(event.get("action", "fields")), **data)

    def _add_usage(self, txn: Txn, usage: Usage, calls: int) -> None:
        if not usage.total_tokens and usage.cost_usd is None and not calls:
            return
        current = txn.story.frontmatter.get("usage")
        totals = dict(current) if isinstance(current, Mapping) else {}
        totals["input_tokens"] = int(totals.get("input_tokens") or 0) + usage.input_tokens
        totals["output_tokens"] = int(totals.get("output_tokens") or 0) + usage.output_tokens
        if usage.cost_usd is not None:
            totals["cost_usd"] = round(float(totals.get("cost_usd") or 0.0) + usage.cost_usd, 6)
        totals["calls"] = int(totals.get("calls") or 0) + calls
        txn.story.frontmatter["usage"] = totals

    def _write_artifact(self, txn: Txn, name: str, text: str) -> None:
        self.store.write_artifact(txn.story.id, name, text, sync_folder=False)
        txn.unsynced = True  # the folder is fsynced once the transaction writes (`_txn`)

    def _write_patch(self, txn: Txn, attempt: int, text: str) -> None:
        folder = txn.story.folder / "attempts"
        folder.mkdir(exist_ok=True)
        atomic_write_text(folder / f"{attempt}.patch", text)

    def _write_output(self, txn: Txn, attempt: int, text: str) -> None:
        """A failed attempt's whole verification output (redacted, without terminal control
        sequences: the agent's tests print it, and `cat` of the file would send them to the
        terminal; a long one keeps its end). A copy for people: a disk that cannot take it
        loses it, never the count."""
        text = redact(strip_controls(text))
        if len(text) > OUTPUT_LIMIT:
            omitted = len(text) - OUTPUT_LIMIT
            text = f"[... {omitted} characters omitted ...]\n" + text[-OUTPUT_LIMIT:]
        with contextlib.suppress(OSError):
            (txn.story.folder / "attempts").mkdir(exist_ok=True)
            atomic_write_text(txn.story.folder / output_name(attempt), text)

    def _record(self, txn: Txn, kind: str) -> RecoveryRecord:
        st = txn.state
        return RecoveryRecord(txn.story.id, kind, st.total, dict(st.breakdown), txn.blocked)


class _Delete:
    """Marker for `changes`: remove the key."""

    def __repr__(self) -> str:
        return "DELETE"


_DELETE: Any = _Delete()
DELETE: Any = _DELETE


def _date(moment: dt.datetime) -> str:
    return moment.date().isoformat()


def unblock_hint(story_id: str, reason: str | None) -> str | None:
    """The way out of a block, for every place that shows one: the command that clears it
    (None when the reason names it already, as the global limit's does)."""
    if reason and "ai-sdlc unblock" in reason:
        return None
    return f"fix the cause, then run 'ai-sdlc unblock {story_id}'"
