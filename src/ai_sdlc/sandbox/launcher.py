"""The sandbox launcher: stay outside the sandbox, restrict only the command it starts.

Run as `python -I -S -c <this source> [--lifeline FD] [--rw PATH]... -- EXECUTABLE ARGV0
[ARG]...` (`-I -S`: no site-packages, no environment-driven imports, ~25 ms). Its code comes
from ai-sdlc's memory (`backend.LAUNCH_CODE`, read once when ai-sdlc starts), never from a file
a child could have changed since: an installation hard-linked into a writable cache (uv) would
otherwise let one verify command switch the sandbox off for every later child.

It makes itself the "subreaper" of everything the command starts, forks, and only the forked
child restricts itself with Landlock and becomes the command. The launcher therefore sits
outside the command's Landlock domain, so from ABI 6 the scoped signals keep the command and
everything it starts from signalling it: a detached grandchild can no longer kill the launcher
and live on unswept. When the command ends, every process it left behind is killed, those that
detached with a new session (`setsid`, a double fork) too: they are re-parented to the
launcher, not to init. Then the launcher ends as the command did (its exit status, or the
signal that killed it).

Lifelines, both ways: the command gets `PR_SET_PDEATHSIG` (SIGKILL when the launcher dies), and
the launcher watches `--lifeline FD`, a pipe whose other end only the process that started it
holds: end-of-file means that process died (however: a SIGKILLed worker or coordinator), and
the launcher kills everything under it and ends, instead of running on unowned.

Fails closed: when the restriction cannot be applied the command does not run (exit 126 and a
line on stderr). Only the standard library and the `landlock` module are imported.
"""

import contextlib
import os
import select
import signal
import sys
import time

#: The exit status when the sandbox cannot be applied (the shell's "cannot execute").
EXIT_CANNOT_SANDBOX = 126


def parse(args: list[str]) -> tuple[list[str], int | None, str, list[str]]:
    """(writable paths, lifeline fd or None, executable, argv) from the launcher's arguments."""
    writable: list[str] = []
    lifeline: int | None = None
    i = 0
    while i < len(args) and args[i] != "--":
        if args[i] not in ("--rw", "--lifeline") or i + 1 >= len(args):
            raise ValueError(f"unexpected launcher argument {args[i]!r}")
        if args[i] == "--rw":
            writable.append(args[i + 1])
        else:
            lifeline = int(args[i + 1])
        i += 2
    rest = args[i + 1 :]
    if len(rest) < 2:
        raise ValueError("no command after '--'")
    return writable, lifeline, rest[0], rest[1:]


def main() -> None:
    import landlock  # type: ignore[import-not-found]  # put in sys.modules by LAUNCH_CODE

    try:
        writable, lifeline, executable, argv = parse(sys.argv[1:])
    except ValueError as exc:
        _refuse(exc)
        return
    if not _subreaper():  # no subreaper here: restrict this process and become the command
        try:
            landlock.restrict(writable)
        except OSError as exc:
            _refuse(exc)
        _exec(executable, argv)
    # The group's signals reach the command itself; the launcher outlives it to sweep.
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _FORWARDED}
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != launcher:  # the launcher died before the line above
            os._exit(EXIT_CANNOT_SANDBOX)
        if lifeline is not None:
            os.close(lifeline)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        try:
            landlock.restrict(writable)
        except OSError as exc:
            _refuse(exc)
        _exec(executable, argv)
    # Not a writer of the command's output: its pipes close when the command's processes do.
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    status = _wait(pid, lifeline)
    _sweep()
    if status is None:  # whoever started us is gone: nobody reads our status
        os._exit(1)
    if os.WIFSIGNALED(status):
        killed = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(killed, signal.SIG_DFL)
        os.kill(os.getpid(), killed)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128)


#: Signals a terminal or ai-sdlc sends the command's process group (the command gets them).
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _refuse(exc: Exception) -> None:
    sys.stderr.write(f"[ai-sdlc] sandbox: cannot apply: {exc}; the command did not run\n")
    sys.stderr.flush()
    os._exit(EXIT_CANNOT_SANDBOX)


def _exec(executable: str, argv: list[str]) -> None:
    try:
        os.execv(executable, argv)
    except OSError as exc:
        sys.stderr.write(f"[ai-sdlc] cannot run {argv[0]!r}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        os._exit(127 if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_SANDBOX)


def _prctl(option: int, value: int) -> bool:
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _subreaper() -> bool:
    """Make orphans of our descendants ours (Linux 3.4+); False where that is not possible."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _wait(pid: int, lifeline: int | None) -> int | None:
    """The command's wait status, reaping whatever else ends meanwhile; None when the
    lifeline reads end-of-file first (the process that started us died)."""
    if lifeline is None:
        while True:
            try:
                done, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return 0
            if done == pid:
                return status
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)  # a SIGCHLD between waitpid and select still wakes select
    while True:
        while True:
            try:
                done, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if done == pid:
                return status
            if done == 0:
                break
        ready, _, _ = select.select([wake_r, lifeline], [], [])
        if lifeline in ready:  # nothing is ever written: readable means end-of-file
            return None
        os.read(wake_r, 512)


def _sweep() -> None:
    """Kill and reap every remaining descendant: our children, and theirs as they are
    re-parented to us, until none is left."""
    me = os.getpid()
    while True:
        children = _children(me)
        for child in children:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        try:
            reaped, _status = os.waitpid(-1, 0 if children else os.WNOHANG)
        except ChildProcessError:
            return
        if not children and reaped == 0:
            time.sleep(0.001)  # one re-parented while we looked: look again


def _children(parent: int) -> list[int]:
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(name))
    return found


if __name__ == "__main__":
    main()
