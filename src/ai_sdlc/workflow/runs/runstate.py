"""The state of one multi-story run: `.ai-sdlc/runs/<run_id>/state.json`.

Written atomically after every action, so a crash (even SIGKILL) leaves the last complete state,
from which `ai-sdlc run --resume <run_id>` continues. The run folder also holds the run's own
event log (`events.jsonl`) and, after a halt, `diagnostic.json`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError, InvalidInputError, UsageError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.secrets import redact
from ai_sdlc.untrusted import read_regular
from ai_sdlc.workflow.state.events import iso

RUNS_DIR = "runs"
#: Single-story runs (`ai-sdlc run S-0001`) are kept apart from multi-story runs (under
#: `runs/single/`): `runs` and `run --resume` never see them, `report` does.
SINGLE_DIR = "single"
SINGLE = "single"
STATE_FILE = "state.json"
DIAGNOSTIC_FILE = "diagnostic.json"
FORMAT = "ai-sdlc/run-state"

RUNNING, COMPLETED, STOPPED, FAILED = "running", "completed", "stopped", "failed"
RUN_STATUSES = (RUNNING, COMPLETED, STOPPED, FAILED)

#: A story's state within a run. `in-progress` is the story being worked on (after a crash it
#: is picked up again); `failed` means its last try crashed (retried after a cooldown).
PENDING, IN_PROGRESS, DONE, WAITING, BLOCKED, STORY_FAILED, SKIPPED = (
    "pending",
    "in-progress",
    "done",
    "waiting",
    "blocked",
    "failed",
    "skipped",
)
FINISHED_STORY_STATES = (DONE, WAITING, BLOCKED, SKIPPED)

_RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")


class RunNotFoundError(AiSdlcError):
    """No run with that id in this project."""


@dataclass
class StoryRunState:
    story_id: str
    status: str = PENDING
    #: Times the run finished working on the story (an outcome: done, blocked, crashed...).
    outcomes: int = 0
    #: Agent attempts (phases started) for this story in this run.
    attempts: int = 0
    #: Recoveries (retries of any kind) recorded for this story in this run.
    retries: int = 0
    #: REJECTED decisions (review or refinement) in this run.
    rejections: int = 0
    #: Step-back transitions (e.g. review → implement) in this run.
    bounces: int = 0
    #: Crashes of this story's phases in this run, the last one, and when it may run again.
    errors: int = 0
    last_error: str | None = None
    cooldown_until: str | None = None
    #: The last phase started (what a bounce is measured from).
    last_phase: str | None = None
    escalated: bool = False
    escalation_reason: str | None = None
    #: Why the story is where it is (the last outcome's reason).
    reason: str | None = None
    #: Each phase run in this run: phase, attempt, started_at, ended_at, result, worker (the
    #: executor's worker that ran it) and recoveries by kind (what a run report draws).
    phases: list[dict[str, Any]] = field(default_factory=list)
    #: Running stories whose changed files overlap the files this story's plan names (it
    #: starts once they finish), and the shared paths.
    deferred_by: list[str] = field(default_factory=list)
    deferred_paths: list[str] = field(default_factory=list)
    #: The run segment (start = 1, each resume + 1) of the story's last outcome: the rate stop
    #: conditions judge only the stories attempted in the current segment.
    segment: int = 0


@dataclass
class StopReason:
    condition: str
    value: float | int | None
    threshold: float | int | None
    message: str


@dataclass
class RunCounters:
    #: Every agent attempt (phase call) of the run.
    total_attempts: int = 0
    #: Attempts at the work itself (implement and rework, first ones included), over the whole
    #: run and in the current segment: the run-wide cap (`max_total_attempts`) counts the
    #: segment's, so a resume (an operator's decision) gets the cap afresh.
    implementation_attempts: int = 0
    segment_implementation_attempts: int = 0
    #: Story outcomes in a row that failed (blocked or crashed); an approval resets it.
    consecutive_fails: int = 0
    #: Escalations in a row, and the stories escalated in that streak; a story completing
    #: resets both.
    consecutive_escalations: int = 0
    streak: list[str] = field(default_factory=list)
    #: Provider usage of the whole run, so budgets carry over a resume.
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class RunState:
    run_id: str
    #: "auto" (every actionable story by priority) or "batch" (the stories named).
    mode: str
    started_at: str
    run_status: str = RUNNING
    updated_at: str | None = None
    finished_at: str | None = None
    stories: list[StoryRunState] = field(default_factory=list)
    counters: RunCounters = field(default_factory=RunCounters)
    stop_reason: StopReason | None = None
    statistics: dict[str, Any] = field(default_factory=dict)
    resumable: bool = False
    #: The story the run continues with when resumed.
    resume_from: str | None = None
    #: How many times the run was started or resumed.
    segments: int = 0
    #: Stories run at once (`--jobs`), the executor that ran them, the epic it was limited to.
    jobs: int = 1
    executor: str = "inline"
    epic: str | None = None

    def story(self, story_id: str) -> StoryRunState | None:
        return next((s for s in self.stories if s.story_id == story_id), None)

    def to_json(self) -> dict[str, Any]:
        """The state as JSON-ready data. Saved after every event of a run, so it is built
        without `asdict`'s deep copies (the phase records are plain data already)."""
        data = _shallow(self)
        data["stories"] = [_shallow(s) for s in self.stories]
        data["counters"] = _shallow(self.counters)
        data["stop_reason"] = _shallow(self.stop_reason) if self.stop_reason else None
        return {"format": FORMAT, **data}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        stories = [StoryRunState(**_known(StoryRunState, s)) for s in data.get("stories") or []]
        counters = RunCounters(**_known(RunCounters, data.get("counters") or {}))
        raw_stop = data.get("stop_reason")
        stop = StopReason(**_known(StopReason, raw_stop)) if isinstance(raw_stop, dict) else None
        plain = _known(cls, data)
        for key in ("stories", "counters", "stop_reason"):
            plain.pop(key, None)
        return cls(**plain, stories=stories, counters=counters, stop_reason=stop)


def _shallow(obj: Any) -> dict[str, Any]:
    return {f.name: _copied(getattr(obj, f.name)) for f in fields(obj)}


def _copied(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def _known(kind: Any, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}


def new_run_id(moment: dt.datetime) -> str:
    """Sortable by start time, unique enough for one project: `20250131T221500Z-3fa2c1`."""
    stamp = moment.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def is_run_id(text: str) -> bool:
    return bool(_RUN_ID.match(text))


def check_run_id(run_id: str) -> str:
    """A run id from the command line (never a path)."""
    if not _RUN_ID.match(run_id):
        raise UsageError(
            f"{run_id!r} is not a run id (e.g. 20250131T221500Z-3fa2c1)",
            hint="'ai-sdlc runs' lists the runs of this project",
        )
    return run_id


class RunRepository:
    """Run folders under `.ai-sdlc/runs/` (`single`: the single-story runs' folder)."""

    def __init__(self, ai_dir: Path, *, single: bool = False, durable: bool = True) -> None:
        self.root = ai_dir / RUNS_DIR / SINGLE_DIR if single else ai_dir / RUNS_DIR
        #: False: each save is atomic but not waited onto the disk (a record only a report
        #: reads: a power loss may cost its last saves, never a whole file).
        self.durable = durable

    def folder(self, run_id: str) -> Path:
        return self.root / check_run_id(run_id)

    def create(self, state: RunState) -> Path:
        folder = self.folder(state.run_id)
        folder.mkdir(parents=True, exist_ok=False)
        self.save(state)
        return folder

    def save(self, state: RunState, *, now: dt.datetime | None = None) -> None:
        if now is not None:
            state.updated_at = iso(now)
        # No indent: json's C encoder (the indented one is pure Python, and a long run's state
        # is saved after every event); `runs show` is the way to read it.
        text = json.dumps(state.to_json(), ensure_ascii=False, default=str) + "\n"
        atomic_write_text(
            self.folder(state.run_id) / STATE_FILE, redact(text), durable=self.durable
        )

    def load(self, run_id: str) -> RunState:
        path = self.folder(run_id) / STATE_FILE
        try:
            data = json.loads(read_regular(path).decode("utf-8"))
        except FileNotFoundError:
            raise RunNotFoundError(
                f"no run {run_id} in {self.root}", hint="'ai-sdlc runs' lists the runs"
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise InvalidInputError(f"cannot read the run state: {exc}", path=str(path)) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InvalidInputError(
                "not an ai-sdlc run state file", path=str(path), hint="do not edit state.json"
            )
        try:
            return RunState.from_json(data)
        except TypeError as exc:
            raise InvalidInputError(f"malformed run state: {exc}", path=str(path)) from None

    def list(self) -> list[RunState]:
        """Every readable run, oldest first."""
        if not self.root.is_dir():
            return []
        states = []
        for entry in sorted(self.root.iterdir()):
            if entry.is_dir() and _RUN_ID.match(entry.name) and (entry / STATE_FILE).is_file():
                states.append(self.load(entry.name))
        states.sort(key=lambda s: (s.started_at, s.run_id))
        return states

    def latest(self) -> RunState | None:
        runs = self.list()
        return runs[-1] if runs else None

    def write_diagnostic(self, run_id: str, diagnostic: dict[str, Any]) -> Path:
        path = self.folder(run_id) / DIAGNOSTIC_FILE
        atomic_write_text(path, redact(json.dumps(diagnostic, indent=2, ensure_ascii=False)) + "\n")
        return path
