"""`ai-sdlc log <id>`: a story's `events.jsonl` as a readable timeline, NDJSON, or followed live.

Each event fits the terminal's width (80 columns when piped): a first line of fixed columns (time,
mark, action, phase, outcome), then the recovery counters after it and the reason wrapped under it,
indented; `edited` changes read `priority 3 → 1`. Recoveries and blocks are marked (`↻`, `■`) so
they stand out without colour too. A reason is cut to a few lines; `--full` prints the whole texts
under their event (a failed verification's output, as kept in the event), and without it the end
says how many were shortened. `--follow` keeps reading the file as a run appends to it, until
Ctrl-C. A line still being written (no newline yet) waits for its end; a line that never parses (a
crash mid-append) is skipped, the way the workflow's own reader skips it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.completion import story_ids
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import UsageError
from ai_sdlc.wording import count
from ai_sdlc.workflow.state.events import EVENTS_FILE

#: `--kind` groups (any single action name is accepted too, see ACTIONS).
KINDS: dict[str, frozenset[str]] = {
    "recovery": frozenset({"recovery"}),
    "phase": frozenset({"phase_started", "phase"}),
    "blocked": frozenset({"blocked"}),
    "gate": frozenset({"approve"}),
    "unblock": frozenset({"unblock"}),
    "rollback": frozenset({"rollback_initiated", "attempt_released"}),
    "integrity": frozenset(
        {
            "counters_reconciled",
            "counters_hand_edited",
            "ledger_resynced",
            "tamper_detected",
            "story_file_restored",
        }
    ),
    "git": frozenset({"workspace", "publish"}),
    # the pull-request loop (docs/repository.md)
    "pr": frozenset({"pr_round", "pr_answered", "pr_ignored", "merge_refused"}),
    "done": frozenset({"done"}),
}
#: Every action the workflow writes to a story's event log.
ACTIONS = frozenset().union(*KINDS.values()) | {"fields"}


def log_kinds(incomplete: str) -> list[str]:
    """`--kind` values for shell completion: the groups, then the single action names."""
    names = [*KINDS, *sorted(ACTIONS - set(KINDS))]
    return [name for name in names if name.startswith(incomplete.lower())]


#: Fields that explain an event, in the order the first present one is shown.
_REASON_FIELDS = ("reason", "message", "feedback", "notice", "changed")
_MARKS = {"recovery": "↻", "blocked": "■"}
_STYLES = {"recovery": "yellow", "blocked": "red"}
#: Events whose recovery counters are shown (the events that change them).
_COUNTED = frozenset({"recovery", "blocked", "unblock"})
_REASON_WIDTH = 160
#: The fixed columns of an event's first line (seconds are enough to read a timeline by).
_TIME_WIDTH = 19
_ACTION_WIDTH = 20
_PHASE_WIDTH = 9
#: Where an event's explanation wraps, and the narrowest it is wrapped to.
_INDENT = " " * 4
_MIN_WIDTH = 40
#: The only file an event may point to (`output_file`): a failed attempt's whole output.
_OUTPUT_NAME = re.compile(r"attempts/[0-9]{1,9}\.output\.txt")

#: Waits between two looks at the file (injected, so tests need not wait).
Wait = Callable[[], None]


def log(
    ctx: typer.Context,
    story: Annotated[
        str, typer.Argument(help="Story id (S-0001) or slug.", autocompletion=story_ids)
    ],
    json: JsonOption = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing events as they are appended (Ctrl-C)."),
    ] = False,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            "-k",
            help="Only these events (repeatable): " + ", ".join(KINDS) + ", or an action name.",
            autocompletion=log_kinds,
        ),
    ] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Print each event's whole text (e.g. a failed verification's output)."
        ),
    ] = False,
    max_events: Annotated[
        int | None, typer.Option("--max-events", hidden=True, min=1)
    ] = None,  # testing: stop --follow after this many printed events
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", hidden=True, min=0.0)
    ] = 0.25,  # how often --follow looks for new lines
) -> None:
    """Show a story's event log as a timeline (recoveries highlighted), or follow it."""
    app = Application.of(ctx)
    out = app.terminal(json)
    wanted = actions_for(kind or [])
    store = app.store(read_only=True)
    story_id = store.resolve(story)
    path = store.artifact_path(story_id, EVENTS_FILE)
    reader = EventReader(path)
    folder = path.parent
    width = shutil.get_terminal_size().columns  # COLUMNS, the terminal, else 80
    events: Iterable[dict[str, Any]]
    if follow:
        events = reader.follow(wait=lambda: time.sleep(poll_interval))
    else:
        events = reader.read_available(final=True)
    shown = shortened = 0
    try:
        for event in events:
            if wanted is not None and event.get("action") not in wanted:
                continue
            show_event(out, event, full=full, folder=folder, width=width)
            shown += 1
            shortened += bool(hidden_texts(event, folder))
            if max_events is not None and shown >= max_events:
                break
    except KeyboardInterrupt:
        pass  # the way to stop --follow: not an error
    if not follow and not json and shown == 0:
        what = "no events" if wanted is None else "no matching events"
        out.info(f"{story_id}: {what} yet ({path})")
    if shortened and not full and not json:
        whole = "it whole" if shortened == 1 else "them whole"
        out.info(
            f"{count(shortened, 'event')} shortened; `ai-sdlc log {story_id} --full` shows {whole}"
        )
    if reader.skipped and not json:
        out.warn(f"{count(reader.skipped, 'unreadable line')} in {path} skipped")


def actions_for(kinds: list[str]) -> frozenset[str] | None:
    """The actions `--kind` selects (None: all); an unknown kind is a usage error."""
    if not kinds:
        return None
    selected: set[str] = set()
    for name in kinds:
        key = name.strip().lower()
        if key in KINDS:
            selected |= KINDS[key]
        elif key in ACTIONS:
            selected.add(key)
        else:
            raise UsageError(
                f"unknown event kind {name!r}",
                hint="use one of "
                + ", ".join(KINDS)
                + " or an action name: "
                + ", ".join(sorted(ACTIONS)),
            )
    return frozenset(selected)


class EventReader:
    """Reads `events.jsonl` incrementally: complete lines only, from where it stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.skipped = 0
        self._partial = b""

    def read_available(self, *, final: bool = False) -> Iterator[dict[str, Any]]:
        """The events completed since the last call. `final`: also try a last line that has no
        newline (the file is not being written any more), skipping it if it is torn."""
        data = self._read_new()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        for raw in lines:
            event = self._parse(raw)
            if event is not None:
                yield event

    def follow(self, *, wait: Wait) -> Iterator[dict[str, Any]]:
        """Every event, then each new one as it is appended; `wait` between looks."""
        while True:
            yield from self.read_available()
            wait()

    def _read_new(self) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return b""  # no event yet (a story that never ran)
        try:
            size = os.fstat(fd).st_size
            if size < self.offset:  # replaced by a shorter file: start again
                self.offset, self._partial = 0, b""
            os.lseek(fd, self.offset, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        self.offset += len(data)
        return data

    def _parse(self, raw: bytes) -> dict[str, Any] | None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            self.skipped += 1
            return None
        if not isinstance(value, dict):
            self.skipped += 1
            return None
        return value


def show_event(
    out: Terminal,
    event: dict[str, Any],
    *,
    full: bool = False,
    folder: Path | None = None,
    width: int = 80,
) -> None:
    if out.json_mode:
        out.ndjson(event)
        return
    action = str(event.get("action", "?"))
    for line in timeline_lines(event, width):
        out.data(line, style=_STYLES.get(action))
    if full:
        for label, text in hidden_texts(event, folder):
            out.data(f"{'':4}{label}:")
            for line in text.splitlines():
                out.data(f"{'':6}{line}".rstrip())


def hidden_texts(event: dict[str, Any], folder: Path | None = None) -> list[tuple[str, str]]:
    """The event's texts its timeline line does not show whole, as (label, text): a failed
    verification's whole output (kept beside the event, `output_file`; in its place the
    event's shortened `feedback` when the file is gone), a reason longer than the line."""
    shown = reason_text(event)
    output = _output_file(event, folder)
    hidden = []
    first = True
    for field in _REASON_FIELDS:
        value = event.get(field)
        if not value:
            continue
        if field == "feedback" and output is not None:
            hidden.append((f"output ({event['output_file']})", output))
        elif isinstance(value, str):
            whole = first and " ".join(value.split()) == shown and "\n" not in value.strip()
            if not whole:
                hidden.append((field, value.strip("\n")))
        first = False
    return hidden


def _output_file(event: dict[str, Any], folder: Path | None) -> str | None:
    """The text of the event's `output_file` (only `attempts/<n>.output.txt` in the story's
    folder: an event log is not trusted to name any other file), None when there is none."""
    name = event.get("output_file")
    if folder is None or not isinstance(name, str) or not _OUTPUT_NAME.fullmatch(name):
        return None
    try:
        return (folder / name).read_text(encoding="utf-8", errors="replace").strip("\n")
    except OSError:
        return None


def timeline_lines(event: dict[str, Any], width: int = 80) -> list[str]:
    """One event in `width` columns: `time  mark action  phase  outcome` (the columns before
    the outcome are fixed, so they never drift), then what explains it — the outcome when it
    does not fit, the recovery counters, the reason — wrapped under it, indented."""
    action = str(event.get("action", "?"))
    when = str(event.get("time", "")).replace("T", " ").removesuffix("Z")[:_TIME_WIDTH]
    outcome = event.get("outcome")
    if action == "recovery" and event.get("recovery_kind"):
        kind = event["recovery_kind"]  # `recorded` is what a recovery is: its kind says more
        outcome = f"{outcome} ({kind})" if outcome not in (None, "recorded") else kind
    elif action == "phase_started" and event.get("attempt") is not None:
        outcome = f"attempt {event['attempt']}"
    head = (
        f"{when:{_TIME_WIDTH}} {_MARKS.get(action, ' ')} {action:{_ACTION_WIDTH}} "
        f"{event.get('phase') or '':{_PHASE_WIDTH}}"
    )
    details = []
    if outcome is not None:
        if len(head) + 1 + len(str(outcome)) <= width:
            head = f"{head} {outcome}"
        else:
            details.append(str(outcome))
    counters = event.get("counters")
    if isinstance(counters, dict) and action in _COUNTED:
        details.append(counters_text(counters))
    details += [text for text in (reason_text(event),) if text]
    lines = [head.rstrip()]
    if details:
        lines += textwrap.wrap(
            " · ".join(details),
            width=max(width, _MIN_WIDTH),
            initial_indent=_INDENT,
            subsequent_indent=_INDENT,
            break_on_hyphens=False,
        )
    return lines


def counters_text(counters: Any) -> str:
    """`recoveries 3 (implementation_retry 2, review_rework 1)` after the event."""
    if not isinstance(counters, dict):
        return ""
    total = counters.get("total_recovery_attempts", 0)
    breakdown = counters.get("recovery_breakdown")
    text = f"recoveries {total}"
    if isinstance(breakdown, dict) and breakdown:
        text += " (" + ", ".join(f"{k} {v}" for k, v in breakdown.items()) + ")"
    return text


def reason_text(event: dict[str, Any]) -> str:
    """The one line that explains the event. A failed verification's `feedback` is the test
    runner's output (`F [100%] ===== FAILURES ====…` once flattened): it is kept beside the
    event (`output_file`, shown by `--full`) and its cause is said by the recovery that
    follows, so it is not cut into the timeline."""
    for field in _REASON_FIELDS:
        value = event.get(field)
        if field == "feedback" and event.get("output_file"):
            continue
        if value:
            text = " ".join(plain_text(value).split())
            if len(text) > _REASON_WIDTH:
                text = text[: _REASON_WIDTH - 1] + "…"
            return text
    return ""


def plain_text(value: Any) -> str:
    """A field's value as a person reads it: `edited`'s `{"priority": {"from": 3, "to": 1}}` is
    `priority 3 → 1`, a list is comma-separated, nothing is a Python dict or list."""
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if isinstance(item, dict) and set(item) == {"from", "to"}:
                items.append(f"{key} {_scalar(item['from'])} → {_scalar(item['to'])}")
            else:
                items.append(f"{key} {plain_text(item)}")
        return ", ".join(items)
    if isinstance(value, list | tuple):
        return ", ".join(plain_text(item) for item in value) or "none"
    return _scalar(value)


def _scalar(value: Any) -> str:
    if value is None or value == []:
        return "none"
    if isinstance(value, list | tuple | dict):
        return plain_text(value)
    return str(value)


def register(app: typer.Typer) -> None:
    app.command("log")(log)
