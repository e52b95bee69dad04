"""What `status` and `list` show of a story, and text fitted to a width.

One row per story (id, status, priority, type, epic, dependencies, the recovery counter against
`limits.global_recovery`), so the board and the list agree; `clip` wraps text on spaces only and
ends what does not fit with `…`, so a long blocked reason takes one or two lines, never a
column's worth, and a word is never split across lines.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.siblings import Collision, story_collisions
from ai_sdlc.workflow.runs.graph import epic_of
from ai_sdlc.workflow.state.ledger import Counted, Journal, counted
from ai_sdlc.workflow.state.readiness import pending_gate

if TYPE_CHECKING:
    from pathlib import Path

    from ai_sdlc.cli.terminal import Terminal
    from ai_sdlc.config import Config

ELLIPSIS = "…"
#: The type most stories have: the board names only the others.
DEFAULT_TYPE = "feature"


def cell_len(text: str) -> int:
    """Columns `text` takes on a terminal (wide East Asian characters take two)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _cut(word: str, width: int) -> str:
    """`word` cut to fit `width` columns with `…` (a single word longer than the width)."""
    out = ""
    for c in word:
        if cell_len(out + c) + 1 > width:
            break
        out += c
    return out + ELLIPSIS


def clip(text: str, width: int, lines: int = 1) -> list[str]:
    """`text` (whitespace collapsed) wrapped on spaces into at most `lines` lines of at most
    `width` columns; when it does not fit, the last line ends with `…` (a word is cut only when
    it alone is wider than a line, and then nothing follows it)."""
    width, lines = max(width, 2), max(lines, 1)
    out: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if cell_len(candidate) <= width:
            current = candidate
            continue
        if current:
            out.append(current)
            current = ""
            if len(out) == lines:
                return _ellipsize(out, width)
        if cell_len(word) > width:
            return [*out, _cut(word, width)]
        current = word
    return [*out, current] if current else out


def _ellipsize(out: list[str], width: int) -> list[str]:
    """`out` with `…` at the end of its last line (words dropped from that line to make room)."""
    words = out[-1].split(" ")
    while len(words) > 1 and cell_len(" ".join(words)) + 1 > width:
        words.pop()
    last = " ".join(words)
    return [*out[:-1], last + ELLIPSIS if cell_len(last) + 1 <= width else _cut(last, width)]


def one_line(text: str, width: int | None) -> str:
    """`text` on one line, cut with `…` to `width` columns (None: the whole text)."""
    flat = " ".join(str(text).split())
    if width is None or cell_len(flat) <= width:
        return flat
    return clip(flat, width, 1)[0]


def data_width(out: Terminal) -> int | None:
    """The width data is fitted to: the terminal's, or `COLUMNS` when piped (None: the whole
    text, the way a pipe to a script wants it)."""
    if out.data_is_tty:
        return int(out.data_console.width)
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def collisions(config: Config, root: Path, stories: Iterable[Any]) -> dict[str, Collision]:
    """The stories whose branch no longer merges cleanly into what it builds on (a sibling
    merged first): `git.siblings.story_collisions` with the project's git settings."""
    return story_collisions(root, GitSettings.from_config(config), stories)


def counters_of(journal: Journal, story: Any) -> Counted:
    """The story's effective recovery counters: the ledger's where `story.md` says less."""
    return counted(
        journal, story.id, story.counter("total_recovery_attempts"), story.recovery_breakdown
    )


def say_disagreements(out: Any, rows: Iterable[Mapping[str, Any]]) -> None:
    """One warning (stderr) per story whose file says fewer recoveries than the ledger."""
    for row in rows:
        if row.get("counter_note"):
            out.warn(row["counter_note"])


def row_of(
    story: Any,
    limit: int,
    gates: Mapping[str, Any],
    clash: Collision | None = None,
    journal: Journal | None = None,
) -> dict[str, Any]:
    """A story's row: what the board and `list` show, and `list --json` gives; `clash`: its
    branch conflicts with what it builds on, or its dependencies' branches with each other
    (`collisions`); `journal`: the project's ledger, whose count stands where the file says
    less."""
    fm = story.to_json()
    deps = fm.get("dependencies")
    labels = fm.get("labels")
    priority = fm.get("priority")
    total = story.counter("total_recovery_attempts")
    view = counters_of(journal, story) if journal is not None else None
    if view is not None:
        total = view.total
    return {
        "id": story.id,
        "title": story.title,
        "status": story.status,
        "waiting_for": pending_gate(story.frontmatter, gates),
        "priority": priority if isinstance(priority, int) else None,
        "type": fm.get("type") if isinstance(fm.get("type"), str) else None,
        "epic": epic_of(fm),
        "dependencies": [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else [],
        "labels": [str(x) for x in labels] if isinstance(labels, list) else [],
        "total_recovery_attempts": total,
        "global_recovery_limit": limit,
        "counter": f"{total}/{limit}",
        "unverified": fm.get("unverified") is True,
        "counter_in_file": view.file_total if view is not None else None,
        "counter_note": view.note(limit) if view is not None else None,
        "blocked_reason": fm.get("blocked_reason") if story.status == "blocked" else None,
        "conflicts": list(clash.files) if clash else [],
        "conflicts_between": list(clash.between) if clash else [],
        "conflicts_note": clash.text(story.id) if clash else None,
        "created": fm.get("created"),
        "updated": fm.get("updated"),
    }


def hint_of(row: Mapping[str, Any]) -> str:
    """`p2 [bug] ◆E-01 ⇠S-0001,S-0002 ↻3/10`: priority, type (unless the default `feature`),
    epic, dependencies, and the recovery counter once it is not zero; the compact line under a
    board card."""
    parts = []
    if row.get("priority") is not None:
        parts.append(f"p{row['priority']}")
    if row.get("type") and row["type"] != DEFAULT_TYPE:
        parts.append(f"[{row['type']}]")
    if row.get("epic"):
        parts.append(f"◆{row['epic']}")
    if row.get("dependencies"):
        parts.append("⇠" + ",".join(row["dependencies"]))
    if row.get("total_recovery_attempts"):
        parts.append(f"↻{row['counter']}")
    if row.get("unverified"):
        parts.append("unverified")
    return " ".join(parts)
