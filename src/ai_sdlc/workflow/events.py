"""The per-story event log `.ai-sdlc/stories/<id>/events.jsonl`: one JSON object per line.

Appends are single `write` calls on an O_APPEND descriptor, so concurrent writers never
interleave inside a line. Readers skip a torn last line (a crash mid-append).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ai_sdlc.secrets import redact, secret_values

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
        redact(json.dumps(event, ensure_ascii=False, default=str), secrets, environ={}) + "\n"
        for event in events
    )
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(folder / EVENTS_FILE, flags, 0o644)
    try:
        data = text.encode("utf-8")
        while data:  # a regular file takes it in one write; a short write goes on from there
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


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
                continue
            if isinstance(value, dict):
                yield value
