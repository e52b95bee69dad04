"""The state owner and its ledger in process, for the tests that pin what each operation
writes: a project with one story, an owner on an injected clock, the ledger's entries, and a
call guard under given resilience policies."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ai_sdlc.providers.base import CallGuard, Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.ledger import Journal, LedgerState, line_hash
from ai_sdlc.workflow.state.transitions import StoryState
from tests.support.runs_support import make_project, story_events

SID = "S-0001"


def journal_in(tmp_path: Path) -> Journal:
    return Journal(tmp_path / ".ai-sdlc")


def append_entries(journal: Journal, *totals: int, big: str = "") -> list[bytes]:
    lines, prev = [], ""
    for seq, total in enumerate(totals, start=1):
        state = LedgerState(seq=seq, total=total, breakdown={"rework": total})
        line = Journal.encode("failed", "t", state, prev, note=big)
        journal.append_line(SID, line)
        lines.append(line)
        prev = line_hash(line)
    return lines


#: Not today: a date written from the real clock instead of the injected one shows.
NOW = dt.datetime(2030, 1, 2, 1, 2, 3, 456000, tzinfo=dt.UTC)
STAMP = "2030-01-02T01:02:03.456Z"
DAY = "2030-01-02"


def owner_in(tmp_path: Path, limit: int = 10) -> tuple[Path, StoryState]:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    return root, StoryState(StoryStore(root), limit=limit, clock=lambda: NOW)


def actions_of(root: Path) -> list[str]:
    return [str(e["action"]) for e in story_events(root, SID)]


def hand_edit(root: Path, **values: object) -> None:
    with StoryStore(root).edit(SID) as story:
        for key, value in values.items():
            story.frontmatter[key] = value


def guarded_call(
    tmp_path: Path, section: dict[str, Any], **options: Any
) -> tuple[list[dict[str, Any]], CallGuard]:
    """A `CallGuard` for S-0001's refine under policies from `section`; the retries it
    records are kept in the returned list."""
    from ai_sdlc.resilience import PolicyManager, load_settings
    from ai_sdlc.resilience.clock import ManualClock
    from ai_sdlc.workflow.state.guard import GuardFactory

    clock = ManualClock()
    options.setdefault("budget", False)
    manager = PolicyManager(
        load_settings(section), clock=clock, sleep=clock.sleep, rand=lambda: 0.5, **options
    )
    retries: list[dict[str, Any]] = []
    guard = GuardFactory(manager).for_story(SID, Phase.REFINE, lambda **r: retries.append(r))
    return retries, guard


def failing_call(*messages: str) -> Callable[[], str]:
    from ai_sdlc.providers.base import TransientProviderError

    left = list(messages)

    def call() -> str:
        if left:
            raise TransientProviderError(left.pop(0), kind="server", status=503)
        return "answer"

    return call


def llm_section(**policy: Any) -> dict[str, Any]:
    breaker = policy.pop("breaker", {"failure_threshold": 100})
    return {
        "policies": {"llm": {"initial_delay": 0.5, "jitter": "none", "breaker": breaker, **policy}}
    }
