"""`ai-sdlc show <id>` (alias `details`): every counter, the recovery breakdown, the block,
the phase flags."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.store.schema import breakdown_text
from ai_sdlc.workflow.state.ledger import KIND_LABELS
from ai_sdlc.workflow.state.readiness import pending_gate

COUNTERS = (
    "total_recovery_attempts",
    "implementation_retry_count",
    "retry_count",
    "refinement_count",
)
FLAGS = ("research_complete", "plan_complete", "implementation_complete", "reviews_complete")

#: What `run` does once a gate is approved (said by `show`, so the user knows what approving means).
_AFTER_GATE = {
    "before_implementation": "implements the plan",
    "before_done": "marks the story done",
}

StoryArg = Annotated[str, typer.Argument(help="Story id (S-0001) or slug.")]


def details_of(story: Any, limit: int, gates: dict[str, Any] | None = None) -> dict[str, Any]:
    counters = {name: story.counter(name) for name in COUNTERS}
    breakdown = {kind: story.recovery_breakdown.get(kind, 0) for kind in KIND_LABELS}
    for kind, n in story.recovery_breakdown.items():
        breakdown.setdefault(kind, n)
    return {
        "id": story.id,
        "path": str(story.path),
        "frontmatter": story.to_json(),
        "counters": counters,
        "recovery_breakdown": breakdown,
        "global_recovery_limit": limit,
        "phases": {flag: bool(story.frontmatter.get(flag)) for flag in FLAGS},
        "blocked": story.status == "blocked",
        "blocked_reason": story.frontmatter.get("blocked_reason"),
        "blocked_at": story.to_json().get("blocked_at"),
        "waiting_for": pending_gate(story.frontmatter, gates or {}),
    }


def show(ctx: typer.Context, story_ref: StoryArg, json: JsonOption = False) -> None:
    """Show one story in full."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    story, archived = _find(store, story_ref)
    config = app.config()
    limit = int(config.get("limits.global_recovery"))
    info = details_of(story, limit, config.section("gates"))
    info["verification"] = [
        {"step": step, "command": str(config.get(f"verify.{step}"))}
        for step in ("build", "test")
        if config.get(f"verify.{step}")
    ]
    info["archived"] = archived
    if json:
        out.json(info)
        return
    fm = story.frontmatter
    out.line(f"{story.id}  {story.title}", style="bold")
    out.line(f"  status:    {story.status}")
    if archived:
        out.line(f"  archived:  {fm.get('archived_at') or 'yes'} (out of the backlog)")
    keys = ("type", "priority", "labels", "epic", "dependencies", "created", "updated", "branch")
    for key in keys:
        if key in fm and fm[key] not in (None, [], ""):
            value = ", ".join(map(str, fm[key])) if isinstance(fm[key], list) else fm[key]
            out.line(f"  {key + ':':<10} {value}")
    out.line(
        "  phases:    "
        + "  ".join(
            f"{flag.removesuffix('_complete')} {'✓' if done else '·'}"
            for flag, done in info["phases"].items()
        )
    )
    if info["verification"]:
        steps = ", ".join(f"{v['step']}: {v['command']}" for v in info["verification"])
        out.line(f"  verify:    {steps}")
    else:
        out.line(
            "  verify:    not configured: nothing is built or tested "
            "(set verify.build / verify.test)",
            style="yellow",
        )
    total = info["counters"]["total_recovery_attempts"]
    out.line(f"  recovery:  {total}/{limit} ({breakdown_text(total, story.recovery_breakdown)})")
    for name in COUNTERS[1:]:
        out.line(f"    {name}: {info['counters'][name]}")
    if info["blocked"]:
        out.line(f"  blocked:   {info['blocked_reason'] or 'no reason recorded'}", style="red")
        if info["blocked_at"]:
            out.line(f"  since:     {info['blocked_at']}")
    if info["waiting_for"]:
        out.line(
            f"  waiting:   for approval at gate {info['waiting_for']}; "
            f"`ai-sdlc approve {story.id}` passes it, then `ai-sdlc run {story.id}` "
            f"{_AFTER_GATE.get(info['waiting_for'], 'continues')}",
            style="yellow",
        )
    out.line(f"  file:      {story.path}")


def _find(store: Any, story_ref: str) -> tuple[Any, bool]:
    """The story, and whether it is archived (`ai-sdlc archive`: found by its id only)."""
    from ai_sdlc.errors import StoryNotFoundError
    from ai_sdlc.store import archive, ids

    try:
        return store.get(store.resolve(story_ref)), False
    except StoryNotFoundError:
        story_id, _ = ids.parse_ref(story_ref)
        if story_id is None or archive.archived_path(store, story_id) is None:
            raise
        return archive.get_archived(store, story_id), True


def register(app: typer.Typer) -> None:
    app.command("show")(show)
    app.command("details", help="Alias of 'show'.")(show)
