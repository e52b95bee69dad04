"""`ai-sdlc status`: the Kanban board. Every valid story is shown; bad files are listed on
stderr and the exit code is 3. A story waiting at a stage gate (`gates.*` in config) has its own
column, "Waiting for approval", so work that only needs `ai-sdlc approve` is not lost among the
stories in progress."""

from __future__ import annotations

import typer
from rich.table import Table

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.errors import ExitCode
from ai_sdlc.store import STATUSES
from ai_sdlc.workflow.state.readiness import pending_gate

#: Board columns: the story statuses, plus "waiting" for stories held at a gate.
WAITING = "waiting"
COLUMNS = ("backlog", "ready", "in-progress", WAITING, "blocked", "done")
TITLES = {
    "backlog": "Backlog",
    "ready": "Ready",
    "in-progress": "In progress",
    WAITING: "Waiting for approval",
    "blocked": "Blocked",
    "done": "Done",
}


def _priority_key(fm: dict[str, object]) -> tuple[int, str]:
    p = fm.get("priority")
    return (p if isinstance(p, int) and not isinstance(p, bool) else 1_000_000, str(fm.get("id")))


def status(ctx: typer.Context, json: JsonOption = False) -> None:
    """Show the board: every story by status, blocked ones with their reason."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    scan = store.scan()
    gates = app.config().section("gates")
    rows = [
        {**s.to_json(), "waiting_for": pending_gate(s.frontmatter, gates)} for s in scan.stories
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
        _render_board(out, rows)
    for err in scan.errors:
        out.error(err.message, hint=err.hint)
    if scan.errors:
        raise typer.Exit(int(ExitCode.INVALID_INPUT))


def _render_board(out: object, rows: list[dict[str, object]]) -> None:
    from ai_sdlc.cli.terminal import Terminal

    assert isinstance(out, Terminal)
    if not rows:
        out.info('No stories yet. Add one with: ai-sdlc add "Title"')
        return
    by_status: dict[str, list[dict[str, object]]] = {c: [] for c in COLUMNS}
    for fm in sorted(rows, key=_priority_key):
        column = WAITING if fm.get("waiting_for") else str(fm.get("status"))
        by_status.setdefault(column, []).append(fm)
    if not out.is_tty:
        for column in COLUMNS:
            items = by_status.get(column, [])
            out.line(f"{TITLES[column]} ({len(items)})")
            for fm in items:
                line = f"  {fm.get('id')}  {fm.get('title')}{_kind(fm)}"
                if column == "blocked" and fm.get("blocked_reason"):
                    line += f"\n      reason: {fm.get('blocked_reason')}"
                if column == WAITING:
                    line += (
                        f"\n      gate: {fm.get('waiting_for')} (ai-sdlc approve {fm.get('id')})"
                    )
                out.line(line)
        return
    table = Table(show_lines=False, expand=True)
    for column in COLUMNS:
        table.add_column(f"{TITLES[column]} ({len(by_status.get(column, []))})", overflow="fold")
    depth = max(len(v) for v in by_status.values())
    for i in range(depth):
        cells = []
        for column in COLUMNS:
            items = by_status.get(column, [])
            if i >= len(items):
                cells.append("")
                continue
            fm = items[i]
            cell = f"{fm.get('id')} {fm.get('title')}{_kind(fm)}"
            if column == "blocked" and fm.get("blocked_reason"):
                cell += f"\n↳ {fm.get('blocked_reason')}"
            if column == WAITING:
                cell += f"\n↳ gate: {fm.get('waiting_for')}"
            cells.append(cell)
        table.add_row(*cells)
    out.render(table)


def _kind(fm: dict[str, object]) -> str:
    """The story's type after its title, unless it is the default `feature`."""
    kind = fm.get("type")
    return f"  [{kind}]" if isinstance(kind, str) and kind != "feature" else ""


def register(app: typer.Typer) -> None:
    app.command("status")(status)
