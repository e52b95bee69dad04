"""`ai-sdlc add "title"`: create a story with an atomically allocated id; prints the id.

`--depends-on`, `--epic`, `--body`/`--body-file` and `--status ready` place it in the backlog
graph at once (dependencies must be stories of this backlog). `ai-sdlc add --from FILE.md` (or
a folder of them) brings in markdown written elsewhere: every document is read and checked
first, and stories are created only when all of them are good; their `dependencies` and
`epic` are kept, a dependency on another document of the same import (by its `id`) renumbered
to that document's new id."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import InvalidInputError, UsageError
from ai_sdlc.store import StoryStore
from ai_sdlc.store.schema import STORY_TYPES, type_problem
from ai_sdlc.workflow.state import shaping


def add(
    ctx: typer.Context,
    title: Annotated[
        str | None, typer.Argument(help="The story's title.", show_default=False)
    ] = None,
    type_: Annotated[
        str,
        typer.Option(
            "--type",
            "-t",
            help=f"One lowercase word; known: {', '.join(STORY_TYPES)}.",
        ),
    ] = "feature",
    label: Annotated[
        list[str] | None, typer.Option("--label", "-l", help="A label (repeatable).")
    ] = None,
    priority: Annotated[
        int | None, typer.Option("--priority", "-p", help="Lower runs first.", min=0)
    ] = None,
    depends_on: Annotated[
        list[str] | None,
        typer.Option(
            "--depends-on",
            "-d",
            help="A story this one waits for (repeatable, or comma-separated).",
            show_default=False,
        ),
    ] = None,
    epic: Annotated[
        str | None, typer.Option("--epic", help="The story's epic id (e.g. E-01).")
    ] = None,
    body: Annotated[
        str | None, typer.Option("--body", help="The story's text (markdown).", show_default=False)
    ] = None,
    body_file: Annotated[
        Path | None,
        typer.Option("--body-file", help="Read the story's text from a file.", show_default=False),
    ] = None,
    status: Annotated[
        str, typer.Option("--status", help="backlog, or ready (what `watch` waits for).")
    ] = "backlog",
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A markdown file (YAML, TOML or JSON frontmatter), or a folder: one story per "
            "*.md file.",
            show_default=False,
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Add a story to the backlog and print its id on stdout."""
    app = Application.of(ctx)
    out = app.terminal(json)
    type_ = type_.strip().lower()  # `--type Bug` means bug: typed, not a file's exact value
    problem = type_problem(type_)
    if problem is not None:
        raise UsageError(problem.message, hint=problem.hint)
    if source is not None:
        if title is not None:
            raise UsageError("give a title or --from, not both")
        given = [
            name
            for name, value in (
                ("--depends-on", depends_on),
                ("--epic", epic),
                ("--body", body),
                ("--body-file", body_file),
                ("--status", None if status == "backlog" else status),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"{given[0]} cannot be used with --from",
                hint="write it in the documents' frontmatter (dependencies:, epic:, status:)",
            )
        if any(not lb.strip() or not lb.isprintable() for lb in label or []):
            raise UsageError("labels are short one-line words")
        _add_from(app, out, source, type_=type_, labels=label or [], priority=priority, json=json)
        return
    if title is None or not title.strip():
        raise UsageError(
            "the title is empty", hint='ai-sdlc add "Title", or ai-sdlc add --from FILE.md'
        )
    deps = shaping.dependency_ids(w for d in depends_on or [] for w in d.split(",") if w.strip())
    extra: dict[str, Any] = {}
    if epic is not None:
        extra["epic"] = shaping.parse_value("epic", epic)
    text = _body(body, body_file)
    state = shaping.parse_value("status", status)
    store = app.store()
    with store.graph_locked():
        if deps:
            backlog = {s.id: s.frontmatter for s in store.list()}
            shaping.check_dependencies(None, deps, backlog, _archived(store))
            extra["dependencies"] = deps
        story = store.add(
            title.strip(),
            type=type_,
            labels=tuple(label or ()),
            priority=priority,
            body=text,
            status=state,
            extra={k: v for k, v in extra.items() if v is not None},
        )
    if json:
        out.json(story.to_json())
    else:
        out.info(f"Added {story.id}: {story.title}")
        out.result(story.id)


def _body(body: str | None, body_file: Path | None) -> str | None:
    if body is not None and body_file is not None:
        raise UsageError("give --body or --body-file, not both")
    if body_file is not None:
        body = _read_body_file(body_file)
    if body is None:
        return None
    if not body.strip():
        raise UsageError("the body is empty", hint="leave --body out for the default text")
    return body if body.endswith("\n") else body + "\n"


def _read_body_file(path: Path) -> str:
    """A regular file of UTF-8 text, at most a story's size (a FIFO would block: refused)."""
    import stat

    from ai_sdlc.store.foreign import MAX_BYTES

    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError("is not a regular file", path=str(path))
        if info.st_size > MAX_BYTES:
            raise InvalidInputError(
                f"is {info.st_size:,} bytes; a story's text is at most {MAX_BYTES:,}",
                path=str(path),
            )
        return path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InvalidInputError(f"cannot be read: {exc.strerror or exc}", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"is not UTF-8 text (byte {exc.start})", path=str(path), hint="save it as UTF-8"
        ) from None


def _archived(store: StoryStore) -> list[str]:
    from ai_sdlc.store.archive import archived_numbers
    from ai_sdlc.store.ids import format_id

    return [format_id(n) for n in archived_numbers(store)]


def _add_from(
    app: Application,
    out: Terminal,
    source: Path,
    *,
    type_: str,
    labels: list[str],
    priority: int | None,
    json: bool,
) -> None:
    """Validate every document, then create one story each (in file-name order)."""
    from ai_sdlc.store.foreign import documents, read_draft

    store = app.store()
    drafts = [read_draft(path) for path in documents(source)]
    with store.graph_locked():
        backlog = {s.id: s.frontmatter for s in store.list()}
        _check_imported_graph(drafts, backlog, _archived(store))
        created = []
        for draft in drafts:
            story = store.add(
                draft.title,
                type=draft.type if type_ == "feature" else type_,
                labels=(*draft.labels, *(lb for lb in labels if lb not in draft.labels)),
                priority=draft.priority if draft.priority is not None else priority,
                body=draft.body,
                status=draft.status,
                extra={"epic": draft.epic} if draft.epic else None,
            )
            created.append((draft, story))
    new_ids = {d.source_id: s.id for d, s in created if d.source_id}
    if any(d.dependencies for d, _ in created):
        from ai_sdlc.workflow.state.transitions import StoryState

        owner = StoryState(store, limit=app.config().typed().limits.global_recovery)
        for draft, story in created:
            if draft.dependencies:
                deps = [new_ids.get(d, d) for d in draft.dependencies]
                owner.shape(story.id, {"dependencies": deps})
        created = [(d, store.get(s.id)) for d, s in created]
    for draft, story in created:
        if not json:
            out.info(f"Added {story.id}: {story.title}  (from {draft.path.name})")
            if draft.ignored:
                out.info(f"  not mapped: {', '.join(draft.ignored)} (kept out of the story)")
    if json:
        out.json(
            {
                "stories": [
                    {**story.to_json(), "source": str(draft.path), "ignored": list(draft.ignored)}
                    for draft, story in created
                ]
            }
        )
    else:
        for _, story in created:
            out.result(story.id)


def _check_imported_graph(drafts: list[Any], backlog: dict[str, Any], archived: list[str]) -> None:
    """Every dependency names another document (by its `id`) or a story of this backlog, and
    the documents form no cycle; checked before any story is created."""
    batch = {d.source_id: {"dependencies": list(d.dependencies)} for d in drafts if d.source_id}
    for draft in drafts:
        outside = [dep for dep in draft.dependencies if dep not in batch]
        try:
            shaping.check_dependencies(None, outside, backlog, archived)
            if draft.source_id:
                inside = [dep for dep in draft.dependencies if dep in batch]
                shaping.check_dependencies(draft.source_id, inside, batch)
        except UsageError as exc:
            raise InvalidInputError(
                exc.message,
                path=str(draft.path),
                hint="a dependency names another imported document's `id` or a story of "
                "this backlog",
            ) from None


def register(app: typer.Typer) -> None:
    app.command("add")(add)
