"""`ai-sdlc show <id>` (alias `details`): everything we know of a story: its fields (type,
priority, epic, dependencies, labels, dates, branch, worktree, pull request, ticket), the phase
flags, every counter and the recovery breakdown, the whole block reason, the provider usage and
cost recorded over its runs, the files its branch conflicts in when a sibling merged first, and
with `--body` its text. `--json` gives the same."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.completion import story_ids
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.storyrows import collisions, counters_of
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.git.feedback import round_lines, rounds_of
from ai_sdlc.store.schema import breakdown_text
from ai_sdlc.store.values import usage_of
from ai_sdlc.workflow.runs.graph import epic_of
from ai_sdlc.workflow.state.events import read_events
from ai_sdlc.workflow.state.ledger import KIND_LABELS, Counted, Journal
from ai_sdlc.workflow.state.readiness import pending_gate
from ai_sdlc.workflow.state.steps import unblock_hint

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

StoryArg = Annotated[
    str, typer.Argument(help="Story id (S-0001) or slug.", autocompletion=story_ids)
]


#: Fields `show` lists after the status, in this order (label, key in `details_of`).
FIELDS = (
    ("type", "type"),
    ("priority", "priority"),
    ("epic", "epic"),
    ("dependencies", "dependencies"),
    ("labels", "labels"),
    ("created", "created"),
    ("updated", "updated"),
    ("branch", "branch"),
    ("worktree", "worktree"),
    ("pr", "pr_url"),
    ("ticket", "ticket_url"),
)


def existing_worktree(root: Path, recorded: Any) -> str | None:
    """The story's recorded worktree while it is there (None once it was removed: a done
    story's worktree goes unless `git.keep_worktrees`), so `show` never points at nothing."""
    if not isinstance(recorded, str) or not recorded:
        return None
    return recorded if (root / recorded).is_dir() else None


def details_of(
    story: Any,
    limit: int,
    gates: dict[str, Any] | None = None,
    view: Counted | None = None,
    *,
    root: Path,
) -> dict[str, Any]:
    """`view`: the effective recovery counters (the ledger's where the file says less)."""
    counters = {name: story.counter(name) for name in COUNTERS}
    kinds = view.breakdown if view is not None else story.recovery_breakdown
    if view is not None:
        counters["total_recovery_attempts"] = view.total
    breakdown = {kind: kinds.get(kind, 0) for kind in KIND_LABELS}
    for kind, n in kinds.items():
        breakdown.setdefault(kind, n)
    fm = story.to_json()
    deps = fm.get("dependencies")
    labels = fm.get("labels")
    return {
        "id": story.id,
        "title": story.title,
        "status": story.status,
        "type": fm.get("type"),
        "priority": fm.get("priority"),
        "epic": epic_of(fm),
        "dependencies": list(deps) if isinstance(deps, list) else [],
        "labels": list(labels) if isinstance(labels, list) else [],
        "created": fm.get("created"),
        "updated": fm.get("updated"),
        "branch": fm.get("branch"),
        "worktree": existing_worktree(root, fm.get("worktree_path")),
        "pr_url": fm.get("pr_url"),
        "ticket_url": fm.get("ticket_url"),
        "path": str(story.path),
        "frontmatter": fm,
        "counters": counters,
        "recovery_breakdown": breakdown,
        "counter_in_file": view.file_total if view is not None else None,
        "counter_note": view.note(limit) if view is not None else None,
        "global_recovery_limit": limit,
        "phases": {flag: bool(story.frontmatter.get(flag)) for flag in FLAGS},
        "unverified": fm.get("unverified") is True,
        "blocked": story.status == "blocked",
        "blocked_reason": story.frontmatter.get("blocked_reason"),
        "blocked_at": fm.get("blocked_at"),
        "waiting_for": pending_gate(story.frontmatter, gates or {}),
        "usage": usage_of(fm.get("usage")),
    }


def usage_text(usage: dict[str, Any]) -> str:
    """`1,200 in + 340 out tokens in 3 calls, $0.0123` (cost unknown: said so)."""
    if not (usage["calls"] or usage["input_tokens"] or usage["output_tokens"]):
        return "none recorded"
    calls = usage["calls"]
    text = (
        f"{usage['input_tokens']:,} in + {usage['output_tokens']:,} out tokens"
        f" in {calls} call{'' if calls == 1 else 's'}"
    )
    cost = usage["cost_usd"]
    return text + (f", ${cost:.4f}" if cost is not None else ", cost unknown")


def show(
    ctx: typer.Context,
    story_ref: StoryArg,
    json: JsonOption = False,
    body: Annotated[
        bool, typer.Option("--body", "-b", help="Also print the story's text (markdown).")
    ] = False,
) -> None:
    """Show one story in full."""
    app = Application.of(ctx)
    out = app.terminal(json)
    store = app.store()
    story, archived = _find(store, story_ref)
    config = app.config()
    limit = config.typed().limits.global_recovery
    view = counters_of(Journal(store.ai_dir), story)
    info = details_of(story, limit, config.section("gates"), view, root=store.root)
    info["verification"] = [
        {"step": step, "command": command} for step, command in config.typed().verify.commands()
    ]
    info["archived"] = archived
    clash = collisions(config, store.root, [story]).get(story.id)
    info["conflicts"] = clash.files if clash else []
    info["conflicts_with"] = clash.target if clash else None
    info["pr_rounds"] = (
        rounds_of(read_events(story.folder)) if story.frontmatter.get("pr_round") else []
    )
    info["conflicts_between"] = clash.between if clash else []
    info["conflicts_note"] = clash.text(story.id) if clash else None
    if body:
        info["body"] = story.body
    if json:
        out.json(info)
        return
    _print(out, story, info, limit)


def _print(out: Terminal, story: Any, info: dict[str, Any], limit: int) -> None:
    out.data(f"{story.id}  {story.title}", style="bold")
    unverified = " (unverified: nothing was built or tested)" if info["unverified"] else ""
    out.data(f"  status:    {story.status}{unverified}", style="yellow" if unverified else None)
    if info["archived"]:
        archived_at = story.frontmatter.get("archived_at")
        out.data(f"  archived:  {archived_at or 'yes'} (out of the backlog)")
    for label, key in FIELDS:
        value = info[key]
        if value in (None, [], ""):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        out.data(f"  {label + ':':<10} {shown}")
    out.data(
        "  phases:    "
        + "  ".join(
            f"{flag.removesuffix('_complete')} {'✓' if done else '·'}"
            for flag, done in info["phases"].items()
        )
    )
    if info["verification"]:
        steps = ", ".join(f"{v['step']}: {v['command']}" for v in info["verification"])
        out.data(f"  verify:    {steps}")
    else:
        out.data(
            "  verify:    not configured: nothing is built or tested "
            "(set verify.build / verify.test)",
            style="yellow",
        )
    total = info["counters"]["total_recovery_attempts"]
    kinds = {k: n for k, n in info["recovery_breakdown"].items() if n}
    out.data(f"  recovery:  {total}/{limit} ({breakdown_text(total, kinds)})")
    if info["counter_note"]:
        out.data(
            f"    story.md says {info['counter_in_file']}: lowered outside ai-sdlc", style="red"
        )
        out.warn(info["counter_note"])
    for name in COUNTERS[1:]:
        out.data(f"    {name}: {info['counters'][name]}")
    out.data(f"  usage:     {usage_text(info['usage'])}")
    if info["blocked"]:
        out.data(f"  blocked:   {info['blocked_reason'] or 'no reason recorded'}", style="red")
        hint = unblock_hint(info["id"], info["blocked_reason"])
        if hint is not None:
            out.data(f"  way out:   {hint}")
        if info["blocked_at"]:
            out.data(f"  since:     {info['blocked_at']}")
    if info["waiting_for"]:
        out.data(
            f"  waiting:   for approval at gate {info['waiting_for']}; "
            f"`ai-sdlc approve {story.id}` passes it, then `ai-sdlc run {story.id}` "
            f"{_AFTER_GATE.get(info['waiting_for'], 'continues')}",
            style="yellow",
        )
    if info["conflicts_between"]:
        a, b = info["conflicts_between"]
        out.data(
            f"  conflicts: {', '.join(info['conflicts'])} (its unmerged dependencies {a} and {b}"
            " conflict with each other, so it cannot start: merge them into the base branch"
            f" first, then `ai-sdlc run {story.id}`)",
            style="red",
        )
    elif info["conflicts"]:
        out.data(
            f"  conflicts: {', '.join(info['conflicts'])} (its branch no longer merges cleanly"
            f" into {info['conflicts_with']}; `ai-sdlc run {story.id}` brings it up to date)",
            style="red",
        )
    for n, line in enumerate(round_lines(info["pr_rounds"])):
        out.data(f"  {'pr rounds:' if n == 0 else '':<10} {line}")
    out.data(f"  file:      {story.path}")
    if "body" in info:
        out.data()
        for line in info["body"].splitlines():
            out.data(line)


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
