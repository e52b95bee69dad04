"""Start a child process in its own session so that an interrupt can never leave it behind.

Agents, tools and verification commands each run in a session of their own, and the run kills
that process group when it stops (a timeout, Ctrl-C, a crash of the phase). `subprocess.Popen`
forks and then waits for the exec: a Ctrl-C arriving in that wait raises out of the constructor
after the child was created, so the caller never holds the object it would kill, and the child
(an agent, with its own children) runs on after the run has exited. `start_session` kills such a
child's group before the exception goes on.

Python raises a Ctrl-C at the next function call, wherever that is: between `fork` returning and
`Popen` storing the pid, or after the constructor returned and before `start_session` does (the
sandbox's clean-up registration), the child was then lost all the same. So the start holds
Ctrl-C back (`locks.stop_signals_held`) from before the fork until the child is owned, and raises
it inside the clean-up's reach. Callers must enter their own `try: ... except BaseException:`
(kill the group) directly after the call, with nothing in between.

A new session also means no controlling terminal: the child cannot open `/dev/tty`, nor push
keystrokes into the user's terminal with TIOCSTI. Given a `sandbox` policy, the child runs
through the sandbox launcher (see `ai_sdlc.sandbox`) with a private temp folder, removed when
the `Popen` object goes away (or at exit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ai_sdlc.locks import stop_signals_held

if TYPE_CHECKING:
    from ai_sdlc.sandbox.policy import SandboxPolicy


def start_session(
    argv: Sequence[str], *, sandbox: SandboxPolicy | None = None, **kwargs: Any
) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, start_new_session=True, **kwargs)`, leaving no child behind
    when anything (KeyboardInterrupt included) is raised while it starts; confined by
    `sandbox` when one is given (a missing program raises FileNotFoundError as Popen does)."""
    tmpdir = None
    if sandbox is not None:
        launch = sandbox.launch(argv, env=kwargs.get("env"), cwd=kwargs.get("cwd"))
        argv, kwargs["env"], tmpdir = launch.argv, launch.env, launch.tmpdir
    proc: subprocess.Popen[bytes] = subprocess.Popen.__new__(subprocess.Popen)
    try:
        with stop_signals_held():
            subprocess.Popen.__init__(proc, list(argv), start_new_session=True, **kwargs)
            if tmpdir is not None:
                weakref.finalize(proc, _remove_tree, tmpdir)
                tmpdir = None  # the finalizer owns it now
    except BaseException:
        if tmpdir is not None:
            _remove_tree(tmpdir)
        pid = getattr(proc, "pid", None)
        if isinstance(pid, int) and pid > 0:
            # The child leads its own group: kill it with whatever it started, then reap it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        raise
    return proc


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
