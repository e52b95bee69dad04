"""`ai-sdlc import github [--label L] [--state open|closed|all] [--limit N]`: one backlog story
per GitHub issue, read through `gh issue list --json …` under the `github` resilience policy.

The story records its issue in the TypeScript tool's `ticket_*` fields; an issue whose URL is
already some story's `ticket_url` is skipped, so importing again only brings the new issues.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.errors import AiSdlcError, UsageError

import_app = typer.Typer(
    name="import",
    help="Create stories from another tracker's issues (GitHub, through gh).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@import_app.command("github")
def github(
    ctx: typer.Context,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label", "-l", help="Only issues with this label (repeatable: all of them)."
        ),
    ] = None,
    state: Annotated[
        str, typer.Option("--state", help="open, closed or all.", show_default=True)
    ] = "open",
    limit: Annotated[
        int, typer.Option("--limit", help="At most this many issues.", min=1, max=10_000)
    ] = 100,
    json: JsonOption = False,
) -> None:
    """Create a backlog story for every GitHub issue not imported yet."""
    app = Application.of(ctx)
    from ai_sdlc.git.issues import STATES, list_issues
    from ai_sdlc.git.run import GitError, TransientRemoteError
    from ai_sdlc.workflow.state.guard import GuardFactory

    out = app.terminal(json)
    if state not in STATES:
        raise UsageError(f"unknown state '{state}'", hint="use one of " + ", ".join(STATES))
    store = app.store()
    config = app.config()
    guard = GuardFactory.from_config(store, config).git
    try:
        issues = list_issues(store.root, state=state, labels=label or (), limit=limit, guard=guard)
    except TransientRemoteError as exc:
        raise AiSdlcError(
            f"GitHub could not be reached: {exc.message}",
            hint="the github policy's retries are spent; try again later ('ai-sdlc metrics')",
        ) from None
    except GitError as exc:
        raise AiSdlcError(
            f"gh issue list failed: {exc.message}",
            hint="install and log in to the GitHub CLI (gh auth login), in a GitHub clone",
        ) from None
    known = {
        str(s.frontmatter.get("ticket_url"))
        for s in store.list()
        if isinstance(s.frontmatter.get("ticket_url"), str)
    }
    now = dt.datetime.fromtimestamp(app.clock(), dt.UTC)
    created, skipped = [], []
    for issue in reversed(issues):  # gh lists newest first; oldest gets the lowest id
        if issue.url in known:
            skipped.append(issue)
            continue
        story = store.add(
            " ".join(issue.title.split()) or f"Issue {issue.number}",
            type=issue.story_type,
            labels=issue.labels,
            body=issue.story_body(),
            extra=issue.ticket_fields(now),
        )
        known.add(issue.url)
        created.append((issue, story))
        if not json:
            out.info(f"Added {story.id}: {story.title}  (#{issue.number})")
    if json:
        out.json(
            {
                "created": [{**s.to_json(), "issue": i.number} for i, s in created],
                "skipped": [{"issue": i.number, "url": i.url} for i in skipped],
            }
        )
        return
    if skipped:
        out.info(
            f"Skipped {len(skipped)} already imported issue{'s' if len(skipped) != 1 else ''}."
        )
    if not created and not skipped:
        out.info("No matching issues.")
    for _, story in created:
        out.result(story.id)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
