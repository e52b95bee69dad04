"""What `run --dry-run` shows: the phases each story would walk, computed without writing.

Kept apart from the session because it shares nothing with a real run but the assessment
(`engine.assess`): no lock, no provider, no runner, no log; only reads of the stories and the
config, and with `--show-prompts` the prompt each first phase would send.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ai_sdlc.config import load_config
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.engine.assess import assess, recommend


class PlannedStory(msgspec.Struct):
    story_id: str
    phases: list[str]
    reason: str
    prompts: list[str] = msgspec.field(default_factory=list)
    #: Why it would stop before its first phase (its dependencies' branches conflict).
    warning: str | None = None


class DryRunPlan(msgspec.Struct):
    stories: list[PlannedStory]

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": True, "stories": [msgspec.structs.asdict(p) for p in self.stories]}


def _simulate(fm: dict[str, Any], gates: dict[str, Any], limit: int) -> tuple[list[str], str]:
    """The phases a story would walk if every phase succeeded (reads only)."""
    state = dict(fm)
    phases: list[str] = []
    for _ in range(10):
        action = assess(state, gates=gates, global_limit=limit)
        if action.phase is None:
            if not phases:
                return phases, action.reason
            return phases, f"then: {action.reason}"
        phases.append(action.phase.value)
        if action.phase is Phase.REFINE:
            state["status"] = "ready"
        elif action.phase in (Phase.IMPLEMENT, Phase.REWORK):
            state["implementation_complete"] = True
            state.pop("rework_pending", None)
        else:
            flag = {
                Phase.RESEARCH: "research_complete",
                Phase.PLAN: "plan_complete",
                Phase.REVIEW: "reviews_complete",
            }[action.phase]
            state[flag] = True
    return phases, ""


def plan_dry_run(
    store: StoryStore,
    *,
    story_id: str | None,
    auto: bool,
    step: Phase | None,
    show_prompts: bool = False,
) -> DryRunPlan:
    """What `run` would do, computed without writing anything (no lock, no cache, no log)."""
    config = load_config(store.root)
    gates = config.section("gates")
    limit = config.typed().limits.global_recovery
    if story_id:
        stories = [store.get(story_id)]
    else:
        actionable = {
            a.story_id
            for a in recommend(
                (s.frontmatter for s in store.list()),
                gates=gates,
                global_limit=limit,
                # one action skips a story waiting for a dependency; a run waits for it
                done_means=None if auto else config.typed().run.done_means,
            )
        }
        stories = [s for s in store.list() if s.id in actionable]
        stories.sort(key=lambda s: (_prio(s.frontmatter), s.id))
        if not auto:
            stories = stories[:1]
    planned = []
    for story in stories:
        fm = dict(story.frontmatter)
        if step is not None:
            phases, reason = [step.value], "--step"
        else:
            phases, reason = _simulate(fm, gates, limit)
            if not auto and not story_id and len(phases) > 1:
                phases, reason = phases[:1], ""  # one action runs; the rest is not this run's
        item = PlannedStory(story.id, phases, reason)
        if show_prompts and phases:
            item.prompts.append(
                _preview_prompt(
                    store,
                    story,
                    Phase(phases[0]),
                    timeout=config.typed().limits.phase_timeout,
                    settings=config.section("ai"),
                )
            )
        planned.append(item)
    return DryRunPlan(planned)


def _prio(fm: Any) -> int:
    p = fm.get("priority")
    return p if isinstance(p, int) and not isinstance(p, bool) else 1_000_000


def _preview_prompt(
    store: StoryStore, story: Any, phase: Phase, *, timeout: float, settings: dict[str, Any]
) -> str:
    from ai_sdlc.providers.base import ProviderRequest, access_for
    from ai_sdlc.providers.dry_run import DryRunProvider
    from ai_sdlc.workflow.engine.agents import build_prompt, story_view

    system, prompt = build_prompt(phase, story_view(story))
    request = ProviderRequest(
        phase=phase,
        prompt=prompt,
        system_prompt=system,
        workspace=store.root,
        access=access_for(phase),
        timeout=timeout,
        story_id=story.id,
        model=settings.get("model"),
    )
    return DryRunProvider(store.root, settings).execute(request).text
