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
the `Popen` object goes away (or at exit), and a lifeline: a pipe whose writing end only this
process holds, so the launcher ends the child's whole tree when this process dies, however it
dies (a SIGKILLed worker or coordinator leaves no agent or test suite running).

Ending a child: `kill_session` stops the group's leader (the launcher, a subreaper: what its
descendants orphan stays under it), kills every descendant, detached ones too, then the group.
A plain `killpg(SIGKILL)` would kill the launcher first, and a `setsid` grandchild would go to
init and live on. When a sandboxed child's launcher itself died of a signal (not by our hand:
the command cannot signal it from Landlock ABI 6), whatever is still in its session is killed.
"""

from __future__ import annotations

import contextlib
import os
import select
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
    lifeline: tuple[int, int] | None = None
    cls: type[subprocess.Popen[bytes]] = subprocess.Popen
    if sandbox is not None:
        lifeline = os.pipe()  # both ends close-on-exec: no other child inherits them
        try:
            launch = sandbox.launch(
                argv, env=kwargs.get("env"), cwd=kwargs.get("cwd"), lifeline=lifeline[0]
            )
        except BaseException:
            _close(*lifeline)
            raise
        argv, kwargs["env"], tmpdir = launch.argv, launch.env, launch.tmpdir
        kwargs["pass_fds"] = (*kwargs.get("pass_fds", ()), lifeline[0])
        cls = _Launched
    proc: subprocess.Popen[bytes] = cls.__new__(cls)
    try:
        with stop_signals_held():
            cls.__init__(proc, list(argv), start_new_session=True, **kwargs)
            if tmpdir is not None:
                weakref.finalize(proc, _remove_tree, tmpdir)
                tmpdir = None  # the finalizer owns it now
            if lifeline is not None:
                os.close(lifeline[0])
                weakref.finalize(proc, _close, lifeline[1])
                lifeline = None  # the launcher holds the reading end, the finalizer ours
    except BaseException:
        if tmpdir is not None:
            _remove_tree(tmpdir)
        if lifeline is not None:
            _close(*lifeline)
        pid = getattr(proc, "pid", None)
        if isinstance(pid, int) and pid > 0:
            # The child leads its own group: kill it with whatever it started, then reap it.
            kill_session(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        raise
    return proc


def kill_session(pid: int) -> None:
    """SIGKILL the process group `pid` leads and every descendant of `pid`, detached ones
    included. Everything is stopped first, leader (the launcher, a subreaper, so it keeps the
    orphans) to leaves, until no new process shows up: a stopped process cannot fork, so none
    slips away to init while the others are killed."""
    stopped: set[int] = set()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGSTOP)
    for _ in range(_MAX_PASSES):
        new = [p for p in _descendants(pid) if p not in stopped]
        if not new:
            break
        for child in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGSTOP)
        stopped.update(new)
    for child in (*stopped, *_descendants(pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


#: Bound on `kill_session`'s stop-and-look passes (a fork bomb still ends: the group kill).
_MAX_PASSES = 50


def wait_for_exit(process: subprocess.Popen[Any], timeout: float) -> int:
    """`process.wait(timeout=timeout)` without its sleeps: CPython waits for a child with a
    timeout by looking, sleeping up to 50 ms between looks, so a sandboxed verification step
    ended about 7 ms after its launcher (measured); a pidfd (Linux 5.3+) is readable the moment
    the child ends. Raises `subprocess.TimeoutExpired` as `wait` does."""
    if process.returncode is None and timeout > 0:
        try:
            pidfd = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # another OS, an older kernel
            return process.wait(timeout=timeout)
        try:
            ready = select.select([pidfd], [], [], timeout)[0]
        finally:
            os.close(pidfd)
        if not ready:
            raise subprocess.TimeoutExpired(process.args, timeout)
    return process.wait(timeout=timeout)


class _Launched(subprocess.Popen[bytes]):
    """A child started through the sandbox launcher: when the launcher was killed by a signal,
    what is left of its session is killed with it (the command itself got SIGKILL from its
    `PR_SET_PDEATHSIG`; its grandchildren did not)."""

    def _handle_exitstatus(self, *args: Any, **kwargs: Any) -> None:
        super()._handle_exitstatus(*args, **kwargs)  # type: ignore[misc]
        if self.returncode is not None and self.returncode < 0:
            for pid in _in_session(self.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)


def _stats() -> dict[int, list[bytes]]:
    """Every live process's /proc/<pid>/stat fields after the command name (zombies left
    out: they are dead, only not yet reaped)."""
    found: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 3 and fields[0] != b"Z":
            found[int(name)] = fields
    return found


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, fields in _stats().items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _in_session(leader: int) -> list[int]:
    """Live processes whose process group or session `leader` leads."""
    return [
        pid
        for pid, fields in _stats().items()
        if leader in (int(fields[2]), int(fields[3])) and pid != os.getpid()
    ]


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _remove_tree(path: str) -> None:
    from ai_sdlc.fsutil import remove_tree

    remove_tree(path)
