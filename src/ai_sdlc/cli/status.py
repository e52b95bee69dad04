"""`ai-sdlc status`: the Kanban board. Every valid story is shown; bad files are listed on
stderr and the exit code is 3. A story waiting at a stage gate (`gates.*` in config) has its own
column, "Waiting for approval", so work that only needs `ai-sdlc approve` is not lost among the
stories in progress.

The board fits the terminal: its six columns share the width (an empty one takes only its
header's room), each card's title wrapped on words into two lines at most and cut with `…`
(`show` has the whole text), with a compact line of priority, type, epic, dependencies and the
recovery counter. The texts that say what to do — a blocked reason, a `⚠ conflicts:` line — are
too important to cut into a card: the card points to them and they follow the table, wrapped to
the full width. Too narrow for six readable columns (a card under `_MIN_CARD`), the board is
stacked: one column after the other, the plain lines a pipe gets. Piped, it is plain lines,
fitted to `COLUMNS` when that is set (titles cut, reasons wrapped). `--hide-done` leaves the done
cards out and says how many in their header."""

from __future__ import annotations

import textwrap
from typing import Annotated, Any

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
#: Columns the table leaves out while they are empty (most projects never use the loop: an empty
#: seventh column would push an 80-column board into the stacked form).
_OPTIONAL = ("in-review",)
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


def status(
    ctx: typer.Context,
    json: JsonOption = False,
    hide_done: Annotated[
        bool,
        typer.Option(
            "--hide-done",
            help="Leave the done stories off the board (their header still counts them).",
        ),
    ] = False,
) -> None:
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
        _render_board(out, shown, hide_done=hide_done)
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


def _render_board(out: Terminal, rows: list[dict[str, Any]], *, hide_done: bool) -> None:
    if not rows:
        out.info('No stories yet. Add one with: ai-sdlc add "Title"')
        return
    by_status = _columns(rows)
    labels = {c: f"({len(items)})" for c, items in by_status.items()}
    if hide_done and by_status["done"]:
        labels["done"] = f"({len(by_status['done'])} hidden)"
        by_status["done"] = []
    if out.data_is_tty:
        screen = int(out.data_console.width)
        shown = _table_columns(by_status)
        widths = _widths(by_status, labels, screen, shown)
        busy = [w for c, w in zip(shown, widths, strict=True) if by_status[c]]
        if not busy or min(busy) >= _MIN_CARD:
            out.table(_table(by_status, labels, widths, shown))
            notes = _notes(by_status, screen)
            if notes:
                out.data()
            for text, style in notes:
                out.data(text, style=style)
            return
    _plain_board(out, by_status, labels, data_width(out))


def _plain_board(
    out: Terminal,
    by_status: dict[str, list[dict[str, Any]]],
    labels: dict[str, str],
    width: int | None,
) -> None:
    """The stacked board: each column's header, then its stories one under the other, titles
    cut to `width`, reasons and conflicts wrapped to it (None: every text on one line)."""
    inner = None if width is None else max(width - _INDENT, _MIN_CARD)
    for column in COLUMNS:
        items = by_status.get(column, [])
        out.data(f"{TITLES[column]} {labels[column]}")
        for row in items:
            head = f"  {row['id']}  "
            title = one_line(str(row["title"]), None if width is None else width - len(head))
            out.data(head + title)
            hint = hint_of(row)
            if hint:
                out.data(" " * _INDENT + one_line(hint, inner))
            details = []
            if column == "blocked":
                details.append(f"reason: {row.get('blocked_reason') or 'no reason recorded'}")
            if column == WAITING:
                details.append(f"gate: {row['waiting_for']} (ai-sdlc approve {row['id']})")
            if row.get("conflicts"):
                details.append(_with_way_out(row))
            for text in details:
                for line in _wrapped(text, inner, _INDENT):
                    out.data(line)


def _wrapped(text: str, width: int | None, indent: int) -> list[str]:
    """`text` wrapped on words to `width` columns (whole, never cut), every line indented by
    `indent` and the continuation lines by two more; None: one line."""
    if width is None:
        return [" " * indent + " ".join(text.split())]
    lines = textwrap.wrap(
        " ".join(text.split()), max(width - 2, _MIN_CARD), break_on_hyphens=False
    )  # a word longer than the line is split across lines, never cut
    return [" " * (indent if i == 0 else indent + 2) + line for i, line in enumerate(lines)]


def _notes(by_status: dict[str, list[dict[str, Any]]], width: int) -> list[tuple[str, str]]:
    """What follows the table: each blocked story's reason and each conflict, whole, wrapped to
    the width under the story's id, with the command that goes on."""
    notes: list[tuple[str, str]] = []
    for column in COLUMNS:
        for row in by_status[column]:
            texts = []
            if column == "blocked":
                reason = row.get("blocked_reason") or "no reason recorded"
                texts.append(f"■ {row['id']} blocked: {reason}")
            if row.get("conflicts"):
                texts.append(f"⚠ {row['id']} {_with_way_out(row)}")
            for text in texts:
                notes += [(line, "red") for line in _wrapped(text, width - 2, 0)]
    return notes


#: Indent of a story's detail lines in the plain board.
_INDENT = 6
#: Columns a card's text needs to be read (`In progress`'s words, an id); narrower terminals get
#: the stacked board instead of cut headers.
_MIN_CARD = 10
#: Lines a card's title may take.
_TITLE_LINES = 2


def _table_columns(by_status: dict[str, list[dict[str, Any]]]) -> tuple[str, ...]:
    """The table's columns: all but an optional one that is empty."""
    return tuple(c for c in COLUMNS if by_status[c] or c not in _OPTIONAL)


def _table(
    by_status: dict[str, list[dict[str, Any]]],
    labels: dict[str, str],
    widths: list[int],
    shown: tuple[str, ...],
) -> Any:
    """The board as a rich table, columns `widths` wide, each card wrapped on words and cut with
    `…` (the whole text is in `ai-sdlc show`)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SQUARE, show_edge=False, pad_edge=False, expand=False, padding=(0, 1))
    for column, card in zip(shown, widths, strict=True):
        table.add_column(_header(column, labels[column], card), width=card, no_wrap=True)
    depth = max(len(v) for v in by_status.values())
    for i in range(depth):
        cells = [
            _card(by_status[c][i], c, card, last=i == depth - 1) if i < len(by_status[c]) else ""
            for c, card in zip(shown, widths, strict=True)
        ]
        table.add_row(*cells)
    return table


def _widths(
    by_status: dict[str, list[dict[str, Any]]],
    labels: dict[str, str],
    width: int,
    shown: tuple[str, ...] = COLUMNS,
) -> list[int]:
    """Each column's text width for a board `width` wide: an empty column as narrow as its
    header's longest word or its count (`(19 hidden)`), the others sharing the rest equally."""
    # one space either side of each column but the outer ones, and a separator between
    room = width - 2 * len(shown) + 2 - (len(shown) - 1)
    narrow = {
        c: max(cell_len(w) for w in [*TITLES[c].split(), labels[c]])
        for c in shown
        if not by_status[c]
    }
    busy = len(shown) - len(narrow)
    card = (room - sum(narrow.values())) // busy if busy else _MIN_CARD
    return [narrow.get(c, card) for c in shown]


def _header(column: str, label: str, width: int) -> str:
    """`Blocked (1)`, wrapped to the column; the count is never cut off."""
    lines = clip(TITLES[column], width, 3)
    if cell_len(f"{lines[-1]} {label}") <= width:
        lines[-1] += f" {label}"
    else:
        lines += clip(label, width, 2)
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
        text.append("\n" + clip("■ why: below", width)[0], style="red")
    if column == WAITING:
        text.append("\n" + clip(f"↳ gate: {row['waiting_for']}", width)[0], style="yellow")
    if row.get("conflicts"):
        text.append("\n" + clip("⚠ conflicts: below", width)[0], style="red")
    if not last:
        text.append("\n")
    return text


def _conflicts_text(row: dict[str, Any]) -> str:
    """`conflicts: a.py (ai-sdlc run S-0003)`: the branch no longer merges cleanly (a sibling
    merged first); or its dependencies' branches conflict (merge them first)."""
    return str(row.get("conflicts_note") or "conflicts: " + ", ".join(row["conflicts"]))


def _with_way_out(row: dict[str, Any]) -> str:
    """The conflict's text with the command that goes on, unless the text names it already
    (a dependencies' conflict says to merge them first)."""
    text = _conflicts_text(row)
    return text if "ai-sdlc run" in text else f"{text} (ai-sdlc run {row['id']})"


def register(app: typer.Typer) -> None:
    app.command("status")(status)
