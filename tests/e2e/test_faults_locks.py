"""Locks that lose their file mid-run (`git clean -xfd` removes the git-ignored `.ai-sdlc/.locks`):
a lock is only held once the file it locked is still the one at its path, so no two writers
ever hold "the same" lock on two different inodes, and no update is lost or crashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.locks import LockTimeout, SidecarLock
from tests.support.store_support import make_project, minimal, write_story

WRITERS = 4
APPENDS = 50

_WRITER = """
import sys
import time
from pathlib import Path
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState

owner = StoryState(StoryStore(Path(sys.argv[1])), limit=1000)
Path(sys.argv[2]).write_text("ready")
while not Path(sys.argv[3]).exists():
    time.sleep(0.002)
for _ in range(int(sys.argv[4])):
    owner.record_recovery("S-0001", "api_retry")
"""

_DELETER = """
import os, sys
from pathlib import Path
locks, started, stop = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
deleted = 0
started.write_text("ready")
while not stop.exists():
    try:
        names = os.listdir(locks)
    except FileNotFoundError:
        continue
    for name in names:
        try:
            os.unlink(locks / name)
            deleted += 1
        except FileNotFoundError:
            pass
print(deleted)
"""


def test_a_lock_whose_file_is_deleted_while_held_still_excludes(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with SidecarLock(path, timeout=0):
        os.unlink(path)  # `git clean -xfd` while held: a second locker makes a new file...
        with pytest.raises(LockTimeout):
            SidecarLock(path, timeout=0).acquire()  # ...but cannot take the lock
        other = subprocess.run(
            [sys.executable, "-c", _TRY_ONCE, str(path)], capture_output=True, text=True
        )
        assert other.stdout == "refused\n", other.stderr
    with SidecarLock(path, timeout=0):  # let go: free again, at the new file
        assert path.exists()


_TRY_ONCE = """
import sys
from ai_sdlc.locks import LockTimeout, SidecarLock
try:
    SidecarLock(sys.argv[1], timeout=0).acquire()
    print("acquired")
except LockTimeout:
    print("refused")
"""


def test_lock_files_deleted_during_a_run_lose_no_update(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal())
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                str(tmp_path),
                f"{tmp_path}/w{i}",
                str(go),
                str(APPENDS),
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WRITERS)
    ]
    stop = tmp_path / "stop"
    deleter = subprocess.Popen(
        [sys.executable, "-c", _DELETER, str(store.locks_dir), str(tmp_path / "d"), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    for marker in [tmp_path / f"w{i}" for i in range(WRITERS)] + [tmp_path / "d"]:
        while not marker.exists():
            for proc in [*writers, deleter]:
                assert proc.poll() is None or proc.returncode == 0, proc.args
    go.write_text("go")
    errors = [proc.communicate(timeout=300)[1] for proc in writers]
    stop.write_text("stop")
    deleted = int(deleter.communicate(timeout=60)[0])
    assert [proc.returncode for proc in writers] == [0] * WRITERS, "\n".join(errors)
    assert not any("FileNotFoundError" in e for e in errors), errors
    assert deleted > 0  # the lock files really were deleted under the writers
    text = (store.stories_dir / "S-0001" / "story.md").read_text()
    assert f"total_recovery_attempts: {WRITERS * APPENDS}\n" in text
    ledger = store.ai_dir / "state" / "ledger" / "S-0001.jsonl"
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    recoveries = [e for e in entries if e.get("op") == "recovery"]
    assert len(recoveries) == WRITERS * APPENDS
    assert recoveries[-1]["total"] == WRITERS * APPENDS
    assert sorted(e["total"] for e in recoveries) == list(range(1, WRITERS * APPENDS + 1))


def test_a_flock_counts_only_on_the_file_still_at_its_path(tmp_path: Path) -> None:
    """The re-check every flock gets (the only one where abstract sockets do not exist)."""
    from ai_sdlc.locks import _still_at

    path = tmp_path / "r.lock"
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _still_at(fd, str(path))
        os.unlink(path)
        assert not _still_at(fd, str(path))  # deleted
        path.write_text("")
        assert not _still_at(fd, str(path))  # replaced by another file
    finally:
        os.close(fd)


#: A verify command that does what `git clean -xfd` does to the locks mid-run: deletes every lock
#: file while the run holds its story lock, counts itself, and fails.
_LOCK_WIPER = """
import os, sys
from pathlib import Path
counter, locks = Path(sys.argv[1]), Path(sys.argv[2])
with counter.open("a") as fh:
    fh.write("x\\n")
deleted = 0
for name in os.listdir(locks) if locks.is_dir() else []:
    os.unlink(locks / name)
    deleted += 1
with Path(sys.argv[3]).open("a") as fh:
    fh.write(f"{deleted}\\n")
sys.exit(1)
"""


def test_a_run_whose_lock_files_are_deleted_under_it_still_counts_every_attempt(
    tmp_path: Path,
) -> None:
    """Case 7 through the real CLI: each verification deletes the lock files the run holds;
    every failed attempt is still counted, nothing crashes, and the story is blocked at exactly
    10 after at most 11 verifications."""
    from tests.conftest import run_cli
    from tests.workflow.state.test_ledger_integrity import (
        SID,
        assert_global_block,
        executions,
        new_project,
        run_until_blocked,
    )

    root = new_project(tmp_path)
    script = tmp_path / "wipe_locks.py"
    script.write_text(_LOCK_WIPER)
    counter = tmp_path / "verifications.txt"
    locks = root / ".ai-sdlc" / ".locks"
    wiped = tmp_path / "deleted.txt"
    command = " ".join([sys.executable, str(script), str(counter), str(locks), str(wiped)])
    assert run_cli(root, "config", "verify.test", command).returncode == 0

    results = run_until_blocked(root, "--no-sandbox")

    for result in results:
        assert "Traceback" not in result.output and "internal error" not in result.output
        assert result.returncode in (0, 5), result.output
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    assert 10 <= executions(counter) <= 11
    assert sum(int(n) for n in wiped.read_text().split()) >= 10  # the held locks really went
    ledger = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(set(seqs))  # no entry written twice, none lost in between
    assert entries[-1]["total"] == 10
