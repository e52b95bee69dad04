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

The owner is one class in three modules: `txn` (the transaction: lock, reconcile, tamper,
ledger append), `steps` (the building blocks inside a transaction) and this one (the named
operations, all that the rest of the code calls).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.fsutil import atomic_write_bytes
from ai_sdlc.providers.base import Phase, Usage
from ai_sdlc.secrets import redact
from ai_sdlc.store import FLAG_FIELDS, Story
from ai_sdlc.store.values import to_plain
from ai_sdlc.workflow.state.ledger import (
    API_RETRY,
    FEEDBACK_LIMIT,
    IMPLEMENTATION_RETRY,
    LEGACY_COUNTER,
    PR_REWORK,
    REFINEMENT,
    REWORK,
)
from ai_sdlc.workflow.state.readiness import pending_gate
from ai_sdlc.workflow.state.steps import DELETE, RecoveryRecord, Steps, _date, output_name
from ai_sdlc.workflow.state.txn import BREAKDOWN, TOTAL

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


class PhaseLimit(msgspec.Struct, frozen=True):
    """A phase limit checked after a failed attempt is counted: `counter` > `limit` blocks."""

    counter: str
    limit: int
    message: Callable[[int], str]


class StoryState(Steps):
    """The state owner for one project's stories."""

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
        output: str | None = None,
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
                **({"output_file": output_name(attempt)} if output else {}),
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
        if output:  # the whole failing output, for `ai-sdlc log --full`
            self._write_output(txn, attempt, output)
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

    def await_review(
        self,
        story_id: str,
        *,
        changes: Mapping[str, Any] | None = None,
        event: Mapping[str, Any] | None = None,
    ) -> None:
        """The story's pull request is open and followed (`pr.loop`): it waits `in-review`,
        not done. `changes` (e.g. the PR url, feedback seen) and `event` in the same
        transaction."""
        with self._txn(story_id, "in-review") as txn:
            self._apply(txn, changes or {}, status="in-review")
            if event:
                data = {k: v for k, v in event.items() if k != "action"}
                self._event(txn, str(event.get("action", "in_review")), **data)

    def pr_round(
        self,
        story_id: str,
        *,
        round_no: int,
        limit: int,
        feedback: str,
        changes: Mapping[str, Any],
        event: Mapping[str, Any],
    ) -> RecoveryRecord:
        """New trusted feedback on the story's PR: one PR rework round. Checked before it
        starts (a blocked story or one at the global limit is refused; a round beyond
        `limit`, `limits.pr_rounds`, blocks uncounted), then counted as `pr_rework`: the
        global limit blocks here too. The round's feedback is kept whole as
        `pr-round-<n>.md`; `changes` send the story to rework."""
        with self._txn(story_id, "pr_round") as txn:
            self._settle_stale(txn)
            self._refuse_if_stopped(txn)
            if txn.blocked is None and round_no > limit:
                self._block(
                    txn,
                    f"{story_id}: the pull request asked for a PR rework round {round_no} "
                    f"(limit {limit} PR rework rounds, limits.pr_rounds)",
                    "phase_limit",
                )
            if txn.blocked is None:
                self._write_artifact(txn, f"pr-round-{round_no}.md", feedback)
                txn.state.last_failure = {
                    "phase": Phase.REVIEW.value,
                    "outcome": "pr_feedback",
                    "signature": None,
                    "feedback": redact(feedback)[:FEEDBACK_LIMIT],
                    "workspace_changed": None,
                    "pr_round": round_no,
                }
                txn.state.verified = None
                self._apply(txn, changes, status="in-progress")
                self._event(txn, "pr_round", round=round_no, **event)
                reason = f"PR rework round {round_no}"
                self._count(txn, PR_REWORK, phase=Phase.REVIEW.value, reason=reason)
        self._raise_if_blocked(txn)
        return self._record(txn, PR_REWORK)

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
            if gate is None:  # say where it is, and the command that moves it on
                sid, status = txn.story.id, txn.story.frontmatter.get("status") or "backlog"
                hint = (
                    "nothing to approve: it is done"
                    if status == "done"
                    else f"'ai-sdlc run {sid}' takes it on (it stops at a gate set in config: "
                    "gates.before_implementation, gates.before_done)"
                )
                raise AiSdlcError(f"{sid} is not waiting at a gate (it is {status})", hint=hint)
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

    # --- shaping the backlog (`ai-sdlc set`, `archive`) ------------------------------------
    def shape(self, story_id: str, changes: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Set what a person may set (`shaping.SETTABLE`, values already parsed): checked
        against the backlog under the graph lock, applied in one transaction, logged as one
        `edited` event. Returns {key: {"from": old, "to": new}} of what changed."""
        from ai_sdlc.store.archive import archived_numbers
        from ai_sdlc.store.ids import format_id
        from ai_sdlc.workflow.state import shaping

        with self.store.graph_locked():
            backlog = {s.id: s.frontmatter for s in self.store.list()}
            if "dependencies" in changes:
                gone = [format_id(n) for n in archived_numbers(self.store)]
                shaping.check_dependencies(story_id, changes["dependencies"], backlog, gone)
            with self._txn(story_id, "edit") as txn:
                fm = txn.story.frontmatter
                if "status" in changes:
                    shaping.check_status_change(story_id, fm.get("status"), changes["status"])
                changed: dict[str, dict[str, Any]] = {}
                for key in shaping.SETTABLE:
                    if key not in changes:
                        continue
                    old, new = fm.get(key), changes[key]
                    if (new == old and (new is None or key in fm)) or (new == [] and not old):
                        continue
                    changed[key] = {"from": to_plain(old), "to": new}
                    if new is None:
                        del fm[key]
                    else:
                        fm[key] = new
                if changed:
                    fm["updated"] = _date(self.clock())
                    self._event(txn, "edited", changed=changed)
        return changed

    def archive(self, story_id: str) -> Path:
        """Move the story out of the backlog into `.ai-sdlc/archive/` (`store.archive`):
        refused while a run holds it and while an active story depends on it. Its last
        transaction records `archived_at` and an `archived` event; returns its new folder."""
        from ai_sdlc.errors import BusyError, UsageError
        from ai_sdlc.store.archive import move_to_archive
        from ai_sdlc.workflow.state import shaping
        from ai_sdlc.workflow.state.runlock import run_lock

        try:
            with run_lock(self.store.ai_dir, story_id, what=story_id), self.store.graph_locked():
                backlog = {s.id: s.frontmatter for s in self.store.list()}
                waiting = shaping.dependents(story_id, backlog)
                if waiting:
                    raise UsageError(
                        f"{story_id} cannot be archived: {', '.join(waiting)} "
                        f"{'depends' if len(waiting) == 1 else 'depend'} on it",
                        hint=f"first drop it from their dependencies "
                        f"(ai-sdlc set {waiting[0]} dependencies=...)",
                    )
                with self._txn(story_id, "archive") as txn:
                    status = txn.story.frontmatter.get("status")
                    txn.story.frontmatter["archived_at"] = _date(self.clock())
                    self._event(txn, "archived", status=status)
                return move_to_archive(self.store, story_id)
        except BusyError as exc:
            raise BusyError(f"cannot archive {story_id}: {exc.message}", hint=exc.hint) from None

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
