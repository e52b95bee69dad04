"""Cheap durability of a story run, and what it keeps: checkpoints are not fsynced, so the
attempt's reservation names its checkpoint and only that one is ever restored; an artifact and
`story.md` written in one transaction share one folder fsync; a transaction's events are one
append."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.checkpoint import Checkpoints
from ai_sdlc.workflow.state.events import read_events
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import run_cli
from tests.support.runs_support import frontmatter, make_project, story_events

T0 = "2025-01-01T00:00:00.000Z"
T1 = "2025-01-01T00:00:05.000Z"


def _ledger(root: Path, sid: str) -> list[dict[str, object]]:
    path = root / ".ai-sdlc" / "state" / "ledger" / f"{sid}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_reservation_of_a_run_names_the_checkpoint_taken_for_it(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Tagged"])
    result = run_cli(root, "run", "S-0001")
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0001")["status"] == "done"
    reserved = [e for e in _ledger(root, "S-0001") if e["op"] == "reserve"]
    assert [e["open"]["phase"] for e in reserved] == [  # type: ignore[index]
        "refine",
        "research",
        "plan",
        "implement",
        "review",
    ]
    for entry in reserved:
        open_ = entry["open"]
        assert isinstance(open_, dict)
        phase, _, taken_at = str(open_["checkpoint"]).partition("@")
        assert phase == open_["phase"] and taken_at.endswith("Z")


def test_a_checkpoint_another_reservation_names_is_never_restored(tmp_path: Path) -> None:
    """A power loss after the plan attempt's reservation reached the disk but before its
    (unsynced) checkpoint did: the research checkpoint, discarded but not yet gone from the
    disk, is still there. It must not roll the story back to before research."""
    store = make_project(tmp_path / "p", ["Story"])
    checkpoints = Checkpoints(store)
    older = checkpoints.take("S-0001", "research", taken_at=T0)
    owner = StoryState(store)
    owner.begin_action("S-0001", Phase.RESEARCH, checkpoint=older.tag)
    owner.complete_phase("S-0001", Phase.RESEARCH, changes={"research_complete": True})
    saved = older.path.read_bytes()
    checkpoints.discard("S-0001")
    newer = checkpoints.take("S-0001", "plan", taken_at=T1)
    owner.begin_action("S-0001", Phase.PLAN, checkpoint=newer.tag)
    assert checkpoints.interrupted("S-0001") is not None  # its own reservation: restorable
    older.path.write_bytes(saved)  # what the disk holds after the power loss

    assert checkpoints.interrupted("S-0001") is None
    assert not older.path.exists()  # dropped, as an incomplete one is
    assert store.get("S-0001").frontmatter["research_complete"] is True


def test_after_a_lost_checkpoint_the_next_run_counts_the_attempt_and_rolls_nothing_back(
    tmp_path: Path,
) -> None:
    """End to end: the same power loss, then `ai-sdlc run`."""
    root = tmp_path / "p"
    store = make_project(root, ["Story"])
    done = run_cli(root, "run", "S-0001", "--step", "refine")
    assert done.returncode == 0, done.output
    checkpoints = Checkpoints(store)
    checkpoints.take("S-0001", "refine", taken_at=T0)  # an older one, back after the loss
    StoryState(store).begin_action("S-0001", Phase.RESEARCH, checkpoint=f"research@{T1}")

    again = run_cli(root, "run", "S-0001", "--step", "research")
    assert again.returncode == 0, again.output
    assert "rolled back" not in again.output
    events = story_events(root, "S-0001")
    assert not [e for e in events if e["action"] == "rollback_initiated"]
    stale_counted = [e for e in events if e["action"] == "recovery" and e.get("stale")]
    assert len(stale_counted) == 1
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "in-progress" and fm["research_complete"] is True
    assert fm["total_recovery_attempts"] == 1
    assert checkpoints.pending("S-0001") is None


Synced = list[tuple[bool, int, str]]


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Iterator[Synced]:
    """(is a folder, inode, path) of every fsync while the test runs."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to name what is fsynced")
    calls: Synced = []
    real = os.fsync

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        calls.append((stat.S_ISDIR(info.st_mode), info.st_ino, os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    yield calls


def _phase_with_artifact(store: StoryStore, changes: dict[str, object]) -> None:
    owner = StoryState(store)
    owner.begin_action("S-0001", Phase.PLAN)
    owner.complete_phase(
        "S-0001", Phase.PLAN, changes=changes, artifact=("plan.md", "# Plan\n\n1. Go.\n")
    )


@pytest.mark.parametrize("story_changes", [True, False], ids=["story-written", "story-same"])
def test_an_artifact_is_durable_with_one_folder_fsync_per_transaction(
    tmp_path: Path, fsynced: Synced, story_changes: bool
) -> None:
    store = make_project(tmp_path / "p", ["Story"])
    folder = store.folder("S-0001")
    if not story_changes:
        with store.edit("S-0001") as story:
            story.frontmatter["plan_complete"] = True
    fsynced.clear()
    _phase_with_artifact(store, {"plan_complete": True})

    story_folder = os.stat(folder).st_ino
    folder_syncs = [ino for is_dir, ino, _ in fsynced if is_dir and ino == story_folder]
    assert len(folder_syncs) == 1  # story.md's write, or the transaction's own when unchanged
    assert any(path.endswith(".plan.md") or ".plan.md." in path for _, _, path in fsynced)
    assert (folder / "plan.md").read_text() == "# Plan\n\n1. Go.\n"
    assert store.get("S-0001").frontmatter["plan_complete"] is True
    assert any(e["action"] == "phase" for e in read_events(folder))


def test_a_run_writes_no_checkpoint_with_fsync(tmp_path: Path, fsynced: Synced) -> None:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    checkpoints_folder = root / ".ai-sdlc" / "state" / "checkpoints"
    result = run_cli(root, "run", "S-0001", "--step", "refine")
    assert result.returncode == 0, result.output
    assert checkpoints_folder.is_dir()  # one was taken (and discarded)
    assert not [path for _, _, path in fsynced if "checkpoints" in path]
    synced = " ".join(path for _, _, path in fsynced)
    assert "/state/ledger/S-0001.jsonl" in synced and "/stories/S-0001" in synced


def test_the_events_of_one_transaction_are_one_append_each_line_whole(tmp_path: Path) -> None:
    store = make_project(tmp_path / "p", ["Story"])
    folder = store.folder("S-0001")
    owner = StoryState(store)
    owner.begin_action("S-0001", Phase.IMPLEMENT)
    owner.fail_attempt(
        "S-0001", Phase.IMPLEMENT, "implementation_retry", outcome="failed", feedback="E boom"
    )
    lines = (folder / "events.jsonl").read_text().splitlines()
    actions = [json.loads(line)["action"] for line in lines]
    assert actions[-2:] == ["phase", "recovery"]
    with (folder / "events.jsonl").open("a") as fh:  # a crash tore the last append
        fh.write('{"time": "x", "action": "pha')
    assert [e["action"] for e in read_events(folder)] == actions
