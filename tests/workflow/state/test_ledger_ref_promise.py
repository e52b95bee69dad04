"""The git ref is the last copy of a story's count: with the ledger, the user-state copy and
the events all gone and `story.md` lowered, the ref alone still restores the count."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import STATE_HOME
from tests.support.runs_support import frontmatter, make_project

SID = "S-0001"


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout


def _committed_project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "dev@example.com")
    _git(root, "config", "user.name", "Dev")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "stories")
    return root


def test_with_the_ledger_gone_the_ref_alone_restores_the_count(tmp_path: Path) -> None:
    root = _committed_project(tmp_path)
    owner = StoryState(StoryStore(root))
    for _ in range(3):
        owner.record_recovery(SID, "api_retry")
    assert _git(root, "for-each-ref", "refs/ai-sdlc/ledger/").strip()  # the ref exists
    # Everything but the ref: the ledger, the user-state copy, the events, story.md's figures.
    (root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl").unlink()
    for copy in Path(STATE_HOME).glob(f"*/ledger/{SID}.jsonl"):
        if str(root) in (copy.parent.parent / "project").read_text():
            copy.unlink()
    (root / ".ai-sdlc" / "stories" / SID / "events.jsonl").unlink()
    with StoryStore(root).edit(SID) as story:
        story.frontmatter["total_recovery_attempts"] = 0
        story.frontmatter["recovery_breakdown"] = {}

    later = StoryState(StoryStore(root))
    later.ensure_can_act(SID)
    ledger = later.ledger(SID)
    assert (ledger.total, ledger.breakdown) == (3, {"api_retry": 3})
    assert frontmatter(root, SID)["total_recovery_attempts"] == 3
