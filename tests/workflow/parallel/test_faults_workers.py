"""Issue 22, case 8 through the real CLI: the coordinator of `run --auto --jobs 3` is SIGKILLed
while its three workers are each in a verification. The workers (children of the fork server,
not of the coordinator) must end by themselves, their verification commands with them, and
release every story: a following `run S-0001` is not told the story is "already being run"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_environment, run_cli
from tests.support.fakes.callers import CALLER
from tests.support.git_support import git_env, make_repo  # noqa: F401  (fixture)
from tests.support.records import records_folder, records_path
from tests.support.runs_support import killed_tmpdir, only_run, run_events
from tests.support.waits import pids_holding

__all__ = ["killed_tmpdir"]  # a fixture

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

#: The verification of each story's first attempt: say "started" (its pid and its parent's, the
#: worker's) once, then wait far longer than the test may take.
SLOW_VERIFY = (
    """
import os, pathlib, sys, time
"""
    + CALLER
    + """
marker = pathlib.Path(sys.argv[1]) / (pathlib.Path.cwd().name + ".pid")
if not marker.exists():
    partial = marker.with_suffix(".tmp")
    partial.write_text(f"{os.getpid()} {caller()}")
    partial.replace(marker)
    time.sleep(600)
"""
)

#: Seconds the workers (and their commands) may take to end once the coordinator is gone.
DEADLINE = 60.0


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def started(markers: Path, count: int, proc: subprocess.Popen[str]) -> list[int]:
    """The pids of the `count` verification commands and their workers, once all have started."""
    deadline = time.monotonic() + DEADLINE
    while True:
        texts = [p.read_text().split() for p in markers.glob("*.pid")]
        if len(texts) == count and all(len(t) == 2 for t in texts):
            # The commands' own pids as this side sees them (each runs in a PID namespace of
            # its own, where its pid means nothing here), found by their argument.
            return [int(t[1]) for t in texts] + pids_holding(str(markers))
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the verifications never all started: {proc.communicate()}")
        time.sleep(0.02)


def test_workers_end_when_their_coordinator_is_killed(tmp_path: Path, killed_tmpdir: Path) -> None:
    repo = make_repo(tmp_path)
    root = repo.root
    for n in range(3):
        repo.story(f"Story {n + 1}")
    script = tmp_path / "slow_verify.py"
    script.write_text(SLOW_VERIFY)
    markers = records_path(root)
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  test: {sys.executable} {script} {markers}\n  max_parallel: 3\n"
    )
    records_folder(root)  # the verify commands' pid markers
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), "run", "--auto", "-j", "3"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=cli_environment({"TMPDIR": str(killed_tmpdir)}),
    )
    pids = started(markers, 3, coordinator)
    workers = {
        int(e["worker"].split(":")[1])
        for e in run_events(root, only_run(root)["run_id"])
        if e["action"] == "story_dispatched"
    }
    assert len(workers) == 3 and workers <= set(pids)  # each command's parent is a worker
    try:
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait(timeout=10)
        deadline = time.monotonic() + DEADLINE
        while [p for p in pids if alive(p)] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if alive(p)], "a worker or its command outlived the run"
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    again = run_cli(root, "run", "S-0001", timeout=120)
    assert "already being run" not in again.output, again.output
    assert again.returncode == 0, again.output
