"""Issue 22, case 6 through the real CLI: the disk fills up during verification.

The project (a git repository with a story worktree) lives on a 2 MB tmpfs; `verify.test` is a
script that counts itself, fills the file system and fails. Every run then meets a full disk
somewhere after the verification (capturing the failed attempt, the ledger, `story.md`,
`events.jsonl`, the patch): it must say `disk full: <path>` and exit 1 with no traceback, the
failed attempt must be counted all the same (now, or by the next run), and every journal must
still parse line by line. Each verification leaves a different amount of room (0 to 32 KB), so
the writes that fail, or are cut short, differ from run to run. The story starts at a
hand-edited 4: the six verifications left to the limit leave each of the six amounts once.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.workflow.state.events import append_event, read_events
from tests.conftest import run_cli
from tests.support.git_support import git_env, make_repo  # noqa: F401 (fixture)
from tests.support.records import records_folder
from tests.workflow.state.test_ledger_integrity import near_the_limit

SID = "S-0001"
#: The story's hand-edited count: 10 - START failed verifications reach the limit.
START = 4
LIMIT_10 = "Global recovery limit exceeded (10/10)"

#: Count the execution, fill the file system holding `fill`, leave `room` bytes of it, fail.
FILL_SCRIPT = r"""
import os, sys
counter, fill = sys.argv[1], sys.argv[2]
with open(counter, "a") as fh:
    fh.write("ran\n")
n = sum(1 for _ in open(counter))
room = (0, 4096, 8192, 16384, 32768, 2048)[n % 6]
fd = os.open(fill + str(n), os.O_WRONLY | os.O_CREAT, 0o644)
chunk = b"x" * 4096
try:
    while True:
        os.write(fd, chunk)
except OSError:
    pass
size = os.fstat(fd).st_size
os.ftruncate(fd, max(0, size - room))
os.close(fd)
print("FAILED tests/test_calc.py::test_multiply - assert 9 == 20")
sys.exit(1)
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs mounted for the test (root only, as here and in CI), unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a journal, each of which must be one whole JSON object."""
    if not path.exists():
        return []
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"{path} ends in a torn line: {data[-200:]!r}"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def free(mount: Path) -> None:
    for filler in mount.glob("space/fill*"):
        filler.unlink()


@pytest.mark.usefixtures("git_env")
def test_a_disk_filled_during_verification_loses_no_count(tmp_path: Path, small_disk: Path) -> None:
    repo = make_repo(small_disk, remote=False)
    root = repo.root
    sid = repo.story("Add multiply")
    assert sid == SID
    repo.commit_all("add the story")
    script = tmp_path / "fill.py"
    script.write_text(FILL_SCRIPT)
    # The counter off the small disk; the files that fill it in a folder of their own there,
    # both named in the project's sandbox.writable (the real sandbox: nothing else is widened).
    counter = records_folder(root, tmp_path / "records") / "verifications.txt"
    fill = records_folder(root, small_disk / "space") / "fill"
    command = shlex.join([sys.executable, str(script), str(counter), str(fill)])
    assert run_cli(root, "config", "verify.test", command).returncode == 0
    # the implementation's verifications fill the disk: no baseline run before them
    assert run_cli(root, "config", "verify.baseline", "false").returncode == 0
    near_the_limit(root, START)

    story = root / ".ai-sdlc" / "stories" / SID
    ledger = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    disk_full_runs = 0
    last = None
    for _ in range(40):
        last = run_cli(root, "run", SID, subprocess=True, timeout=180)
        assert "Traceback" not in last.output, last.output
        assert "internal error" not in last.output, last.output
        if last.returncode == 1:
            assert "disk full: " in last.stderr, last.output
            disk_full_runs += 1
        # whatever failed, every journal is whole lines of JSON
        jsonl(ledger)
        jsonl(story / "events.jsonl")
        free(small_disk)
        if last.returncode == 5 and LIMIT_10 in " ".join(last.output.split()):
            break
        if last.returncode == 5:  # a phase limit: a human unblocks, as an unattended loop would
            assert run_cli(root, "unblock", SID).returncode == 0
    assert last is not None and LIMIT_10 in " ".join(last.output.split()), last
    assert disk_full_runs >= 3  # the disk really was full after most verifications

    verifications = len(counter.read_text().splitlines())
    entries = jsonl(ledger)
    final = entries[-1]
    assert final["total"] == 10
    assert sum(final["breakdown"].values()) == 10
    assert final["breakdown"] == {"implementation_retry": 10}
    # Every implementation attempt started was counted once: none released, none twice (one
    # that met the full disk before its verification, in the agent's own writes, counts too).
    left = 10 - START
    assert final["attempts"].get("implement", 0) + final["attempts"].get("rework", 0) == left
    assert left - disk_full_runs <= verifications <= left
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(set(seqs))  # no entry written twice, none glued to another
    # No count lost: each entry starts from at least the figures the one before it ended with
    # (an entry whose append met the full disk may be missing, its count carried by the next),
    # and none counts more than one recovery at once.
    for a, b in itertools.pairwise(entries):
        assert b["prev_total"] >= a["total"] and b["total"] - b["prev_total"] in (0, 1), (a, b)
    show = run_cli(root, "show", SID, "--json")
    fm = json.loads(show.stdout)["frontmatter"]
    assert fm["total_recovery_attempts"] == 10
    assert fm["recovery_breakdown"]["implementation_retry"] == 10
    assert fm["status"] == "blocked"
    story_events = jsonl(story / "events.jsonl")
    assert not [e for e in story_events if e["action"] == "tamper_detected"]  # a full disk is not
    recorded = [e for e in story_events if e["action"] == "recovery"]
    assert len(recorded) <= left  # an event may be missing (its write failed), never doubled
    assert len({e["counters"]["total_recovery_attempts"] for e in recorded}) == len(recorded)


def test_an_events_line_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    folder = tmp_path / "story"
    folder.mkdir()
    path = folder / "events.jsonl"
    path.write_bytes(b'{"action": "a"}\n{"action": "torn", "x": "inco')  # a crash mid-append
    assert [e["action"] for e in read_events(folder)] == ["a"]  # the torn tail is skipped
    append_event(folder, {"action": "b"})
    assert path.read_bytes() == b'{"action": "a"}\n{"action": "b"}\n'  # cut, never glued
    # a line glued to a torn one by an older version: the whole event after it is recovered
    path.write_bytes(b'{"action": "a"}\n{"action": "to{"action": "c"}\n')
    assert [e["action"] for e in read_events(folder)] == ["a", "c"]


def test_a_failed_append_is_cut_back(tmp_path: Path, small_disk: Path) -> None:
    folder = small_disk / "story"
    folder.mkdir()
    append_event(folder, {"action": "a"})
    before = (folder / "events.jsonl").read_bytes()
    with contextlib.suppress(OSError), open(small_disk / "fill", "wb") as fh:
        while True:
            fh.write(b"x" * 4096)
            fh.flush()
    with pytest.raises(OSError) as caught:  # far more than the page it could still take
        append_event(folder, {"action": "big", "text": "y" * 200_000})
    assert caught.value.filename == str(folder / "events.jsonl")
    assert (folder / "events.jsonl").read_bytes() == before
    os.unlink(small_disk / "fill")
    append_event(folder, {"action": "b"})
    assert [e["action"] for e in read_events(folder)] == ["a", "b"]


def test_a_ref_git_cannot_write_for_a_full_disk_is_a_full_disk(small_disk: Path) -> None:
    """git says only "couldn't write '<ref>.lock'" when the lock it created cannot take the
    object id (the errno is lost): the ledger's ref write reports that as a full disk."""
    from ai_sdlc.errors import disk_full
    from ai_sdlc.git.blobrefs import BlobRefs
    from ai_sdlc.git.run import git

    git(small_disk, "init", "-q", str(small_disk / "repo"))
    refs = BlobRefs(small_disk / "repo" / ".git")
    ref = "refs/ai-sdlc/ledger/S-0001"
    refs.write(ref, b"first")
    refs.write(ref, b"second")  # both blobs stored: going back to the first needs only the ref
    with contextlib.suppress(OSError), open(small_disk / "fill", "wb") as fh:
        while True:
            fh.write(b"x" * 4096)
            fh.flush()
    with pytest.raises(OSError) as caught:
        refs.write(ref, b"first")
    found = disk_full(caught.value, small_disk)
    assert found is not None, caught.value
    assert found.path.endswith(f"{ref}.lock"), found.path
    os.unlink(small_disk / "fill")
    refs.write(ref, b"first")  # room again: the ref moves, nothing left behind by the check
    assert refs.holds(ref, b"first")
    assert not list((small_disk / "repo" / ".git" / "refs" / "ai-sdlc" / "ledger").glob(".*"))


def test_what_counts_as_a_full_disk() -> None:
    import errno

    from ai_sdlc.errors import StoryBlockedError, disk_full
    from ai_sdlc.git.run import GitError
    from ai_sdlc.providers.base import ProviderRequestError

    quota = disk_full(OSError(errno.EDQUOT, "Disk quota exceeded", "/p/.ai-sdlc/x"))
    assert quota is not None and quota.message == "disk full: /p/.ai-sdlc/x"
    failing = disk_full(OSError(errno.EIO, "Input/output error", "/p/y"), "/p")
    assert failing is not None and "check that disk" in str(failing.hint)
    git_said = GitError(
        "git add failed: error: unable to create '/p/.git/index.lock': No space left on device"
    )
    found = disk_full(git_said, "/p")
    assert found is not None and found.path == "/p/.git/index.lock"
    # git's own words when the index a `status` refreshes cannot be written
    refreshed = GitError(
        "`git status` failed (exit 128): fatal: sha1 file '/p/.git/worktrees/w/index.lock' "
        "write error. Out of diskspace"
    )
    found = disk_full(refreshed, "/p")
    assert found is not None and found.path == "/p/.git/worktrees/w/index.lock"
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise ProviderRequestError("cannot write 'a.py' in the workspace") from exc
    except ProviderRequestError as wrapped:
        assert disk_full(wrapped, "/p") is not None  # raised *from* a full disk: it is one
    # A verification that printed "No space left on device" is a failed verification.
    blocked = StoryBlockedError("Implementation failed: No space left on device", story_id="S-1")
    assert disk_full(blocked) is None
    assert disk_full(OSError(errno.EACCES, "Permission denied", "/p")) is None
    assert disk_full(ValueError("No space left on device")) is None


#: Count the execution; the first time, leave the worktree's index locked (as a crashed git
#: would), so putting the failed attempt's worktree back fails; then fail.
LOCK_INDEX = r"""
import os, subprocess, sys
counter = sys.argv[1]
with open(counter, "a") as fh:
    fh.write("ran\n")
if sum(1 for _ in open(counter)) == 1:
    git_dir = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True,
                             text=True, check=True).stdout.strip()
    open(os.path.join(git_dir, "index.lock"), "w").close()
print("FAILED tests/test_calc.py::test_multiply - assert 9 == 20")
sys.exit(1)
"""


@pytest.mark.usefixtures("git_env")
def test_a_failed_attempt_whose_changes_cannot_be_put_back_is_still_counted(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    repo.story("Add multiply")
    repo.commit_all("add the story")
    script = tmp_path / "lock_index.py"
    script.write_text(LOCK_INDEX)
    counter = records_folder(root) / "verifications.txt"
    # The stand-in of a crashed git leaves the worktree's index locked: the worktrees' git
    # folders (in the main git folder) are named in sandbox.writable for it, as git made them.
    records_folder(root, root / ".git" / "worktrees")
    command = shlex.join([sys.executable, str(script), str(counter)])
    assert run_cli(root, "config", "verify.test", command).returncode == 0
    # the implementation's first verification locks the index: no baseline run before it
    assert run_cli(root, "config", "verify.baseline", "false").returncode == 0
    first = run_cli(root, "run", SID)
    assert first.returncode == 1, first.output
    assert "index.lock" in first.stderr and "internal error" not in first.stderr, first.output
    assert len(counter.read_text().splitlines()) == 1
    fm = json.loads(run_cli(root, "show", SID, "--json").stdout)["frontmatter"]
    assert fm["total_recovery_attempts"] == 1  # counted before the roll-back failed
    assert fm["recovery_breakdown"] == {"implementation_retry": 1}
    for lock in (root / ".git" / "worktrees").glob("*/index.lock"):
        lock.unlink()
    again = run_cli(root, "run", SID)  # goes on from there: the next failures count on top
    assert again.returncode == 5, again.output
    fm = json.loads(run_cli(root, "show", SID, "--json").stdout)["frontmatter"]
    assert fm["total_recovery_attempts"] == len(counter.read_text().splitlines())
