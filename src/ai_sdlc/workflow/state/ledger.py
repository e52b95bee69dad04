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

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.fsutil import append_whole
from ai_sdlc.store.schema import RECOVERY_KIND_LABELS, breakdown_text
from ai_sdlc.wording import count

IMPLEMENTATION_RETRY = "implementation_retry"
REWORK = "rework"
REFINEMENT = "refinement"
API_RETRY = "api_retry"
PR_REWORK = "pr_rework"

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
    #: Which chain this is: 0 at first, +1 at every `unblock --reset-retries` (the only
    #: operation that lowers the counters).
    chain: int = 0

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
        state.chain = _count(data.get("chain"))
        return state


@dataclass(frozen=True)
class Counted:
    """The recovery counters a reader (`show`, `status`, `list`) shows: the ledger's where
    `story.md` says less (the next transaction restores the file from it: `txn._reconcile`), a
    higher hand-edit of the file as it is (honoured the same way)."""

    story_id: str
    total: int
    breakdown: dict[str, int]
    #: What `story.md` says, when it says less than the ledger (None: they agree).
    file_total: int | None = None

    def note(self, limit: int) -> str | None:
        """The line that says the file disagreed, or None."""
        if self.file_total is None:
            return None
        return (
            f"{self.story_id}: story.md says {self.file_total}/{limit} recoveries, the ledger "
            f"{self.total}/{limit}: the file was lowered outside ai-sdlc, so the ledger's count "
            f"stands (the next run restores it; only 'ai-sdlc unblock {self.story_id} "
            "--reset-retries' lowers it; 'ai-sdlc log "
            f"{self.story_id}' shows the history)"
        )


def counted(journal: Journal, story_id: str, total: int, breakdown: dict[str, int]) -> Counted:
    """The effective counters of a story whose file says `total` and `breakdown`: read-only,
    no lock, no write (a reader's view of what the state owner's next transaction makes of
    them)."""
    state = journal.read(story_id)
    if not state.started:
        return Counted(story_id, total, dict(breakdown))
    kinds = set(state.breakdown) | set(breakdown)
    merged = {k: max(state.breakdown.get(k, 0), breakdown.get(k, 0)) for k in sorted(kinds)}
    merged = {k: n for k, n in merged.items() if n}
    effective = max(total, state.total, sum(merged.values()))
    lowered = total < state.total or any(
        breakdown.get(k, 0) < n for k, n in state.breakdown.items()
    )
    return Counted(story_id, effective, merged, total if lowered else None)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): _count(v) for k, v in value.items()}


@dataclass
class Tail:
    """What the end of one ledger file says: its newest entry and anything wrong with it."""

    #: The newest complete entry (an empty state when there is none).
    state: LedgerState
    #: That entry's line as written (no newline); b"" when none.
    line: bytes = b""
    #: sha256 of the file's last complete line, readable or not ("" for an empty file): the
    #: next entry chains onto it.
    last_hash: str = ""
    #: What is wrong with the file (replaced, unreadable, chain broken); empty when nothing.
    problems: list[str] = field(default_factory=list)
    #: The file (or a folder above it) is not a regular file/folder: it must be moved aside.
    replaced: bool = False


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


class Journal:
    """The append-only ledger files of one project (`.ai-sdlc/state/ledger/`).

    Each entry carries `prev`, the sha256 of the line before it ("" for the first line of a
    file): a line added, removed or rewritten by hand breaks the chain at the file's end, where
    every transaction looks (`workflow.anchor` compares that end with the copies kept outside
    `.ai-sdlc/state`)."""

    def __init__(self, ai_dir: Path) -> None:
        self.ai_dir = ai_dir
        self.folder = ai_dir / "state" / "ledger"

    def path(self, story_id: str) -> Path:
        return self.folder / f"{story_id}.jsonl"

    def read(self, story_id: str) -> LedgerState:
        """The newest complete entry (an empty state when the story has none, or its ledger
        cannot be read: the state owner's transaction tells tamper from a new story)."""
        return self.tail(story_id).state

    def tail(self, story_id: str) -> Tail:
        path = self.path(story_id)
        odd = self._odd_folder()
        if odd is not None:
            return Tail(LedgerState(), problems=[odd], replaced=True)
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return Tail(LedgerState())
        if not stat.S_ISREG(info.st_mode):
            return Tail(
                LedgerState(),
                problems=[f"{path} is {_kind(info.st_mode)}, not the ledger file"],
                replaced=True,
            )
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return Tail(LedgerState())
        except OSError as exc:
            return Tail(LedgerState(), problems=[f"{path} cannot be read: {exc}"], replaced=True)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return Tail(LedgerState(), problems=[f"{path} was replaced"], replaced=True)
            size = os.fstat(fh.fileno()).st_size
            start = max(0, size - _TAIL_BYTES)
            fh.seek(start)
            data = fh.read()
            if start and data.count(b"\n") < 3:
                fh.seek(0)
                data, start = fh.read(), 0
        return _parse_tail(path, data, whole=start == 0)

    def _odd_folder(self) -> str | None:
        """`.ai-sdlc/state` or its `ledger` folder replaced by a file or a symbolic link."""
        for folder in (self.folder.parent, self.folder):
            try:
                info = os.lstat(folder)
            except (FileNotFoundError, NotADirectoryError):
                return None
            if not stat.S_ISDIR(info.st_mode):
                return f"{folder} is {_kind(info.st_mode)}, not a folder"
        return None

    def set_aside(self, story_id: str, stamp: str) -> list[str]:
        """Move whatever took the place of the ledger file or its folders out of the way (kept
        as evidence, `<name>.replaced-<stamp>`); returns what was moved."""
        moved: list[str] = []
        for path in (self.folder.parent, self.folder, self.path(story_id)):
            try:
                info = os.lstat(path)
            except (FileNotFoundError, NotADirectoryError):
                break
            wanted_dir = path != self.path(story_id)
            if stat.S_ISDIR(info.st_mode) if wanted_dir else stat.S_ISREG(info.st_mode):
                continue
            aside = path.with_name(f"{path.name}.replaced-{stamp}")
            os.replace(path, aside)
            moved.append(str(path))
            break
        return moved

    @staticmethod
    def encode(op: str, time: str, state: LedgerState, prev: str, **extra: Any) -> bytes:
        """One entry's line (no newline), chained onto the line before it."""
        # vars, not asdict: the same JSON (every field is plain data), without the deep copy
        body = {"op": op, "time": time, "prev": prev, **extra, **vars(state)}
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def append_line(self, story_id: str, line: bytes) -> None:
        """Append one entry whole or not at all (`fsutil.append_whole`), then fsync."""
        self.folder.mkdir(parents=True, exist_ok=True)
        append_whole(self.path(story_id), line + b"\n", durable=True)


def _parse_tail(path: Path, data: bytes, *, whole: bool) -> Tail:
    lines = data.split(b"\n")
    lines.pop()  # bytes after the last newline: a torn tail (or b"" after a whole last line)
    if not whole and lines:
        lines.pop(0)  # the first line of the tail may be partial
    tail = Tail(LedgerState())
    if not lines:
        return tail
    tail.last_hash = line_hash(lines[-1])
    unreadable = 0
    for index in range(len(lines) - 1, -1, -1):
        raw = lines[index]
        try:
            data_ = json.loads(raw)
        except ValueError:
            unreadable += 1
            continue
        if not isinstance(data_, dict) or "seq" not in data_:
            unreadable += 1
            continue
        tail.state = LedgerState.from_json(data_)
        tail.line = raw
        if "prev" in data_:  # older ledgers' entries carry no chain
            if unreadable:
                tail.problems.append(
                    f"{path}: {count(unreadable, 'unreadable line')} after the last entry"
                )
            before = line_hash(lines[index - 1]) if index > 0 else ("" if whole else None)
            if before is not None and data_.get("prev") != before:
                tail.problems.append(
                    f"{path}: the entry seq {tail.state.seq} does not chain onto the line "
                    "before it (lines were removed, added or rewritten)"
                )
        return tail
    if unreadable:
        tail.problems.append(f"{path}: no readable entry ({count(unreadable, 'unreadable line')})")
    return tail


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a special file"
