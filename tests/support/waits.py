"""Waiting in tests on events, never on time windows.

A test waits for a handshake: a file the child writes, or a process's end as the kernel reports
it (a pidfd turns readable). A deadline only bounds a failure, generously (`GUARD`), so a loaded
machine can slow a test down but not fail it. A stand-in that only a kill may end sleeps `NEVER`
seconds, ten guards: code that waited for it instead of killing it cannot pass within the guard.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

#: Seconds before a wait fails the test (a failure guard, never a pass condition).
GUARD = 60.0
#: Seconds a stand-in sleeps when only a kill may end it.
NEVER = 600


def wait_for_pid(
    path: Path,
    timeout: float = GUARD,
    writer: subprocess.Popen[Any] | None = None,
) -> int:
    """The pid a process writes to `path`, once completely written (the file exists before
    its content: polling for existence alone can read an empty file). With `writer` (the
    process expected to get there), fail at once, with its output, when it has ended without."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text() if path.exists() else ""
        if text.strip().isdigit():
            return int(text)
        if writer is not None and writer.poll() is not None:
            out, err = writer.communicate()
            raise AssertionError(
                f"{path} never got a pid: the process ended ({writer.returncode}) first\n"
                f"stdout: {out!r}\nstderr: {err!r}"
            )
        if time.monotonic() >= deadline:
            raise AssertionError(f"{path} never got a pid (content: {text!r})" + _stacks(writer))
        time.sleep(0.02)


def _stacks(proc: subprocess.Popen[Any] | None) -> str:
    """What a still-running `proc` was doing: SIGABRT makes a Python started with
    PYTHONFAULTHANDLER=1 print every thread's stack to its stderr before it dies."""
    if proc is None or proc.poll() is not None:
        return ""
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return f"\nit was still running; its stderr:\n{err!r}"


def wait_until_gone(pid: int, what: str, timeout: float = GUARD) -> None:
    """Return once process `pid` has ended (a zombie or reaped: the kernel says so through a
    pidfd); fail naming `what` when it still runs after `timeout` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already reaped
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    assert ready, f"{what} (pid {pid}) still running {timeout:g}s later"


def pids_holding(text: str) -> list[int]:
    """Host pids of the live processes whose command line holds `text` (a path of the test's own,
    e.g. the marker a stand-in writes): a stand-in in the sandbox's PID namespace cannot name
    itself to the test (its `os.getpid()` is the namespace's: 1, 2, ...), but the host's `/proc`
    lists it with its command line."""
    wanted = text.encode()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if wanted in handle.read():  # a zombie's is empty: it has ended
                    found.append(int(entry))
        except OSError:
            continue  # ended while we looked
    return found


def host_pid(pid: int, holding: str) -> int:
    """The host pid of the process that calls itself `pid` (in its own PID namespace, or not)
    and whose command line holds `holding`; fails when there is none or more than one."""
    found = []
    for candidate in pids_holding(holding):
        try:
            with open(f"/proc/{candidate}/status") as handle:
                nspid = next(ln for ln in handle if ln.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if nspid and int(nspid[-1]) == pid:
            found.append(candidate)
    assert len(found) == 1, f"{len(found)} processes named {pid} hold {holding!r}: {found}"
    return found[0]


def wait_until_none_hold(text: str, what: str, timeout: float = GUARD) -> None:
    """Return once no process whose command line holds `text` is left (`pids_holding`)."""
    for pid in pids_holding(text):
        wait_until_gone(pid, what, timeout)
