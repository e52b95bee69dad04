"""The per-story event log `.ai-sdlc/stories/<id>/events.jsonl`: one JSON object per line.

Appends are single `write` calls on an O_APPEND descriptor, made by the story's lock holder (or
a run's coordinator), whole or not at all (`fsutil.append_whole`: a torn tail is cut before the
next append, a failed one cut back). Readers skip a torn line, and recover an event glued after
one. Every line is redacted here, whoever the caller, and its text stripped of terminal
control sequences.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ai_sdlc.fsutil import append_whole
from ai_sdlc.secrets import redact, secret_values
from ai_sdlc.untrusted import strip_controls

EVENTS_FILE = "events.jsonl"

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def append_event(folder: Path, event: dict[str, Any]) -> None:
    append_events(folder, [event])


def append_events(folder: Path, events: list[dict[str, Any]]) -> None:
    """The events of one transaction: each line redacted on its own (the environment's secrets
    looked up once), all of them in one `write` (a crash tears at most the last line)."""
    if not events:
        return
    secrets = secret_values()
    text = "".join(
        redact(json.dumps(_plain_text(event), ensure_ascii=False, default=str), secrets, environ={})
        + "\n"
        for event in events
    )
    append_whole(folder / EVENTS_FILE, text.encode("utf-8"))


def _plain_text(value: Any) -> Any:
    """`value` with every string stripped of terminal control sequences: `log` shows them, and
    `ensure_ascii=False` would write C1 controls raw."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, dict):
        return {k: _plain_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_text(v) for v in value]
    return value


def read_events(folder: Path) -> Iterator[dict[str, Any]]:
    path = folder / EVENTS_FILE
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError:
        return
    with fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = _glued(raw)
            if isinstance(value, dict):
                yield value


def _glued(raw: str) -> Any:
    """The event at the end of a line that holds a torn one before it (written by an older
    version, which did not cut a torn tail before appending), or None."""
    decoder = json.JSONDecoder()
    start = raw.find("{", 1)
    while start > 0:
        try:
            value, end = decoder.raw_decode(raw, start)
        except json.JSONDecodeError:
            pass
        else:
            if end == len(raw):
                return value
        start = raw.find("{", start + 1)
    return None
