"""Failure-loop detection: bounce loops inside a story, escalation loops across stories.

A *bounce* is a step back in a story's cycle: a phase starting that comes before the last phase
started (review → implement after a RECOVERY, review → rework after a REJECTED review, any
phase whose precondition fails and sends work back). A run escalates a story that bounces more
than `run.max_bounces` times. An *escalation loop* is `run.max_consecutive_escalations` stories
escalated in a row: the run halts with a diagnostic instead of failing the same way all night.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.providers.base import Phase
from ai_sdlc.wording import count, plural
from ai_sdlc.workflow.state.events import read_events

CONSECUTIVE_ESCALATIONS = "consecutive escalations"
#: Not a loop: nothing is left to run but escalated stories (those before may well be done).
ALL_ESCALATED = "every remaining story escalated"

#: Position of each phase in a story's cycle; rework redoes implementation.
PHASE_ORDER: dict[str, int] = {
    Phase.REFINE.value: 0,
    Phase.RESEARCH.value: 1,
    Phase.PLAN.value: 2,
    Phase.IMPLEMENT.value: 3,
    Phase.REWORK.value: 3,
    Phase.REVIEW.value: 4,
}

TAIL_LINES = 20


def is_step_back(previous: str | None, current: str) -> bool:
    """True when `current` comes earlier in the cycle than `previous`."""
    if previous is None or previous not in PHASE_ORDER or current not in PHASE_ORDER:
        return False
    return PHASE_ORDER[current] < PHASE_ORDER[previous]


def bounce_reason(bounces: int, limit: int, previous: str, current: str) -> str:
    return (
        f"Bounce loop: work went back to an earlier phase {bounces} times in this run "
        f"(last {previous} → {current}; limit run.max_bounces = {limit}). "
        "The story keeps being sent back; look at the review feedback in its events.jsonl"
    )


@dataclass(frozen=True)
class FailureLoop:
    loop_type: str
    stories: list[str]
    last_phase: str | None
    reason: str
    output_tail: str
    consecutive: int
    threshold: int
    #: ALL_ESCALATED: each story left and why it cannot go on (its block reason).
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        who = ", ".join(self.stories) or "none"
        if self.loop_type == ALL_ESCALATED:
            listed = "; ".join(f"{sid} ({self.reasons.get(sid, '?')})" for sid in self.stories)
            return f"every remaining story is escalated: {listed or who}"
        return (
            f"FAILURE LOOP DETECTED ({self.loop_type}): {count(self.consecutive, 'story')} in a "
            f"row {plural('was', self.consecutive)} escalated "
            f"({who}; run.max_consecutive_escalations = {self.threshold})"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message}


def failure_tail(story_folder: Path, lines: int = TAIL_LINES) -> str:
    """The tail of the story's last recorded failure output (verification output, review
    feedback), else its last block reason, from its event log."""
    feedback = reason = ""
    for event in read_events(story_folder):
        text = event.get("feedback")
        if isinstance(text, str) and text.strip():
            feedback = text
        if event.get("action") == "blocked" and isinstance(event.get("reason"), str):
            reason = str(event["reason"])
    last = feedback or reason
    return "\n".join(last.rstrip().splitlines()[-lines:])
