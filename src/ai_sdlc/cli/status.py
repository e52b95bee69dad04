"""`ai-sdlc status`: the Kanban board. Every valid story is shown; bad files are listed on
stderr and the exit code is 3. A story waiting at a stage gate (`gates.*` in config) has its own
column, "Waiting for approval", so work that only needs `ai-sdlc approve` is not lost among the
stories in progress.

The board fits the terminal: its six columns share the width (an empty one takes only its
header's room), each card's title and blocked reason wrapped on
words into two lines at most and cut with `…` (`show` has the whole text), with a compact line
of priority, type, epic, dependencies and the recovery counter. Piped, it is plain lines, cut to
`COLUMNS` when that is set."""

from __future__ import annotations

from typing import Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.storyrows import (
    cell_len,
    clip,
    collisions,
    data_width,
    hint_of,
    one_line,
    row_of,
    say_disagreements,
)
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import ExitCode
from ai_sdlc.store import STATUSES
from ai_sdlc.workflow.state.ledger import Journal
from ai_sdlc.workflow.state.readiness import pending_gate

#: Board columns: the story statuses, plus "waiting" for stories held at a gate.
WAITING = "waiting"
COLUMNS = ("backlog", "ready", "in-progress", WAITING, "in-review", "blocked", "done")
TITLES = {
    "backlog": "Backlog",
    "ready": "Ready",
    "in-progress": "In progress",
    WAITING: "Waiting for approval",
    "in-review": "In review (PR open)",
    "blocked": "Blocked",
    "done": "Done",
}


def _priority_key(row: dict[str, Any]) -> tuple[int, str]:
    p = row.get("priority")
    return (p if isinstance(p, int) and not isinstance(p, bool) else 1_000_000, str(row.get("id")))


def status(ctx: typer.Context, json: JsonOption = False) -> None:
    """Show the board: every story by status, blocked ones with their reason."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    scan = store.scan()
    config = app.config()
    gates = config.section("gates")
    clashes = collisions(config, store.root, scan.stories)
    journal = Journal(store.ai_dir)
    limit = config.typed().limits.global_recovery
    shown = [row_of(s, limit, gates, clashes.get(s.id), journal) for s in scan.stories]
    rows = [
        {
            **s.to_json(),
            "total_recovery_attempts": row["total_recovery_attempts"],
            "counter_in_file": row["counter_in_file"],
            "waiting_for": pending_gate(s.frontmatter, gates),
            "conflicts": clashes[s.id].files if s.id in clashes else [],
            "conflicts_between": clashes[s.id].between if s.id in clashes else [],
            "conflicts_note": clashes[s.id].text(s.id) if s.id in clashes else None,
        }
        for s, row in zip(scan.stories, shown, strict=True)
    ]
    counts = dict.fromkeys(STATUSES, 0)
    for fm in rows:
        counts[str(fm.get("status"))] = counts.get(str(fm.get("status")), 0) + 1
    if json:
        out.json(
            {
                "stories": rows,
                "counts": {**counts, "total": len(rows)},
                "errors": [{"path": e.path, "message": e.message} for e in scan.errors],
            }
        )
    else:
        _render_board(out, shown)
    say_disagreements(out, shown)
    for err in scan.errors:
        out.error(err.message, hint=err.hint)
    if scan.errors:
        raise typer.Exit(int(ExitCode.INVALID_INPUT))


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_status: dict[str, list[dict[str, Any]]] = {c: [] for c in COLUMNS}
    for row in sorted(rows, key=_priority_key):
        column = WAITING if row.get("waiting_for") else str(row.get("status"))
        by_status.setdefault(column, []).append(row)
    return by_status


def _render_board(out: Terminal, rows: list[dict[str, Any]]) -> None:
    if not rows:
        out.info('No stories yet. Add one with: ai-sdlc add "Title"')
        return
    by_status = _columns(rows)
    if out.data_is_tty:
        out.table(_table(by_status, int(out.data_console.width)))
        return
    width = data_width(out)
    inner = None if width is None else max(width - _INDENT, 8)
    for column in COLUMNS:
        items = by_status.get(column, [])
        out.data(f"{TITLES[column]} ({len(items)})")
        for row in items:
            head = f"  {row['id']}  "
            title = one_line(str(row["title"]), None if width is None else width - len(head))
            out.data(head + title)
            details = [hint_of(row)]
            if column == "blocked":
                details.append(f"reason: {row.get('blocked_reason') or 'no reason recorded'}")
            if column == WAITING:
                details.append(f"gate: {row['waiting_for']} (ai-sdlc approve {row['id']})")
            if row.get("conflicts"):
                details.append(_conflicts_text(row))
            for text in filter(None, details):
                out.data(" " * _INDENT + one_line(text, inner))


#: Indent of a story's detail lines in the plain board.
_INDENT = 6
#: Columns a card's text may take at least (narrower terminals cut the cards, not the columns).
_MIN_CARD = 8
#: Lines a card's title and a blocked reason may take.
_TITLE_LINES = 2
_REASON_LINES = 2


def _table(by_status: dict[str, list[dict[str, Any]]], width: int) -> Any:
    """The board as a rich table at most `width` columns wide, each card wrapped on words and
    cut with `…` (the whole text is in `ai-sdlc show`)."""
    from rich import box
    from rich.table import Table

    widths = _widths(by_status, width)
    table = Table(box=box.SQUARE, show_edge=False, pad_edge=False, expand=False, padding=(0, 1))
    for column, card in zip(COLUMNS, widths, strict=True):
        table.add_column(_header(column, len(by_status[column]), card), width=card, no_wrap=True)
    depth = max(len(v) for v in by_status.values())
    for i in range(depth):
        cells = [
            _card(by_status[c][i], c, card, last=i == depth - 1) if i < len(by_status[c]) else ""
            for c, card in zip(COLUMNS, widths, strict=True)
        ]
        table.add_row(*cells)
    return table


def _widths(by_status: dict[str, list[dict[str, Any]]], width: int) -> list[int]:
    """Each column's text width for a board `width` wide: an empty column as narrow as its
    header's longest word, the others sharing the rest equally."""
    # one space either side of each column but the outer ones, and a separator between
    room = width - 2 * len(COLUMNS) + 2 - (len(COLUMNS) - 1)
    narrow = {
        c: max(cell_len(w) for w in [*TITLES[c].split(), "(0)"])
        for c in COLUMNS
        if not by_status[c]
    }
    busy = len(COLUMNS) - len(narrow)
    card = max(_MIN_CARD, (room - sum(narrow.values())) // busy) if busy else _MIN_CARD
    return [narrow.get(c, card) for c in COLUMNS]


def _header(column: str, count: int, width: int) -> str:
    """`Blocked (1)`, wrapped to the column; the count is never cut off."""
    lines = clip(TITLES[column], width, 3)
    if cell_len(f"{lines[-1]} ({count})") <= width:
        lines[-1] += f" ({count})"
    else:
        lines.append(f"({count})")
    return "\n".join(lines)


def _card(row: dict[str, Any], column: str, width: int, *, last: bool) -> Any:
    """One story on the board: id, title, the compact hint line, and its reason or gate."""
    from rich.text import Text

    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(str(row["id"]), style="bold")
    for line in clip(str(row["title"]), width, _TITLE_LINES):
        text.append("\n" + line)
    hint = hint_of(row)
    if hint:
        text.append("\n" + clip(hint, width)[0], style="dim")
    if column == "blocked":
        reason = str(row.get("blocked_reason") or "no reason recorded")
        for i, line in enumerate(clip(reason, width - 2, _REASON_LINES)):
            text.append(("\n↳ " if i == 0 else "\n  ") + line, style="red")
    if column == WAITING:
        text.append("\n" + clip(f"↳ gate: {row['waiting_for']}", width)[0], style="yellow")
    if row.get("conflicts"):
        text.append("\n" + clip(f"⚠ {_conflicts_text(row)}", width)[0], style="red")
    if not last:
        text.append("\n")
    return text


def _conflicts_text(row: dict[str, Any]) -> str:
    """`conflicts: a.py (ai-sdlc run S-0003)`: the branch no longer merges cleanly (a sibling
    merged first); or its dependencies' branches conflict (merge them first)."""
    return str(row.get("conflicts_note") or "conflicts: " + ", ".join(row["conflicts"]))


def register(app: typer.Typer) -> None:
    app.command("status")(status)
