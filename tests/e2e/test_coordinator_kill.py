"""Issue 32, case 5, through the real CLI: the coordinator of `run --auto --jobs 2` is SIGKILLed
while one worker is in a verification (S-0001) and the other in an agent call (S-0002). Within
5 s nothing of the run may be left: no worker, no agent, no verification command, no sandbox
launcher, no multiprocessing fork server or resource tracker (every process whose command line,
environment or working folder names the test's folder is looked for in /proc), and the next
`run S-0001` starts (no story lock is left behind).

The handshake is two marker files, one per stand-in, written once each is running in its
implement phase; each waits only the first time, so the following `run S-0001` goes through.
Each waiting stand-in has first started a detached (`setsid`, double-forked) grandchild that
never ends: it must be gone as well. The run's HOME is a throwaway one holding fake keys and
tool folders: it is unchanged afterwards, and the count of both stories is honest.
`--max-attempts 2` is used up by those two attempts: the coordinator has asked its workers to
stop after the phase in flight, so a worker does not get the lifeline's Ctrl-C and must end
all the same.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_environment, run_cli
from tests.sandbox.test_launcher_reach import alive, kill_all, processes_under
from tests.support.attack_support import assert_counted_honestly, home_sums, make_home
from tests.support.git_support import git, git_env, make_repo  # noqa: F401  (fixture)
from tests.support.runs_support import killed_tmpdir

__all__ = ["killed_tmpdir"]  # a fixture

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]

#: Seconds within which everything of the killed run must be gone (the issue's promise).
PROMISE = 5.0

#: `stand_in.py ROLE MARKERS [PHASE]`: the command agent (ROLE agent) and verify.test (ROLE
#: verify). S-0002's first agent call and S-0001's first verification say so, then wait.
STAND_IN = r"""
import os, pathlib, sys, time
role, markers = sys.argv[1], pathlib.Path(sys.argv[2])
story = pathlib.Path.cwd().name[:6]
phase = sys.argv[3] if role == "agent" else "implement"
waits = phase == "implement" and (role, story) in (("agent", "S-0002"), ("verify", "S-0001"))
marker = markers / (role + ".pid")
if waits and not marker.exists():
    # A detached grandchild (setsid, double fork) that would go on forever: it must end too.
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            (markers / (role + "-grandchild.pid")).write_text(str(os.getpid()))
            os.close(write_end)
            while True:
                time.sleep(0.05)
        os._exit(0)
    os.close(write_end)
    os.wait()
    os.read(read_end, 1)  # end of file: the grandchild has said where it is
    partial = marker.with_suffix(".tmp")
    partial.write_text(str(os.getpid()))
    partial.replace(marker)
    while True:
        time.sleep(0.05)
if role == "agent":
    sys.stdin.read()
    if phase in ("implement", "rework"):
        pathlib.Path("work.txt").write_text(phase + "\n")
    print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
else:
    print("1 passed in 0.01s")
"""


def test_a_killed_coordinator_leaves_nothing_running_within_5_s(
    tmp_path: Path, killed_tmpdir: Path
) -> None:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    home, state = make_home(tmp_path / "home")
    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    agent = [sys.executable, str(script), "agent", str(markers), "{phase}"]
    verify = f"{sys.executable} {script} verify {markers}"
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n  baseline: false\n"
        f"sandbox:\n  writable: [{json.dumps(str(markers))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    repo.story("First")
    repo.story("Second")
    env = cli_environment(
        {
            "AI_SDLC_PROVIDER": "command",
            "TEST_RUN_FOLDER": str(tmp_path),  # names every process of the run in /proc
            "HOME": str(home),
            "AI_SDLC_STATE_HOME": str(state),
            "TMPDIR": str(killed_tmpdir),
        }
    )
    sums = home_sums(home, state)
    users = {k: env[k] for k in ("AI_SDLC_PROVIDER", "HOME", "AI_SDLC_STATE_HOME")}
    command = ["run", "--auto", "--jobs", "2", "--max-attempts", "2"]
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), *command],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not all((markers / f"{r}.pid").exists() for r in ("agent", "verify")):
            if coordinator.poll() is not None:
                raise AssertionError(coordinator.communicate()[1])
            time.sleep(0.01)
        stand_ins = [int((markers / f"{r}.pid").read_text()) for r in ("agent", "verify")]
        assert all(alive(p) for p in stand_ins)
        run = processes_under(tmp_path)
        assert len(run) >= 7, run  # coordinator, fork server, tracker, 2 workers, 2 launchers...
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait(timeout=10)
        killed = time.monotonic()
        left = processes_under(tmp_path)
        while left and time.monotonic() - killed < PROMISE:
            time.sleep(0.05)
            left = processes_under(tmp_path)
        described = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in left if alive(p)}
        assert not left, f"left {time.monotonic() - killed:.1f}s after the kill: {described}"
    finally:
        coordinator.kill()
        coordinator.communicate()
        kill_all(processes_under(tmp_path))
    assert (markers / "agent-grandchild.pid").exists()
    assert (markers / "verify-grandchild.pid").exists()
    again = run_cli(root, "run", "S-0001", env=users, timeout=120)
    assert "already being run" not in again.output, again.output
    assert again.returncode == 0, again.output
    assert home_sums(home, state) == sums
    assert assert_counted_honestly(root, "S-0001")["status"] == "done"
    assert_counted_honestly(root, "S-0002")
