"""`ai-sdlc list`: one compact line per story, filtered and sorted, or `--json`.

Columns: id, status, priority, type, epic, dependencies, the recovery counter against
`limits.global_recovery` (`3/10`), and the title cut to the width with `…` (on a screen
too narrow to leave it 20 columns, the title goes whole on the lines under its story). A
terminal gets a bold header and colour; a pipe gets the same aligned text without styles (cut
only when `COLUMNS` is set), so `ai-sdlc list | grep` and `cut` work. Filters combine: a story
is listed when its status is one of `--status` (or blocked, with `--blocked`), it carries every
`--label`, and it belongs to `--epic`. A story whose branch no longer merges cleanly into what
it builds on (a sibling merged first) has `+conflicts` after its status (`--status conflicts`
lists those; `--json` gives the files as `conflicts`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.storyrows import (
    cell_len,
    collisions,
    data_width,
    one_line,
    row_of,
    say_disagreements,
)
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import ExitCode, UsageError
from ai_sdlc.store import STATUSES
from ai_sdlc.workflow.state.ledger import Journal

#: `--status` values: the story statuses, `waiting` for stories held at a gate, and
#: `conflicts` for stories whose branch no longer merges cleanly.
WAITING = "waiting"
CONFLICTS = "conflicts"
STATUS_FILTERS = (*STATUSES, WAITING, CONFLICTS)
#: Board order, used by `--sort status`.
_STATUS_ORDER = {
    s: i
    for i, s in enumerate(
        ("backlog", "ready", "in-progress", WAITING, "in-review", "blocked", "done")
    )
}
_NO_PRIORITY = 1_000_000_000_000
SORTS = ("id", "priority", "status", "updated")
_STYLES = {
    "blocked": "red",
    "done": "green",
    "in-progress": "cyan",
    WAITING: "yellow",
    "in-review": "magenta",
}
#: (header, row → cell) for the columns before the title.
_HEAD = ("ID", "STATUS", "PRI", "TYPE", "EPIC", "DEPS", "REC")
#: The widest dependency cell (more dependencies are cut with `…`).
_DEPS_WIDTH = 20


def _id_key(row: dict[str, Any]) -> tuple[int, str]:
    digits = str(row["id"]).removeprefix("S-")
    return (int(digits) if digits.isdigit() else _NO_PRIORITY, str(row["id"]))


def _shown_status(row: dict[str, Any]) -> str:
    return WAITING if row.get("waiting_for") else str(row["status"])


def _priority_key(row: dict[str, Any]) -> tuple[int, tuple[int, str]]:
    p = row.get("priority")
    return (p if isinstance(p, int) else _NO_PRIORITY, _id_key(row))


_SORT_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "id": _id_key,
    "priority": _priority_key,
    "status": lambda r: (_STATUS_ORDER.get(_shown_status(r), 99), _priority_key(r)),
    # newest first: the key is negated by sorting in reverse, ties by id ascending
    "updated": lambda r: str(r.get("updated") or ""),
}


def list_stories(
    ctx: typer.Context,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            "-s",
            help="Only stories with this status (repeatable): " + ", ".join(STATUS_FILTERS) + ".",
        ),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label", "-l", help="Only stories with this label (repeatable: all of them)."
        ),
    ] = None,
    epic: Annotated[
        str | None, typer.Option("--epic", "-e", help="Only stories of this epic.")
    ] = None,
    blocked: Annotated[bool, typer.Option("--blocked", help="Only blocked stories.")] = False,
    sort: Annotated[
        str,
        typer.Option("--sort", help="Order: id, priority, status or updated (newest first)."),
    ] = "id",
    json: JsonOption = False,
) -> None:
    """List stories one per line (status, priority, type, epic, deps, recoveries), filtered."""
    wanted = _statuses(status or [], blocked)
    if sort not in SORTS:
        raise UsageError(f"unknown sort {sort!r}", hint="use one of: " + ", ".join(SORTS))
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    scan = store.scan()
    config = app.config()
    limit = config.typed().limits.global_recovery
    gates = config.section("gates")
    clashes = collisions(config, store.root, scan.stories)
    journal = Journal(store.ai_dir)
    rows = [row_of(s, limit, gates, clashes.get(s.id), journal) for s in scan.stories]
    rows = [r for r in rows if _matches(r, wanted, label or [], epic)]
    rows.sort(key=_id_key)
    rows.sort(key=_SORT_KEYS[sort], reverse=sort == "updated")
    if json:
        out.json(rows)
    elif rows:
        _print(out, rows)
    else:
        out.info("No stories match." if scan.stories else 'No stories yet: ai-sdlc add "Title"')
    say_disagreements(out, rows)
    for err in scan.errors:
        out.error(err.message, hint=err.hint)
    if scan.errors:
        raise typer.Exit(int(ExitCode.INVALID_INPUT))


def _statuses(given: list[str], blocked: bool) -> frozenset[str] | None:
    """The statuses asked for (None: any); an unknown one is a usage error."""
    chosen = {s.strip().lower() for s in given}
    unknown = sorted(chosen - set(STATUS_FILTERS))
    if unknown:
        raise UsageError(
            f"unknown status {unknown[0]!r}", hint="use one of: " + ", ".join(STATUS_FILTERS)
        )
    if blocked:
        chosen.add("blocked")
    return frozenset(chosen) or None


def _matches(
    row: dict[str, Any], statuses: frozenset[str] | None, labels: list[str], epic: str | None
) -> bool:
    shown = {row["status"], _shown_status(row)} | ({CONFLICTS} if row["conflicts"] else set())
    if statuses is not None and not (shown & statuses):
        return False
    if any(label not in row["labels"] for label in labels):
        return False
    return epic is None or row["epic"] == epic


def _cells(row: dict[str, Any]) -> list[str]:
    deps = ",".join(row["dependencies"]) or "-"
    return [
        str(row["id"]),
        _shown_status(row)
        + (f"+{CONFLICTS}" if row["conflicts"] else "")
        + (" (unverified)" if row["unverified"] else ""),
        str(row["priority"]) if row["priority"] is not None else "-",
        str(row["type"] or "-"),
        str(row["epic"] or "-"),
        one_line(deps, _DEPS_WIDTH),
        str(row["counter"]),
    ]


#: Below this many columns left for the title after the fields (a 50-column terminal leaves
#: 2: `A…`), each title goes whole on the lines under its story instead, wrapped.
_MIN_TITLE_ROOM = 20


def _print(out: Terminal, rows: list[dict[str, Any]]) -> None:
    table = [_cells(r) for r in rows]
    widths = [max(cell_len(c) for c in col) for col in zip(_HEAD, *table, strict=False)]
    width = data_width(out)
    fields = sum(widths) + 2 * (len(widths) - 1)
    below = width is not None and width - fields - 2 < _MIN_TITLE_ROOM

    def line(cells: list[str], title: str) -> str:
        head = "  ".join(c + " " * (w - cell_len(c)) for c, w in zip(cells, widths, strict=True))
        if below:
            return head.rstrip()
        room = None if width is None else max(width - cell_len(head) - 2, 1)
        return f"{head}  {one_line(title, room)}"

    out.data(line(list(_HEAD), "TITLE"), style="bold")
    for row, cells in zip(rows, table, strict=True):
        style = "red" if row["conflicts"] else _STYLES.get(_shown_status(row))
        out.data(line(cells, str(row["title"])), style=style)
        if below and width is not None:
            for text in textwrap.wrap(
                " ".join(str(row["title"]).split()), max(width - 4, 1), break_on_hyphens=False
            ):
                out.data(f"    {text}", style=style)


def register(app: typer.Typer) -> None:
    app.command("list")(list_stories)
