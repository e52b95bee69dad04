"""A Ctrl-C that lands while a child is being started leaves no child behind.

`subprocess.Popen` forks, then waits for the exec; an interrupt in that wait raises out of the
constructor after the child exists, so the caller cannot kill it (an agent would run on after
the run exited: tests/test_interrupts.py's between-phase points hit this on a loaded machine).
Here the child is held before its exec (a pre-exec hook that records its pid and sleeps), and
the interrupt is raised in the parent only once that pid is on disk: no timing window.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.spawn import start_session


@contextmanager
def interrupt_once_written(marker: Path) -> Iterator[None]:
    """SIGALRM every 20 ms until `marker` holds a pid, then a KeyboardInterrupt."""

    def handler(signum: int, frame: Any) -> None:
        if marker.exists() and marker.read_text().strip():
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.02)

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def held_before_exec(marker: Path) -> Callable[[], None]:
    def hook() -> None:  # runs in the child, between fork and exec
        marker.write_text(str(os.getpid()))
        time.sleep(30)

    return hook


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(os.name != "posix", reason="sessions and pre-exec hooks are POSIX")
def test_an_interrupt_while_a_child_starts_kills_and_reaps_it(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    started = time.monotonic()
    with interrupt_once_written(marker), pytest.raises(KeyboardInterrupt):
        start_session(
            [sys.executable, "-c", "pass"],
            stdout=subprocess.DEVNULL,
            preexec_fn=held_before_exec(marker),
        )
    pid = int(marker.read_text())
    assert not alive(pid), f"child {pid} outlived the interrupted start"
    assert time.monotonic() - started < 20  # killed, not waited for


@pytest.mark.skipif(os.name != "posix", reason="sessions and pre-exec hooks are POSIX")
def test_plain_popen_would_leave_the_child_running(tmp_path: Path) -> None:
    """What start_session guards against, shown on subprocess.Popen itself."""
    marker = tmp_path / "pid"
    with interrupt_once_written(marker), pytest.raises(KeyboardInterrupt):
        subprocess.Popen(
            [sys.executable, "-c", "pass"],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=held_before_exec(marker),
        )
    pid = int(marker.read_text())
    try:
        assert alive(pid)
    finally:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_child_that_starts_is_in_its_own_session() -> None:
    proc = start_session(
        [sys.executable, "-c", "import os; print(os.getsid(0))"], stdout=subprocess.PIPE
    )
    out, _ = proc.communicate(timeout=60)
    assert int(out) == proc.pid != os.getsid(0)
