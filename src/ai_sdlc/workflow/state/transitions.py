"""The one owner of story state: every workflow change of a story is a named operation here.

Each operation is one `StoryStore.edit` transaction: under the story's lock it reads the file
and the recovery ledger (`workflow.ledger`), reconciles the two (the ledger wins where the file
is lower: tampering; a hand-edit upward is honoured), applies the change and appends the
ledger entry (the truth first); the file is written when the transaction ends, and the story's
events are appended after it, still under the lock (an event never claims what the file does
not say). Nothing else
writes `story.md`, the ledger or `events.jsonl` for the workflow: the runner, multi-story runs,
checkpoints and the CLI (`approve`, `unblock`, `pr`) only call these operations. What one
action changes is one transaction: `begin_action` also records the workspace's fields, `finish`
the publication. One check is not a transaction when it need not be: `ensure_can_act` right
after this owner's own transaction, with `story.md` byte for byte as written and the ledger
untouched, answers from what was written (see its docstring).

Counting rule (reserve, then settle): `begin_action` records the attempt *before* the agent call
or verification it pays for; `complete_phase` settles it as no recovery, `fail_attempt` as a
recovery of its kind (whether or not a phase limit also blocks), `release` as no recovery (the
user interrupted, the provider was unavailable, a budget stopped it). A reservation still open
when the next action begins was left by a process that died: it is counted as a recovery of
its kind before anything else happens.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any, NoReturn

import msgspec

from ai_sdlc.errors import AiSdlcError, StoryBlockedError
from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text, fsync_dir
from ai_sdlc.providers.base import Phase, Usage
from ai_sdlc.secrets import redact
from ai_sdlc.store import FLAG_FIELDS, Story, StoryStore
from ai_sdlc.workflow.engine.assess import pending_gate
from ai_sdlc.workflow.state.anchor import Anchoring, Mirrors, assess, events_high
from ai_sdlc.workflow.state.events import Clock, append_events, iso, utc_now
from ai_sdlc.workflow.state.ledger import (
    API_RETRY,
    DEFAULT_GLOBAL_LIMIT,
    FEEDBACK_LIMIT,
    IMPLEMENTATION_RETRY,
    KIND_LABELS,
    LEGACY_COUNTER,
    REFINEMENT,
    REWORK,
    Journal,
    LedgerState,
    limit_message,
    line_hash,
)

TOTAL = "total_recovery_attempts"
BREAKDOWN = "recovery_breakdown"

#: What an attempt of each phase counts as when it fails, or when its process dies mid-way
#: (research and plan cannot fail as a recovery; re-running one after a crash is a retried
#: provider call).
RESERVATION_KIND: dict[Phase, str] = {
    Phase.REFINE: REFINEMENT,
    Phase.RESEARCH: API_RETRY,
    Phase.PLAN: API_RETRY,
    Phase.IMPLEMENT: IMPLEMENTATION_RETRY,
    Phase.REWORK: IMPLEMENTATION_RETRY,
    Phase.REVIEW: REWORK,
}

#: The frontmatter keys a checkpoint restores: what a phase changes about the workflow.
RESTORED_KEYS: tuple[str, ...] = (
    "status",
    *FLAG_FIELDS,
    "rework_pending",
    "updated",
    "blocked_reason",
    "blocked_at",
)


class Ticket(msgspec.Struct, frozen=True):
    """What `begin_action` hands the runner for one attempt."""

    story: Story
    attempt: int
    last_failure: dict[str, Any] | None
    verified: dict[str, Any] | None


class RecoveryRecord(msgspec.Struct, frozen=True):
    story_id: str
    kind: str
    total: int
    breakdown: dict[str, int]
    #: The block this recovery caused (global limit or phase limit), or None.
    blocked: str | None = None


class PhaseLimit(msgspec.Struct, frozen=True):
    """A phase limit checked after a failed attempt is counted: `counter` > `limit` blocks."""

    counter: str
    limit: int
    message: Callable[[int], str]


class _Txn(msgspec.Struct):
    story: Story
    state: LedgerState
    now: str
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)
    blocked: str | None = None
    #: An artifact was renamed into the story's folder without a folder fsync (see `_txn`).
    unsynced: bool = False


class StoryState:
    """The state owner for one project's stories."""

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

    # --- reading --------------------------------------------------------------------------
    def ledger(self, story_id: str) -> LedgerState:
        return self.journal.read(self.store.folder(story_id).name)

    # --- actions ----------------------------------------------------------------------------
    def ensure_can_act(self, story_id: str) -> Story:
        """Before every action: settle a dead process's attempt, restore tampered counters,
        and refuse a blocked story or one at the global limit. Returns the story as written."""
        with self._txn(story_id, "check") as txn:
            self._settle_stale(txn)
            self._refuse_if_stopped(txn)
        self._raise_if_blocked(txn)
        return txn.story

    def begin_action(
        self,
        story_id: str,
        phase: Phase,
        *,
        fields: Mapping[str, Any] | None = None,
        event: Mapping[str, Any] | None = None,
        checkpoint: str | None = None,
    ) -> Ticket:
        """Reserve one attempt of `phase` (counted if it fails or its process dies). `fields`
        and `event`: the story's workspace as `record_fields` takes them, recorded in the same
        transaction (whether or not the story may act). `checkpoint`: the tag of the phase's
        checkpoint (`Checkpoint.tag`), kept in the reservation so that only that checkpoint
        is restored if the process dies."""
        with self._txn(story_id, "reserve") as txn:
            self._settle_stale(txn)
            if fields or event:
                self._fields(txn, fields or {}, event)
            self._refuse_if_stopped(txn)
            if txn.blocked is None:
                st = txn.state
                attempt = st.attempts.get(phase.value, 0) + 1
                st.attempts[phase.value] = attempt
                st.open = {
                    "kind": RESERVATION_KIND[phase],
                    "phase": phase.value,
                    "attempt": attempt,
                    "time": txn.now,
                }
                if checkpoint is not None:
                    st.open["checkpoint"] = checkpoint
                self._event(txn, "phase_started", phase=phase.value, attempt=attempt)
        self._raise_if_blocked(txn)
        return Ticket(
            txn.story,
            txn.state.attempts[phase.value],
            txn.state.last_failure,
            txn.state.verified,
        )

    def record_recovery(self, story_id: str, kind: str, **details: Any) -> RecoveryRecord:
        """Count one recovery (an API retry, before its sleep); blocks at the global limit."""
        with self._txn(story_id, "recovery") as txn:
            self._count(txn, kind, **details)
        self._raise_if_blocked(txn)
        return self._record(txn, kind)

    def complete_phase(
        self,
        story_id: str,
        phase: Phase,
        *,
        outcome: str = "completed",
        changes: Mapping[str, Any] | None = None,
        status: str | None = None,
        body: str | None = None,
        artifact: tuple[str, str] | None = None,
        verified: dict[str, Any] | None = None,
        usage: Usage | None = None,
        **details: Any,
    ) -> None:
        """The attempt passed: settle it as no recovery and write what the phase produced
        (with the agent call's `usage`, so one action is one transaction)."""
        with self._txn(story_id, "passed") as txn:
            if usage is not None:
                self._add_usage(txn, usage, 1)
            st = txn.state
            attempt = self._settle(txn, phase)
            st.last_failure = None
            if verified is not None:
                st.verified = verified
            if artifact is not None:
                self._write_artifact(txn, *artifact)
            self._apply(txn, changes or {}, status=status, body=body)
            self._event(
                txn, "phase", phase=phase.value, outcome=outcome, attempt=attempt, **details
            )

    def fail_attempt(
        self,
        story_id: str,
        phase: Phase,
        kind: str,
        *,
        outcome: str,
        feedback: str,
        limit: PhaseLimit | None = None,
        stalled: str | None = None,
        changes: Mapping[str, Any] | None = None,
        artifact: tuple[str, str] | None = None,
        patch: tuple[int, str] | None = None,
        signature: str | None = None,
        workspace_changed: bool | None = None,
        reason: str = "",
        usage: Usage | None = None,
        **details: Any,
    ) -> RecoveryRecord:
        """The attempt failed: it is a recovery of `kind`, counted whatever else happens. Then
        the global limit blocks, else `stalled` (no progress) or the phase `limit` does."""
        with self._txn(story_id, "failed") as txn:
            if usage is not None:
                self._add_usage(txn, usage, 1)
            attempt = self._settle(txn, phase)
            txn.state.last_failure = {
                "phase": phase.value,
                "outcome": outcome,
                "signature": signature,
                "feedback": redact(feedback)[:FEEDBACK_LIMIT],
                "workspace_changed": workspace_changed,
            }
            txn.state.verified = None
            if artifact is not None:
                self._write_artifact(txn, *artifact)
            self._event(
                txn,
                "phase",
                phase=phase.value,
                outcome=outcome,
                attempt=attempt,
                signature=signature,
                workspace_changed=workspace_changed,
                feedback=feedback[:FEEDBACK_LIMIT],
                **details,
            )
            self._count(txn, kind, phase=phase.value, reason=reason)
            self._apply(txn, changes or {})  # where the work goes next, even when blocked now
            if txn.blocked is None:
                why = stalled
                if why is None and limit is not None:
                    count = txn.story.counter(limit.counter)
                    if count > limit.limit:
                        why = limit.message(count)
                if why is not None:
                    self._block(txn, why, "phase_limit")
        if patch is not None:  # after the count is settled: a full disk cannot un-count it
            self._write_patch(txn, *patch)
        self._raise_if_blocked(txn)
        return self._record(txn, kind)

    def release(self, story_id: str, phase: Phase, reason: str) -> None:
        """The attempt ended without spending a recovery (interrupt, provider unavailable,
        a budget stop): close the reservation uncounted."""
        with self._txn(story_id, "released") as txn:
            if txn.state.open is not None:
                attempt = self._settle(txn, phase)
                self._event(
                    txn, "attempt_released", phase=phase.value, attempt=attempt, reason=reason
                )

    def block(
        self,
        story_id: str,
        reason: str,
        *,
        outcome: str = "phase_limit",
        artifact: tuple[str, str] | None = None,
    ) -> NoReturn:
        """Block the story (a guardrail or a FAILED review); the open attempt is released."""
        with self._txn(story_id, "blocked") as txn:
            if artifact is not None:
                self._write_artifact(txn, *artifact)
            if txn.state.open is not None:
                self._settle(txn, Phase(str(txn.state.open.get("phase"))))
            self._block(txn, reason, outcome)
        self._raise_if_blocked(txn)
        raise AssertionError("a block always raises")

    def finish(
        self,
        story_id: str,
        *,
        fields: Mapping[str, Any] | None = None,
        event: Mapping[str, Any] | None = None,
    ) -> None:
        """The story is done; `fields` and `event` (its publication, as `record_fields` takes
        them) are recorded in the same transaction."""
        with self._txn(story_id, "done") as txn:
            self._apply(txn, {}, status="done")
            self._event(txn, "done", outcome="completed")
            if fields or event:
                self._fields(txn, fields or {}, event)

    def add_usage(self, story_id: str, usage: Usage, *, calls: int) -> None:
        """Add provider usage to the story's `usage` (outside a phase's own transaction)."""
        with self._txn(story_id, "usage") as txn:
            self._add_usage(txn, usage, calls)

    def record_fields(
        self, story_id: str, fields: Mapping[str, Any], event: Mapping[str, Any] | None = None
    ) -> None:
        """Set repository fields (`branch`, `worktree_path`, `pr_url`) and log `event`."""
        with self._txn(story_id, "fields") as txn:
            self._fields(txn, fields, event)

    def note(self, story_id: str, action: str, **data: Any) -> None:
        """Log an event about the story (e.g. a run escalated it) under its lock."""
        with self._txn(story_id, "note") as txn:
            self._event(txn, action, **data)

    def approve(self, story_id: str, gates: Mapping[str, Any]) -> str:
        """Pass the gate the story waits at; returns the gate's name."""
        with self._txn(story_id, "approve") as txn:
            gate = pending_gate(txn.story.frontmatter, gates)
            if gate is None:
                raise AiSdlcError(
                    f"{txn.story.id} is not waiting at a gate",
                    hint="gates are set in config: gates.before_implementation, gates.before_done",
                )
            approved = list(txn.story.frontmatter.get("approved_gates") or [])
            txn.story.frontmatter["approved_gates"] = [*approved, gate]
            self._event(txn, "approve", outcome=gate)
        return gate

    def unblock(self, story_id: str, *, reset_retries: bool) -> dict[str, Any]:
        """Clear a block. The story returns to the status it had when it was blocked (so to the
        first phase it has not passed, refinement included). With `reset_retries` every
        recovery counter the story has, and the ledger, start again from 0."""
        with self._txn(story_id, "unblock") as txn:
            fm = txn.story.frontmatter
            st = txn.state
            was_blocked = fm.get("status") == "blocked"
            if was_blocked:
                fm["status"] = st.resume_status or _first_unpassed_status(fm)
                st.resume_status = None
            for key in ("blocked_reason", "blocked_at"):
                if key in fm:
                    del fm[key]
            if reset_retries:
                for name in (TOTAL, *LEGACY_COUNTER.values()):
                    if name == TOTAL or name in fm:
                        fm[name] = 0
                if BREAKDOWN in fm:
                    fm[BREAKDOWN] = {}
                st.total, st.breakdown, st.open = 0, {}, None
                st.chain += 1  # the one operation that starts a new chain
            self._event(
                txn,
                "unblock",
                outcome="unblocked" if was_blocked else "not_blocked",
                reset_retries=reset_retries,
            )
        return {
            "id": txn.story.id,
            "was_blocked": was_blocked,
            "status": txn.story.frontmatter.get("status"),
            "reset_retries": reset_retries,
            "total_recovery_attempts": txn.state.total,
        }

    def restore(
        self,
        story_id: str,
        saved: Story,
        artifacts: Mapping[str, bytes | None],
        *,
        phase: str,
        reason: str,
    ) -> list[str]:
        """Put a checkpoint's workflow state back (keys in RESTORED_KEYS, body, artifacts); the
        recovery accounting is never restored: the ledger keeps it."""
        restored: list[str] = []
        with self._txn(story_id, "restore") as txn:
            fm = txn.story.frontmatter
            for key in RESTORED_KEYS:
                if key in saved.frontmatter:
                    value = saved.frontmatter[key]
                    if key not in fm or fm[key] != value:
                        fm[key] = value
                        restored.append(key)
                elif key in fm:
                    del fm[key]
                    restored.append(key)
            if txn.story.body != saved.body:
                txn.story.body = saved.body
                restored.append("body")
            folder = txn.story.folder
            for name, data in artifacts.items():
                current = folder / name
                if data is None:
                    if current.exists():
                        current.unlink()
                        restored.append(name)
                elif not current.is_file() or current.read_bytes() != data:
                    atomic_write_bytes(current, data)
                    restored.append(name)
            self._event(
                txn, "rollback_initiated", phase=phase, reason=reason[:500], restored=restored
            )
        return restored

    def restore_file(self, story_id: str, data: bytes) -> None:
        """`story.md` became unreadable during a phase: put the checkpoint's copy back, then
        re-apply the ledger's accounting (the next transaction's reconcile does it)."""
        self.store.replace_unreadable(story_id, data)
        with self._txn(story_id, "restore_file") as txn:
            self._event(txn, "story_file_restored")

    # --- the transaction ------------------------------------------------------------------
    @contextmanager
    def _txn(self, story_id: str, op: str) -> Iterator[_Txn]:
        with self.store.edit(story_id) as story:
            now = iso(self.clock())
            anchoring, prev = self._anchor(story, now)
            before = anchoring.state
            snapshot = _snapshot(before)
            txn = _Txn(story, LedgerState.from_json(json.loads(snapshot)), now)
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

    def _tampered(self, txn: _Txn, anchoring: Anchoring) -> None:
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

    def _reconcile(self, txn: _Txn, before: LedgerState) -> None:
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
            self._event(
                txn,
                "ledger_resynced" if crashed else "tamper_detected",
                changed=lowered,
                reason="the story file lagged the ledger after a crash"
                if crashed
                else "recovery counters in story.md were lowered outside ai-sdlc; "
                "restored from the ledger (only 'ai-sdlc unblock --reset-retries' lowers them)",
            )
        if raised:
            self._event(txn, "counters_hand_edited", changed=raised)
        if lowered or st.total != file_total:
            self._write_view(txn)

    @staticmethod
    def _sync_folder(txn: _Txn) -> None:
        """An artifact renamed into the story's folder in this transaction is made durable by
        the folder fsync of the `story.md` write that follows it; only when `story.md` did not
        change is the folder fsynced here (before the events claim the artifact)."""
        if txn.unsynced and txn.story.written is None:
            fsync_dir(txn.story.folder)

    # --- building blocks ----------------------------------------------------------------------
    def _settle_stale(self, txn: _Txn) -> None:
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
            f"(the process died); the attempt counts as a {KIND_LABELS[kind][0]}"
        )
        self._count(txn, kind, phase=open_.get("phase"), reason=reason, stale=True)

    def _settle(self, txn: _Txn, phase: Phase) -> int:
        """Close the attempt in flight; returns its number."""
        open_ = txn.state.open
        txn.state.open = None
        if open_ is not None and isinstance(open_.get("attempt"), int):
            return int(open_["attempt"])
        return txn.state.attempts.get(phase.value, 0)

    def _count(self, txn: _Txn, kind: str, **details: Any) -> None:
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

    def _refuse_if_stopped(self, txn: _Txn) -> None:
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

    def _block(self, txn: _Txn, reason: str, outcome: str) -> None:
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

    def _raise_if_blocked(self, txn: _Txn) -> None:
        if txn.blocked is None:
            return
        story_id = txn.story.id
        if txn.blocked.startswith("Global recovery limit"):
            raise StoryBlockedError(txn.blocked, story_id=story_id)
        raise StoryBlockedError(
            txn.blocked,
            story_id=story_id,
            hint=f"fix the cause, then run 'ai-sdlc unblock {story_id}'",
        )

    def _write_view(self, txn: _Txn) -> None:
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

    def _apply(
        self,
        txn: _Txn,
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

    def _fields(
        self, txn: _Txn, fields: Mapping[str, Any], event: Mapping[str, Any] | None
    ) -> None:
        self._apply(txn, fields)
        if event:
            data = {k: v for k, v in event.items() if k != "action"}
            self._event(txn, str(event.get("action", "fields")), **data)

    def _add_usage(self, txn: _Txn, usage: Usage, calls: int) -> None:
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

    def _write_artifact(self, txn: _Txn, name: str, text: str) -> None:
        self.store.write_artifact(txn.story.id, name, text, sync_folder=False)
        txn.unsynced = True  # the folder is fsynced once the transaction writes (`_txn`)

    def _write_patch(self, txn: _Txn, attempt: int, text: str) -> None:
        folder = txn.story.folder / "attempts"
        folder.mkdir(exist_ok=True)
        atomic_write_text(folder / f"{attempt}.patch", text)

    def _event(self, txn: _Txn, action: str, **data: Any) -> None:
        st = txn.state
        txn.events.append(
            {
                "time": txn.now,
                "action": action,
                **data,
                "counters": {TOTAL: st.total, BREAKDOWN: dict(st.breakdown)},
            }
        )

    def _record(self, txn: _Txn, kind: str) -> RecoveryRecord:
        st = txn.state
        return RecoveryRecord(txn.story.id, kind, st.total, dict(st.breakdown), txn.blocked)


class _Delete:
    """Marker for `changes`: remove the key."""

    def __repr__(self) -> str:
        return "DELETE"


_DELETE: Any = _Delete()
DELETE: Any = _DELETE


def _warn(_story_id: str, message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def _snapshot(state: LedgerState) -> str:
    """The ledger state as canonical JSON: a deep copy's source and the "did it change" test
    in one encoding (`dataclasses.asdict` costs several times more)."""
    return json.dumps(vars(state), sort_keys=True, ensure_ascii=False)


def _nonzero(kinds: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in kinds.items() if v}


def _date(moment: dt.datetime) -> str:
    return moment.date().isoformat()


def _first_unpassed_status(fm: Mapping[str, Any]) -> str:
    """For a story blocked before the ledger knew its status (blocked by hand, older files):
    a phase flag set means refinement was passed; refinement iterations without one mean it
    was not."""
    if any(fm.get(flag) for flag in FLAG_FIELDS):
        return "in-progress"
    return "backlog" if fm.get("refinement_count") else "ready"


__all__ = [
    "DELETE",
    "RESERVATION_KIND",
    "RESTORED_KEYS",
    "PhaseLimit",
    "RecoveryRecord",
    "StoryState",
    "Ticket",
]
