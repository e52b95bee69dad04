"""The recovery ledger: the truth about a story's recovery accounting, kept outside its file.

`story.md`'s `total_recovery_attempts` and `recovery_breakdown` are the ledger's *view*: anyone
(a user, an agent, a test suite running `git checkout -- .`) can rewrite that file. The ledger is
an append-only journal per story, `.ai-sdlc/state/ledger/<id>.jsonl` (git-ignored, refused to
every agent tool), written only by the state owner (`workflow.transitions`) under the story's
lock. Each line holds the complete accounting after one operation, so the newest complete line
is the current state and a torn last line (a crash mid-append) falls back to the one before.

Besides the counters the ledger keeps what the runner decides with: the open reservation of the
attempt in flight, attempt numbers per phase, the last failure (fed to the next prompt), the
status to return to after a block, and the last verification verdict with its workspace
fingerprint (so review reuses it instead of running the test suite again).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.store.schema import RECOVERY_KIND_LABELS

IMPLEMENTATION_RETRY = "implementation_retry"
REWORK = "rework"
REFINEMENT = "refinement"
API_RETRY = "api_retry"

#: The recovery kinds and their labels: the store schema's one table.
KIND_LABELS = RECOVERY_KIND_LABELS

#: The per-kind counters the TypeScript tool keeps, bumped alongside the global one; the phase
#: limits are checked against them.
LEGACY_COUNTER = {
    IMPLEMENTATION_RETRY: "implementation_retry_count",
    REWORK: "retry_count",
    REFINEMENT: "refinement_count",
}

DEFAULT_GLOBAL_LIMIT = 10
#: The highest `limits.global_recovery` a project may set (a guardrail with no ceiling is off).
MAX_GLOBAL_LIMIT = 1000
#: Longest failure feedback kept for the next prompt.
FEEDBACK_LIMIT = 2000
_TAIL_BYTES = 64 * 1024


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


@dataclass
class LedgerState:
    """The accounting of one story after the latest operation."""

    seq: int = 0
    total: int = 0
    breakdown: dict[str, int] = field(default_factory=dict)
    #: The attempt in flight: {"kind", "phase", "attempt", "time"}; settled when it ends. One
    #: still open when the next action begins belongs to a process that died: it is a recovery.
    open: dict[str, Any] | None = None
    #: Attempts started per phase (the attempt number shown and passed to the agent).
    attempts: dict[str, int] = field(default_factory=dict)
    #: {"phase", "outcome", "signature", "feedback", "workspace_changed"} of the last attempt
    #: that sent work back, or None once a phase passed.
    last_failure: dict[str, Any] | None = None
    #: The status a story returns to when unblocked (what it was when it was blocked).
    resume_status: str | None = None
    #: {"fingerprint", "passed", "steps", "summary"} of the last verification, or None.
    verified: dict[str, Any] | None = None
    #: The figures before this operation (to tell a crash between ledger and file from tamper).
    prev_total: int = 0
    prev_breakdown: dict[str, int] = field(default_factory=dict)

    @property
    def started(self) -> bool:
        """False until the first entry: the story's own figures are adopted then."""
        return self.seq > 0

    def copy(self) -> LedgerState:
        return LedgerState.from_json(json.loads(json.dumps(self.to_json())))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LedgerState:
        state = cls()
        state.seq = _count(data.get("seq"))
        state.total = _count(data.get("total"))
        state.breakdown = _counts(data.get("breakdown"))
        state.open = data.get("open") if isinstance(data.get("open"), dict) else None
        state.attempts = _counts(data.get("attempts"))
        failure = data.get("last_failure")
        state.last_failure = failure if isinstance(failure, dict) else None
        resume = data.get("resume_status")
        state.resume_status = resume if isinstance(resume, str) else None
        verified = data.get("verified")
        state.verified = verified if isinstance(verified, dict) else None
        state.prev_total = _count(data.get("prev_total"))
        state.prev_breakdown = _counts(data.get("prev_breakdown"))
        return state


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): _count(v) for k, v in value.items()}


class Journal:
    """The append-only ledger files of one project (`.ai-sdlc/state/ledger/`)."""

    def __init__(self, ai_dir: Path) -> None:
        self.folder = ai_dir / "state" / "ledger"

    def path(self, story_id: str) -> Path:
        return self.folder / f"{story_id}.jsonl"

    def read(self, story_id: str) -> LedgerState:
        """The newest complete entry (an empty state when the story has none yet)."""
        try:
            fd = os.open(self.path(story_id), os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            return LedgerState()
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read()
        for raw in reversed(tail.splitlines()):
            try:
                data = json.loads(raw)
            except ValueError:
                continue  # a torn last line, or a partial first line of the tail
            if isinstance(data, dict) and "seq" in data:
                return LedgerState.from_json(data)
        return LedgerState()

    def append(self, story_id: str, op: str, time: str, state: LedgerState) -> None:
        """One complete line, one `write` on an O_APPEND descriptor, then fsync."""
        self.folder.mkdir(parents=True, exist_ok=True)
        # vars, not asdict: the same JSON (every field is plain data), without the deep copy
        line = json.dumps({"op": op, "time": time, **vars(state)}, ensure_ascii=False)
        fd = os.open(
            self.path(story_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644
        )
        try:
            os.write(fd, (line + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
