"""What a story needs next: a pure function of its frontmatter and the config.

Looking at the board never blocks or changes a story; `assess` only reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ai_sdlc.providers.base import Phase
from ai_sdlc.workflow.state.readiness import (
    GATE_BEFORE_DONE,
    GATE_BEFORE_IMPLEMENTATION,
    unmet_dependencies,
)

#: The frontmatter flag each phase sets when it completes.
PHASE_FLAG: dict[Phase, str] = {
    Phase.RESEARCH: "research_complete",
    Phase.PLAN: "plan_complete",
    Phase.IMPLEMENT: "implementation_complete",
    Phase.REVIEW: "reviews_complete",
}

#: A `NextAction.kind`: every phase complete, the story not marked done yet (no phase runs;
#: the runner finishes it).
FINISH = "finish"
#: A `NextAction.kind`: the story's PR is open and followed (`pr.loop`): the runner looks at
#: it (a new review or failing check starts a PR rework round).
IN_REVIEW = "in-review"

#: The phase order a story walks (refine only for backlog stories).
SEQUENCE = (Phase.REFINE, Phase.RESEARCH, Phase.PLAN, Phase.IMPLEMENT, Phase.REVIEW)


class NextAction(msgspec.Struct, frozen=True):
    """`phase` is None when there is nothing to run; `reason` says why (or what runs)."""

    story_id: str
    phase: Phase | None
    reason: str
    #: "run", "done", "blocked", "limit", "waiting" (a gate needs `ai-sdlc approve`)
    kind: str = "run"

    @property
    def actionable(self) -> bool:
        return self.phase is not None or self.kind in (FINISH, IN_REVIEW)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def assess(fm: Mapping[str, Any], *, gates: Mapping[str, Any], global_limit: int) -> NextAction:
    story_id = str(fm.get("id"))
    status = fm.get("status")
    if status == "blocked":
        return NextAction(
            story_id, None, f"blocked: {fm.get('blocked_reason') or 'no reason'}", "blocked"
        )
    if status == "done":
        return NextAction(story_id, None, "done", "done")
    if status == "in-review":
        return NextAction(story_id, None, f"in review: {fm.get('pr_url')}", IN_REVIEW)
    total = _int(fm.get("total_recovery_attempts"))
    if total >= global_limit:
        return NextAction(
            story_id, None, f"global recovery limit reached ({total}/{global_limit})", "limit"
        )
    approved = set(fm.get("approved_gates") or [])
    if status == "backlog":
        return NextAction(story_id, Phase.REFINE, "refine the backlog story")
    if not fm.get("research_complete"):
        return NextAction(story_id, Phase.RESEARCH, "research")
    if not fm.get("plan_complete"):
        return NextAction(story_id, Phase.PLAN, "plan")
    if not fm.get("implementation_complete"):
        if gates.get(GATE_BEFORE_IMPLEMENTATION) and GATE_BEFORE_IMPLEMENTATION not in approved:
            return NextAction(
                story_id,
                None,
                f"waiting for approval: run 'ai-sdlc approve {story_id}'",
                "waiting",
            )
        phase = Phase.REWORK if fm.get("rework_pending") else Phase.IMPLEMENT
        return NextAction(story_id, phase, phase.value)
    if not fm.get("reviews_complete"):
        return NextAction(story_id, Phase.REVIEW, "review")
    if gates.get(GATE_BEFORE_DONE) and GATE_BEFORE_DONE not in approved:
        return NextAction(
            story_id, None, f"waiting for approval: run 'ai-sdlc approve {story_id}'", "waiting"
        )
    return NextAction(story_id, None, "all phases complete", "done")


def _priority(fm: Mapping[str, Any]) -> tuple[int, str]:
    p = fm.get("priority")
    return (p if isinstance(p, int) and not isinstance(p, bool) else 1_000_000, str(fm.get("id")))


def recommend(
    stories: Iterable[Mapping[str, Any]],
    *,
    gates: Mapping[str, Any],
    global_limit: int,
    done_means: str | None = "done",
) -> list[NextAction]:
    """Actionable next actions over a board, by priority (lower number first), then id. A
    story whose dependencies (among `stories`) are not met is skipped (`done_means` None: the
    caller decided that already); one whose phases are all complete but which was never marked
    done (a `--step`, a bare `run`, a run stopped in between) is a `finish` action: running it
    takes it to done, or to the gate it waits for."""
    board = sorted(stories, key=_priority)
    by_id = {str(fm.get("id")): fm for fm in board}
    actions = []
    for fm in board:
        action = assess(fm, gates=gates, global_limit=global_limit)
        if action.kind == "done" and fm.get("status") != "done":
            action = NextAction(action.story_id, None, "finish: all phases complete", FINISH)
        elif not action.actionable:
            continue
        if done_means is not None and unmet_dependencies(fm, by_id.get, done_means):
            continue
        actions.append(action)
    return actions
