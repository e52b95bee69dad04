"""The state owner under real concurrency and at the limit: recoveries from several
processes at once keep the ledger's `seq` strictly increasing with no false hand-edit (the line
is appended inside the story lock), and `begin_action` at the global limit refuses without
reserving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import cli_environment
from tests.support.runs_support import (
    frontmatter,
    make_project,
    story_events,
)
from tests.support.waits import GUARD


def _ledger(root: Path, sid: str) -> list[dict[str, object]]:
    path = root / ".ai-sdlc" / "state" / "ledger" / f"{sid}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: One process recording `api_retry` on S-0001 COUNT times, once GO exists (READY says it is
#: ready); the limit is far away, so every record counts.
_RECORDER = """
import os, sys
from pathlib import Path
import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState

root, ready, go, times = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
owner = StoryState(StoryStore(root), limit=1000)
r, w = os.open(go, os.O_RDONLY), None
Path(ready).write_text("ready")
os.read(r, 1)  # the handshake: the test writes one byte to the fifo for everyone at once
for _ in range(times):
    owner.record_recovery("S-0001", "api_retry", reason="429 from the API")
"""


def test_concurrent_recoveries_keep_seq_increasing_and_report_no_hand_edit(
    tmp_path: Path,
) -> None:
    writers, times = 4, 40
    root = tmp_path / "p"
    make_project(root, ["Busy"])
    go = tmp_path / "go"
    os.mkfifo(go)
    env = cli_environment()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RECORDER,
                str(root),
                str(tmp_path / f"r{i}"),
                str(go),
                f"{times}",
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    # Each opens the fifo for reading before it says ready; one writer end releases them all.
    fd = os.open(go, os.O_WRONLY)
    for i in range(writers):
        marker = tmp_path / f"r{i}"
        while not marker.exists():
            assert procs[i].poll() is None, procs[i].communicate()[1]
            os.sched_yield()
    os.write(fd, b"g" * writers)
    os.close(fd)
    errors = [p.communicate(timeout=GUARD * 5)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, "\n".join(errors)

    entries = _ledger(root, "S-0001")
    seqs = [int(str(e["seq"])) for e in entries]
    assert seqs == sorted(set(seqs)) and len(seqs) == len(entries), seqs
    recoveries = [e for e in entries if e.get("op") == "recovery"]
    assert len(recoveries) == writers * times
    assert [e["total"] for e in recoveries] == list(range(1, writers * times + 1))
    actions = [e["action"] for e in story_events(root, "S-0001")]
    assert "counters_hand_edited" not in actions and "tamper_detected" not in actions, actions
    fm = frontmatter(root, "S-0001")
    assert fm["total_recovery_attempts"] == writers * times
    assert fm["recovery_breakdown"] == {"api_retry": writers * times}


def test_begin_action_at_the_global_limit_refuses_without_reserving(tmp_path: Path) -> None:
    """A story at the limit whose block was lifted by hand (a plain unblock keeps the counters):
    `begin_action` refuses, and nothing is reserved, so no later check counts a phantom
    attempt and no phase is logged as started."""
    root = tmp_path / "p"
    make_project(root, ["Spent"])
    owner = StoryState(StoryStore(root), limit=3)
    for _ in range(2):
        owner.record_recovery("S-0001", "api_retry")
    with pytest.raises(StoryBlockedError):
        owner.record_recovery("S-0001", "api_retry")
    owner.unblock("S-0001", reset_retries=False)
    assert frontmatter(root, "S-0001")["status"] != "blocked"
    before = _ledger(root, "S-0001")[-1]
    with pytest.raises(StoryBlockedError, match="Global recovery limit"):
        owner.begin_action("S-0001", Phase.RESEARCH)
    after = _ledger(root, "S-0001")[-1]
    assert after["open"] is None, after
    assert after["attempts"] == before["attempts"], (before, after)
    # A later owner (another process) settles nothing: the total stays at the limit.
    with pytest.raises(StoryBlockedError, match="Global recovery limit"):
        StoryState(StoryStore(root), limit=3).ensure_can_act("S-0001")
    assert _ledger(root, "S-0001")[-1]["total"] == 3
    assert frontmatter(root, "S-0001")["total_recovery_attempts"] == 3
    started = [e for e in story_events(root, "S-0001") if e["action"] == "phase_started"]
    assert started == [], started
