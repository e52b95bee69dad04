"""A tamper re-anchors at the highest record, whichever holds it: the ledger, the file's total
and breakdown, or the events.

Each test pins a promise that `make mutants` found no other test pinning closely enough.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState
from tests.support.owner_support import (
    NOW,
    SID,
    hand_edit,
)
from tests.support.runs_support import frontmatter, make_project, story_events

# --- a tamper re-anchors at the highest record, whichever holds it -------------------------------


def test_a_tamper_re_anchors_at_the_highest_of_the_ledger_the_file_and_the_events(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    owner = StoryState(
        StoryStore(root), limit=100, clock=lambda: NOW, on_tamper=lambda _sid, _msg: None
    )
    hand_edit(root, total_recovery_attempts=5)  # adopted as is: a total with no breakdown
    owner.ensure_can_act(SID)
    owner.record_recovery(SID, "api_retry")
    ledger = owner.journal.path(SID)

    def tamper(**values: object) -> dict[str, Any]:
        """The ledger's end made unreadable and the file edited; the entry that re-anchors."""
        with ledger.open("ab") as fh:
            fh.write(b"not json\n")
        hand_edit(root, **values)
        owner.ensure_can_act(SID)
        entry = json.loads(ledger.read_bytes().splitlines()[-1])
        assert entry["op"] == "tamper_detected"
        assert story_events(root, SID)[-1]["action"] == "tamper_detected"
        return dict(entry)

    # the ledger's total above the file's and its own breakdown's
    entry = tamper(total_recovery_attempts=0, recovery_breakdown={"api_retry": 1})
    assert (entry["total"], entry["breakdown"]) == (6, {"api_retry": 1})
    # the file's total above the ledger's: the highest record, not a hand-edit on top
    assert tamper(total_recovery_attempts=9)["total"] == 9
    # a kind raised in the file: the total is at least the breakdown's sum
    entry = tamper(recovery_breakdown={"api_retry": 1, "rework": 20})
    assert (entry["total"], entry["breakdown"]) == (21, {"api_retry": 1, "rework": 20})
    # a kind the file lists at 0 and the ledger never counted adds nothing
    entry = tamper(recovery_breakdown={"api_retry": 1, "rework": 20, "refinement": 0})
    assert (entry["total"], entry["breakdown"]) == (21, {"api_retry": 1, "rework": 20})
    # the ledger and its copy left with no readable entry, the file zeroed: the events (kept
    # with the story) still hold 21
    copy = owner.mirrors.home.folder / "ledger" / f"{SID}.jsonl"
    copy.write_bytes(b"not json\n")
    ledger.write_bytes(b"")
    entry = tamper(total_recovery_attempts=0, recovery_breakdown={})
    assert (entry["total"], entry["breakdown"]) == (21, {"api_retry": 1, "rework": 20})
    assert frontmatter(root, SID)["total_recovery_attempts"] == 21
