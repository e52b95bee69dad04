"""The recovery ledger: one persisted counter for every kind of recovery, and the global limit.

Every recovery (implementation retry, rework, refinement iteration, API retry) goes through
`record_recovery`, which increments `total_recovery_attempts` and its kind in
`recovery_breakdown` by exactly one inside one story transaction, and blocks the story in that
same transaction when the total reaches the limit. `ensure_can_act` runs before every action.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.events import Clock, append_event, iso, utc_now

IMPLEMENTATION_RETRY = "implementation_retry"
REWORK = "rework"
REFINEMENT = "refinement"
API_RETRY = "api_retry"

#: kind → (singular, plural) as the limit message spells them, in message order.
KIND_LABELS: dict[str, tuple[str, str]] = {
    IMPLEMENTATION_RETRY: ("implementation retry", "implementation retries"),
    REWORK: ("rework cycle", "rework cycles"),
    API_RETRY: ("API retry", "API retries"),
    REFINEMENT: ("refinement iteration", "refinement iterations"),
}

#: The per-kind counters the TypeScript tool keeps, bumped alongside the global one.
LEGACY_COUNTER = {
    IMPLEMENTATION_RETRY: "implementation_retry_count",
    REWORK: "retry_count",
    REFINEMENT: "refinement_count",
}

RESET_FIELDS = (
    "total_recovery_attempts",
    "implementation_retry_count",
    "retry_count",
    "refinement_count",
)

DEFAULT_GLOBAL_LIMIT = 10


def breakdown_text(total: int, breakdown: dict[str, int]) -> str:
    parts: list[str] = []
    for kind, (one, many) in KIND_LABELS.items():
        n = breakdown.get(kind, 0)
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    for kind in sorted(set(breakdown) - set(KIND_LABELS)):
        if breakdown[kind]:
            parts.append(f"{breakdown[kind]} {kind}")
    unattributed = total - sum(v for v in breakdown.values() if v > 0)
    if unattributed > 0:
        parts.append(f"{unattributed} unattributed")
    return ", ".join(parts) if parts else "none recorded"


def limit_message(story_id: str, total: int, limit: int, breakdown: dict[str, int]) -> str:
    return (
        f"Global recovery limit exceeded ({total}/{limit}) for {story_id}. "
        f"Breakdown: {breakdown_text(total, breakdown)}. "
        f"Run 'ai-sdlc unblock {story_id} --reset-retries' after fixing the cause."
    )


@dataclass(frozen=True)
class RecoveryRecord:
    story_id: str
    kind: str
    total: int
    breakdown: dict[str, int]
    blocked: bool
    message: str | None


class Ledger:
    """Records recoveries and enforces the global limit for one project."""

    def __init__(
        self, store: StoryStore, *, limit: int = DEFAULT_GLOBAL_LIMIT, clock: Clock = utc_now
    ) -> None:
        self.store = store
        self.limit = limit
        self.clock = clock

    def mark_blocked(self, story: Any, message: str) -> None:
        """Set the block fields on a story open in a transaction."""
        story.frontmatter["status"] = "blocked"
        story.frontmatter["blocked_reason"] = message
        story.frontmatter["blocked_at"] = iso(self.clock())

    def record_recovery(self, story_id: str, kind: str, **details: Any) -> RecoveryRecord:
        """Count one recovery of `kind`; block the story in the same transaction at the limit.

        Raises `StoryBlockedError` when the story is (now) blocked: the recovery must not run.
        """
        if kind not in KIND_LABELS:
            raise ValueError(f"unknown recovery kind {kind!r}")
        with self.store.edit(story_id) as story:
            total = story.record_recovery(kind)
            legacy = LEGACY_COUNTER.get(kind)
            if legacy:
                story.increment(legacy)
            breakdown = dict(story.recovery_breakdown)
            blocked = total >= self.limit
            message = limit_message(story_id, total, self.limit, breakdown) if blocked else None
            if message:
                self.mark_blocked(story, message)
            folder = story.folder
        append_event(
            folder,
            {
                "time": iso(self.clock()),
                "action": "recovery",
                "outcome": "blocked" if blocked else "recorded",
                "recovery_kind": kind,
                "counters": {"total_recovery_attempts": total, "recovery_breakdown": breakdown},
                **details,
            },
        )
        if message:
            self._blocked_at_limit(story_id, folder, message, total, breakdown)
        return RecoveryRecord(story_id, kind, total, breakdown, False, None)

    def ensure_can_act(self, story_id: str) -> None:
        """Run before every action: a blocked story, or one at the limit, does nothing."""
        story = self.store.get(story_id)
        if story.status == "blocked":
            reason = story.frontmatter.get("blocked_reason") or "no reason recorded"
            raise StoryBlockedError(
                f"{story_id} is blocked: {reason}",
                story_id=story_id,
                hint=f"run 'ai-sdlc unblock {story_id}' once the cause is fixed",
            )
        if story.counter("total_recovery_attempts") < self.limit:
            return
        with self.store.edit(story_id) as fresh:
            total = fresh.counter("total_recovery_attempts")
            if total < self.limit:  # reset meanwhile by another process
                return
            breakdown = dict(fresh.recovery_breakdown)
            message = limit_message(story_id, total, self.limit, breakdown)
            self.mark_blocked(fresh, message)
            folder = fresh.folder
        self._blocked_at_limit(story_id, folder, message, total, breakdown)

    def _blocked_at_limit(
        self, story_id: str, folder: Path, message: str, total: int, breakdown: dict[str, int]
    ) -> NoReturn:
        """Log the block the transaction just wrote, then stop the caller."""
        append_event(
            folder,
            {
                "time": iso(self.clock()),
                "action": "blocked",
                "outcome": "global_recovery_limit",
                "reason": message,
                "counters": {"total_recovery_attempts": total, "recovery_breakdown": breakdown},
            },
        )
        raise StoryBlockedError(message, story_id=story_id)


def unblock(
    store: StoryStore, story_id: str, *, reset_retries: bool, clock: Clock = utc_now
) -> dict[str, Any]:
    """Clear a block; with `reset_retries` zero every recovery counter. Returns what changed."""
    with store.edit(story_id) as story:
        fm = story.frontmatter
        was_blocked = fm.get("status") == "blocked"
        if was_blocked:
            started = any(
                fm.get(flag)
                for flag in ("research_complete", "plan_complete", "implementation_complete")
            )
            fm["status"] = "in-progress" if started else "ready"
        for key in ("blocked_reason", "blocked_at"):
            if key in fm:
                del fm[key]
        if reset_retries:
            for name in RESET_FIELDS:
                fm[name] = 0
            fm["recovery_breakdown"] = dict.fromkeys(KIND_LABELS, 0)
        status = fm.get("status")
        folder = story.folder
        total = story.counter("total_recovery_attempts")
    append_event(
        folder,
        {
            "time": iso(clock()),
            "action": "unblock",
            "outcome": "unblocked" if was_blocked else "not_blocked",
            "reset_retries": reset_retries,
            "counters": {"total_recovery_attempts": total},
        },
    )
    return {
        "id": story_id,
        "was_blocked": was_blocked,
        "status": status,
        "reset_retries": reset_retries,
        "total_recovery_attempts": total,
    }
