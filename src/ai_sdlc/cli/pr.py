"""`ai-sdlc pr <id> [--json]`: push a story's branch and open (or reuse) its pull request.

The run does this when a story reaches done; this command is for later (no `gh` or no remote
at the time, GitHub unreachable). Pushes and `gh` calls go through the `github` policy.
"""

from __future__ import annotations

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.show import StoryArg
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.git import repo, worktrees
from ai_sdlc.git.workspace import GitWorkspace


def pr(ctx: typer.Context, story_ref: StoryArg, json: JsonOption = False) -> None:
    """Push a story's branch and open (or reuse) its pull request."""
    from ai_sdlc.workflow.state.guard import GuardFactory
    from ai_sdlc.workflow.state.transitions import StoryState

    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    story_id = store.resolve(story_ref)
    story = store.get(story_id)
    config = app.config()
    guard = GuardFactory.from_config(store, config).git
    workspace = GitWorkspace.from_config(store.root, config, guard=guard)
    recorded = story.frontmatter.get("branch")
    branch = (
        str(recorded)
        if isinstance(recorded, str) and recorded
        else worktrees.branch_for(story.id, story.frontmatter.get("slug"))
    )
    if not repo.branch_exists(workspace.top, branch):
        branch = ""  # publish() explains that the story has no branch yet
    result = workspace.publish(story, branch)
    if result.fields:
        owner = StoryState(store, limit=config.typed().limits.global_recovery)
        owner.record_fields(
            story_id,
            result.fields,
            {"action": "publish", "outcome": result.outcome, "message": result.message},
        )
    if json:
        out.json(
            {
                "story": story_id,
                "branch": branch,
                "outcome": result.outcome,
                "message": result.message,
                **result.fields,
            }
        )
    elif result.outcome in ("opened", "reused", "retargeted", "merged"):
        out.success(result.message)
    elif not result.missing:
        out.result(result.message)  # nothing was needed (no commits ahead of the base)
    if result.missing:  # nothing published though it was needed: not a success (exit 1)
        raise AiSdlcError(f"no pull request: {result.message}")


def register(app: typer.Typer) -> None:
    app.command("pr")(pr)
