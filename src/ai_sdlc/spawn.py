"""Start a child process in its own session so that an interrupt can never leave it behind.

Agents, tools and verification commands each run in a session of their own, and the run kills
that process group when it stops (a timeout, Ctrl-C, a crash of the phase). `subprocess.Popen`
forks and then waits for the exec: a Ctrl-C arriving in that wait raises out of the constructor
after the child was created, so the caller never holds the object it would kill, and the child
(an agent, with its own children) runs on after the run has exited. `start_session` kills such a
child's group before the exception goes on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any


def start_session(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, start_new_session=True, **kwargs)`, leaving no child behind
    when anything (KeyboardInterrupt included) is raised while it starts."""
    proc: subprocess.Popen[bytes] = subprocess.Popen.__new__(subprocess.Popen)
    try:
        subprocess.Popen.__init__(proc, list(argv), start_new_session=True, **kwargs)
    except BaseException:
        pid = getattr(proc, "pid", None)
        if isinstance(pid, int) and pid > 0:
            # The child leads its own group: kill it with whatever it started, then reap it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        raise
    return proc
