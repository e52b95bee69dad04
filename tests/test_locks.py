"""Sidecar locks (`ai_sdlc.locks`): re-entrant per thread, exclusive between objects, threads
and processes, released by the kernel when the holder dies, never left held by a Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.locks import LockTimeout, SidecarLock


def test_reentrant_in_one_thread_and_exclusive_between_objects(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "x.lock"
    first = SidecarLock(path, timeout=0)
    with first:
        with first:  # the same object again in the same thread: a counter, not a deadlock
            assert first.is_locked
        assert first.is_locked
        with pytest.raises(LockTimeout) as caught:
            SidecarLock(path, timeout=0).acquire()
        assert caught.value.path == str(path)
    assert not first.is_locked
    with SidecarLock(path, timeout=0):  # released: free again
        pass


def test_another_thread_waits_for_the_holder(tmp_path: Path) -> None:
    lock = SidecarLock(tmp_path / "t.lock", timeout=0)
    outcome: list[str] = []

    def contender() -> None:
        try:
            lock.acquire()
        except LockTimeout:
            outcome.append("refused")
        else:
            outcome.append("acquired")
            lock.release()

    with lock:
        thread = threading.Thread(target=contender)
        thread.start()
        thread.join()
    assert outcome == ["refused"]
    thread = threading.Thread(target=contender)
    thread.start()
    thread.join()
    assert outcome == ["refused", "acquired"]


def holding_process(path: Path) -> subprocess.Popen[str]:
    """Another process that takes the lock at `path` and keeps it until killed."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from ai_sdlc.locks import SidecarLock;"
            f"SidecarLock({str(path)!r}).acquire(); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def assert_holding(holder: subprocess.Popen[str]) -> None:
    """Wait until the other process says it holds the lock."""
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "p.lock"
    holder = holding_process(path)
    try:
        assert_holding(holder)
        with pytest.raises(LockTimeout):
            SidecarLock(path, timeout=0.05).acquire()
        holder.kill()
        holder.wait(timeout=30)
        with SidecarLock(path, timeout=5):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT with Python's own handler (KeyboardInterrupt), whatever the runner set."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_and_work() -> None:
    """Ctrl-C, then enough Python calls for it to be raised at any of them."""
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100):
        sum(range(10))


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_while_a_lock_is_held_is_raised_once_it_is_let_go(tmp_path: Path) -> None:
    """Python may raise KeyboardInterrupt at the entry of the very `release` that would drop
    the lock, leaving it held (the run's clean-up then waited for it forever): while a lock is
    held, Ctrl-C waits, and is raised the moment the last lock is let go."""
    path = tmp_path / "x.lock"
    outer, inner = SidecarLock(path, timeout=0), SidecarLock(tmp_path / "y.lock", timeout=0)
    finished = []
    with pytest.raises(KeyboardInterrupt), outer:
        with inner:
            interrupt_and_work()
            finished.append("inner")
        interrupt_and_work()  # a second Ctrl-C is one interrupt, not two
        finished.append("outer")
    assert finished == ["inner", "outer"]
    assert not outer.is_locked and not inner.is_locked
    with SidecarLock(path, timeout=0):  # let go for real
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # and Ctrl-C is itself again
        interrupt_and_work()


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_still_stops_a_wait_for_another_process(tmp_path: Path) -> None:
    path = tmp_path / "w.lock"
    holder = holding_process(path)

    def ctrl_c_once_waiting(signum: int, frame: Any) -> None:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:  # shield is up
            os.kill(os.getpid(), signal.SIGINT)
        else:
            signal.setitimer(signal.ITIMER_REAL, 0.02)

    previous = signal.signal(signal.SIGALRM, ctrl_c_once_waiting)
    try:
        assert_holding(holder)
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        with pytest.raises(KeyboardInterrupt):
            SidecarLock(path, timeout=60).acquire()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        holder.kill()
        holder.wait(timeout=30)
