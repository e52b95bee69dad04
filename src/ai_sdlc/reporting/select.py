"""Which run `ai-sdlc report [WHICH]` draws: the latest run of any kind (multi-story or
single-story), a run by id, or the latest run a story was part of (`report S-0007`)."""

from __future__ import annotations

from pathlib import Path

from ai_sdlc.errors import AiSdlcError, UsageError
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.runs.runstate import (
    SINGLE,
    RunNotFoundError,
    RunRepository,
    RunState,
    is_run_id,
)

HINT = "'ai-sdlc run S-0001' or 'ai-sdlc run --auto' makes one"


def repositories(ai_dir: Path) -> tuple[RunRepository, RunRepository]:
    """(multi-story runs, single-story runs)."""
    return RunRepository(ai_dir), RunRepository(ai_dir, single=True)


def repository_of(ai_dir: Path, state: RunState) -> RunRepository:
    """Where the run's folder (its event log) is."""
    return RunRepository(ai_dir, single=state.mode == SINGLE)


def every_run(ai_dir: Path) -> list[RunState]:
    """Every readable run of both kinds, oldest first."""
    multi, single = repositories(ai_dir)
    runs = multi.list() + single.list()
    runs.sort(key=lambda s: (s.started_at, s.run_id))
    return runs


def choose_run(store: StoryStore, which: str | None) -> RunState:
    """The run `which` names: None (the latest), a run id, or a story (its latest run)."""
    ai_dir = store.ai_dir
    if which is None:
        runs = every_run(ai_dir)
        if not runs:
            raise RunNotFoundError(f"no runs in {ai_dir / 'runs'}", hint=HINT)
        return runs[-1]
    if is_run_id(which):
        multi, single = repositories(ai_dir)
        try:
            return multi.load(which)
        except RunNotFoundError:
            if not (single.root / which).is_dir():
                raise
            return single.load(which)
    try:
        story_id = store.resolve(which)
    except AiSdlcError:
        raise UsageError(
            f"{which!r} is not a run id (e.g. 20250131T221500Z-3fa2c1) nor a story of this "
            "project (e.g. S-0007)",
            hint="'ai-sdlc runs' lists the multi-story runs, 'ai-sdlc status' the stories",
        ) from None
    mine = [s for s in every_run(ai_dir) if s.story(story_id) is not None]
    if not mine:
        raise RunNotFoundError(
            f"no run of {story_id} in {ai_dir / 'runs'}",
            hint=f"'ai-sdlc run {story_id}' runs it",
        )
    return mine[-1]
