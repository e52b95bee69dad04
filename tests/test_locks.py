"""Sidecar locks (`ai_sdlc.locks`): re-entrant per thread, exclusive between objects, threads
and processes, released by the kernel when the holder dies."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

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


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "p.lock"
    holder = subprocess.Popen(
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
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout):
            SidecarLock(path, timeout=0.05).acquire()
        holder.kill()
        holder.wait(timeout=30)
        with SidecarLock(path, timeout=5):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
