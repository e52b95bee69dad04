"""Rollback to the phase checkpoint: end to end with a real CLI agent (the `command` provider)
that scribbles over the story's state and then crashes, and the checkpoint store on its own
(restore rules, an unreadable story.md, incomplete checkpoints)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.checkpoint import Checkpoints
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import run_cli
from tests.support.records import records_folder, records_path
from tests.support.runs_support import frontmatter, make_project, story_events

AGENT = r"""
import pathlib, sys
phase, calls = sys.argv[1], pathlib.Path(sys.argv[2])
sys.stdin.read()
if phase != "implement":
    print("DECISION: APPROVED" if phase == "review" else phase + " notes")
    sys.exit(0)
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
if n == 1:
    print("Error: 429 rate limit exceeded, retry later", file=sys.stderr)
    sys.exit(1)
folder = pathlib.Path(".ai-sdlc/stories/S-0001")
text = (folder / "story.md").read_text()
text = text.replace("status: in-progress", "status: done")
for flag in ("implementation_complete", "reviews_complete"):
    text = text.replace(flag + ": false", flag + ": true")
(folder / "story.md").write_text(text)
(folder / "plan.md").write_text("scribbled over by the agent\n")
(folder / "review.md").write_text("DECISION: APPROVED\n")
print("segmentation fault in the agent", file=sys.stderr)
sys.exit(3)
"""

PLAN = "# Plan\n\n1. Do the thing.\n"


def _prepare(root: Path, tmp_path: Path) -> StoryStore:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    template = [sys.executable, str(agent), "{phase}", str(records_path(root) / "calls")]
    store = make_project(
        root,
        ["Crashy"],
        f"ai:\n  command:\n    template: {json.dumps(template)}\n"
        "resilience:\n  policies:\n    llm:\n      initial_delay: 0.01\n      max_delay: 0.05\n",
    )
    records_folder(root)  # the agent's calls
    store.write_artifact("S-0001", "research.md", "# Research\n")
    store.write_artifact("S-0001", "plan.md", PLAN)
    with store.edit("S-0001") as story:
        story.frontmatter["status"] = "in-progress"
        story.frontmatter["research_complete"] = True
        story.frontmatter["plan_complete"] = True
    return store


def test_a_crash_inside_a_phase_leaves_the_story_at_its_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _prepare(root, tmp_path)
    folder = root / ".ai-sdlc" / "stories" / "S-0001"
    result = run_cli(root, "run", "S-0001", "--provider", "command")
    assert result.returncode == 1, result.output
    assert "exited with code 3" in result.output
    assert "rolled back to the checkpoint before implement" in result.output
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "in-progress"
    assert fm["implementation_complete"] is False and fm["reviews_complete"] is False
    assert (folder / "plan.md").read_text() == PLAN
    assert not (folder / "review.md").exists()
    # The API retry recorded during the phase is the guardrail: it is never rolled back.
    assert fm["total_recovery_attempts"] == 1
    assert fm["recovery_breakdown"]["api_retry"] == 1
    events = story_events(root, "S-0001")
    rollback = [e for e in events if e["action"] == "rollback_initiated"]
    assert len(rollback) == 1
    assert rollback[0]["phase"] == "implement"
    assert rollback[0]["reason"].startswith("ProviderError: agent")
    assert set(rollback[0]["restored"]) == {
        "plan.md",
        "review.md",
        "status",
        "implementation_complete",
        "reviews_complete",
    }
    assert not (root / ".ai-sdlc" / "state" / "checkpoints" / "S-0001.json").exists()


def _story(tmp_path: Path) -> tuple[StoryStore, Checkpoints, Path]:
    store = make_project(tmp_path / "p", ["Story"])
    store.write_artifact("S-0001", "plan.md", PLAN)
    return store, Checkpoints(store), store.folder("S-0001")


def test_restore_puts_back_workflow_keys_body_and_artifacts_only(tmp_path: Path) -> None:
    store, checkpoints, folder = _story(tmp_path)
    original = (folder / "story.md").read_bytes()
    checkpoint = checkpoints.take("S-0001", "research", taken_at="2025-01-01T00:00:00.000Z")
    with store.edit("S-0001") as story:
        story.frontmatter["status"] = "in-progress"
        story.frontmatter["research_complete"] = True
        story.frontmatter["usage"] = {"input_tokens": 10, "output_tokens": 5, "calls": 1}
        story.body = "rewritten body\n"
    owner = StoryState(store)
    owner.record_recovery("S-0001", "api_retry")
    store.write_artifact("S-0001", "research.md", "half written\n")
    restored = checkpoints.restore(checkpoint, owner, "test")
    assert set(restored) == {"research.md", "status", "research_complete", "body"}
    story = store.get("S-0001")
    assert story.status == "backlog"
    assert story.frontmatter["research_complete"] is False
    assert story.body == checkpoint.story().body
    assert story.counter("total_recovery_attempts") == 1
    assert dict(story.frontmatter["usage"]) == {"input_tokens": 10, "output_tokens": 5, "calls": 1}
    assert not (folder / "research.md").exists()
    assert (folder / "plan.md").read_text() == PLAN
    # Restoring twice is harmless (a second Ctrl-C during a rollback).
    assert checkpoints.restore(checkpoint, owner, "test") == []
    assert b"total_recovery_attempts" not in original


def test_an_unreadable_story_file_is_restored_whole_keeping_the_ledger_counters(
    tmp_path: Path,
) -> None:
    store, checkpoints, folder = _story(tmp_path)
    checkpoint = checkpoints.take("S-0001", "implement", taken_at="2025-01-01T00:00:00.000Z")
    owner = StoryState(store)
    owner.record_recovery("S-0001", "api_retry")
    owner.record_recovery("S-0001", "api_retry")
    (folder / "story.md").write_text("---\ntitle: Fix: crash\n---\nbroken by an agent\n")
    assert checkpoints.restore(checkpoint, owner, "test") == ["story.md"]
    story = store.get("S-0001")
    assert story.title == "Story"
    assert story.counter("total_recovery_attempts") == 2
    assert story.recovery_breakdown == {"api_retry": 2}


def test_only_a_complete_checkpoint_is_pending(tmp_path: Path) -> None:
    store, checkpoints, _ = _story(tmp_path)
    assert checkpoints.pending("S-0001") is None
    checkpoint = checkpoints.take("S-0001", "plan", taken_at="2025-01-01T00:00:00.000Z")
    StoryState(store).begin_action("S-0001", Phase.PLAN)  # then the process died
    found = checkpoints.pending("S-0001")
    assert found is not None
    assert (found.phase, found.artifacts) == ("plan", ("plan.md",))
    data = checkpoint.path.read_bytes()
    checkpoint.path.write_bytes(data[: len(data) // 2])  # torn (never by `take` itself)
    assert checkpoints.pending("S-0001") is None
    assert not checkpoint.path.exists()
    assert list(checkpoint.folder.iterdir()) == []  # one file per checkpoint, no temp left


def test_a_checkpoint_gives_back_the_exact_bytes(tmp_path: Path) -> None:
    store, checkpoints, folder = _story(tmp_path)
    odd = b"# Plan\r\n\xff\xfe not UTF-8, NEL \xc2\x85, \xe2\x80\xa8 and caf\xc3\xa9\n"
    (folder / "plan.md").write_bytes(odd)
    story_bytes = (folder / "story.md").read_bytes()
    checkpoints.take("S-0001", "implement", taken_at="2025-01-01T00:00:00.000Z")
    StoryState(store).begin_action("S-0001", Phase.IMPLEMENT)
    (folder / "plan.md").write_text("scribbled\n")
    store.write_artifact("S-0001", "review.md", "DECISION: APPROVED\n")
    found = checkpoints.pending("S-0001")  # read back from disk, as after a crash
    assert found is not None
    assert found.saved("story.md") == story_bytes and found.saved("plan.md") == odd
    restored = checkpoints.restore(found, StoryState(store), "test")
    assert set(restored) == {"plan.md", "review.md"}
    assert (folder / "plan.md").read_bytes() == odd
    assert not (folder / "review.md").exists()


def test_a_checkpoint_in_the_earlier_layout_is_still_restored(tmp_path: Path) -> None:
    store, checkpoints, folder = _story(tmp_path)
    earlier = checkpoints.root / "S-0001"
    copies = earlier / ".ai-sdlc" / "stories" / "S-0001"
    copies.mkdir(parents=True)
    (copies / "story.md").write_bytes((folder / "story.md").read_bytes())
    (copies / "plan.md").write_text(PLAN)
    manifest = {
        "story_id": "S-0001",
        "phase": "implement",
        "taken_at": "t",
        "artifacts": ["plan.md"],
    }
    (earlier / "manifest.json").write_text(json.dumps(manifest))
    (folder / "plan.md").write_text("scribbled\n")
    StoryState(store).begin_action("S-0001", Phase.IMPLEMENT)
    found = checkpoints.pending("S-0001")
    assert found is not None and found.phase == "implement"
    assert not earlier.exists()  # moved to the current layout: `discard` drops it
    assert checkpoints.restore(found, StoryState(store), "test") == ["plan.md"]
    assert (folder / "plan.md").read_text() == PLAN
    checkpoints.discard("S-0001")
    assert checkpoints.pending("S-0001") is None


def test_a_checkpoint_left_after_the_phase_completed_rolls_nothing_back(tmp_path: Path) -> None:
    """A run that died after `complete_phase` but before discarding the checkpoint: the phase
    is finished (the ledger holds no open reservation), so the next run keeps its result."""
    root = tmp_path / "p"
    store = make_project(root, ["Finished phase"])
    checkpoints = Checkpoints(store)
    before = checkpoints.take("S-0001", "refine", taken_at="2025-01-01T00:00:00.000Z")
    saved = {p.name: p.read_bytes() for p in checkpoints.root.iterdir()}
    assert before.phase == "refine" and saved
    done = run_cli(root, "run", "S-0001", "--step", "refine")
    assert done.returncode == 0, done.output
    refined = frontmatter(root, "S-0001")
    assert refined["status"] != "backlog"
    for name, data in saved.items():  # the checkpoint the dead run did not get to discard
        (checkpoints.root / name).write_bytes(data)

    again = run_cli(root, "run", "S-0001", "--step", "research")
    assert again.returncode == 0, again.output
    assert "rolled back" not in again.output
    assert not [e for e in story_events(root, "S-0001") if e["action"] == "rollback_initiated"]
    after = frontmatter(root, "S-0001")
    assert after["status"] == "in-progress" and after["research_complete"] is True
    assert checkpoints.pending("S-0001") is None


def test_a_checkpoint_without_an_open_reservation_is_dropped(tmp_path: Path) -> None:
    """Taken, but the action never began (or it was settled): nothing was cut short."""
    store, checkpoints, _ = _story(tmp_path)
    checkpoint = checkpoints.take("S-0001", "plan", taken_at="2025-01-01T00:00:00.000Z")
    assert checkpoints.interrupted("S-0001") is None
    assert not checkpoint.path.exists()
    checkpoints.take("S-0001", "plan", taken_at="2025-01-01T00:00:00.000Z")
    owner = StoryState(store)
    owner.begin_action("S-0001", Phase.PLAN)
    assert checkpoints.interrupted("S-0001") is not None
    owner.complete_phase("S-0001", Phase.PLAN)
    assert checkpoints.pending("S-0001") is not None  # still on disk: only the decision differs
    assert checkpoints.interrupted("S-0001") is None
    assert checkpoints.pending("S-0001") is None
