"""Waiting in tests on events, never on time windows.

A test waits for a handshake: a file the child writes, or a process's end as the kernel reports
it (a pidfd turns readable). A deadline only bounds a failure, generously (`GUARD`), so a loaded
machine can slow a test down but not fail it. A stand-in that only a kill may end sleeps `NEVER`
seconds, ten guards: code that waited for it instead of killing it cannot pass within the guard.
"""

from __future__ import annotations

import os
import select

#: Seconds before a wait fails the test (a failure guard, never a pass condition).
GUARD = 60.0
#: Seconds a stand-in sleeps when only a kill may end it.
NEVER = 600


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
