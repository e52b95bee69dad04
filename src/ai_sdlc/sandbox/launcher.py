"""The sandbox launcher: restrict this process with Landlock, then become the command.

Run as `python -I -S launcher.py [--rw PATH]... [--deny PATH]... [--tcp PORTS] [--pidns] --
EXECUTABLE ARGV0 [ARG]...` (`--deny`: a path no read may reach; `--tcp`: the only TCP ports it
may connect to, comma-separated, "" for none, without it the network is open; `--pidns`: run
the command in a PID namespace of its own where the kernel allows, see `pidns`) (`-I -S`: no
site-packages, no environment-driven imports: the launcher starts in ~25 ms and nothing on the
project's path can run before the restriction). It restricts itself, makes itself the
"subreaper" of everything the command starts, and runs the resolved executable with the
original argument list as its child, in the process group and session `start_session` created.
When the command ends, every process it left behind is killed, those that detached with a new
session (`setsid`, a double fork) too: they are re-parented to the launcher, not to init, and
would otherwise keep writing the worktree while ai-sdlc verifies and commits it. Then the
launcher ends as the command did (its exit status, or the signal that killed it).

Fails closed: when the restriction cannot be applied the command does not run (exit 126 and a
line on stderr). Only the standard library and the sibling `landlock` module are imported.
"""

import contextlib
import os
import signal
import sys
import time

#: The exit status when the sandbox cannot be applied (the shell's "cannot execute").
EXIT_CANNOT_SANDBOX = 126


class Rules:
    """What the launcher's arguments ask Landlock for."""

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.deny_read: list[str] = []
        self.connect_ports: list[int] | None = None
        self.pidns = False


def parse(args: list[str]) -> tuple[list[str], str, list[str]]:
    """(writable paths, executable, argv) from the launcher's own arguments."""
    rules, executable, argv = parse_rules(args)
    return rules.writable, executable, argv


def parse_rules(args: list[str]) -> tuple[Rules, str, list[str]]:
    """(the rules, executable, argv) from the launcher's own arguments."""
    rules = Rules()
    i = 0
    while i < len(args) and args[i] != "--":
        flag = args[i]
        if flag == "--pidns":
            rules.pidns = True
            i += 1
            continue
        if flag not in ("--rw", "--deny", "--tcp") or i + 1 >= len(args):
            raise ValueError(f"unexpected launcher argument {flag!r}")
        value = args[i + 1]
        if flag == "--rw":
            rules.writable.append(value)
        elif flag == "--deny":
            rules.deny_read.append(value)
        else:
            rules.connect_ports = [int(port) for port in value.split(",") if port]
        i += 2
    rest = args[i + 1 :]
    if len(rest) < 2:
        raise ValueError("no command after '--'")
    return rules, rest[0], rest[1:]


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock  # type: ignore[import-not-found]  # the sibling (`-I` drops its folder)
    import pidns  # type: ignore[import-not-found]

    try:
        rules, executable, argv = parse_rules(sys.argv[1:])
        if rules.pidns and pidns.enter():
            _run_isolated(rules, executable, argv)
        landlock.restrict(
            rules.writable, deny_read=rules.deny_read, connect_ports=rules.connect_ports
        )
    except (ValueError, OSError) as exc:
        _cannot_apply(exc)
    if not _subreaper():
        _exec(executable, argv)  # no subreaper here: the command is this process, as before
    # The group's signals reach the command itself; the launcher outlives it to sweep.
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _FORWARDED}
    pid = os.fork()
    if pid == 0:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        _exec(executable, argv)
    # Not a writer of the command's output: its pipes close when the command's processes do.
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    status = _wait(pid)
    _sweep()
    _end_as(status)


def _cannot_apply(exc: BaseException) -> None:
    sys.stderr.write(f"[ai-sdlc] sandbox: cannot apply: {exc}; the command did not run\n")
    sys.stderr.flush()
    os._exit(EXIT_CANNOT_SANDBOX)


def _run_isolated(rules: Rules, executable: str, argv: list[str]) -> None:
    """After `pidns.enter`: the next child is the first process (init) of a new PID namespace.
    It mounts its own `/proc`, restricts itself with Landlock (a mount is impossible after),
    runs the command as its child and reports the command's wait status on a pipe. When it
    ends, the kernel kills every process left in the namespace (detached ones too). This
    launcher stays outside the sandbox and ends as the command did."""
    import landlock
    import pidns

    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _FORWARDED}
    report, reported = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(report)
        # A /proc that cannot be mounted (a container's masked one, in a user namespace) leaves
        # the old one: the namespace still ends what the command leaves, and doctor's probe
        # shows that /proc is not the namespace's.
        with contextlib.suppress(OSError):
            pidns.mount_proc()
        try:
            landlock.restrict(
                rules.writable, deny_read=rules.deny_read, connect_ports=rules.connect_ports
            )
        except OSError as exc:
            _cannot_apply(exc)
        pid = os.fork()
        if pid == 0:
            os.close(reported)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            _exec(executable, argv)
        for fd in (0, 1, 2):
            with contextlib.suppress(OSError):
                os.close(fd)
        os.write(reported, _wait(pid).to_bytes(4, "little"))
        os._exit(0)
    os.close(reported)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    _, init_status = os.waitpid(init, 0)
    with os.fdopen(report, "rb") as pipe:
        data = pipe.read()
    status = int.from_bytes(data, "little") if len(data) == 4 else init_status
    _end_as(status)


def _end_as(status: int) -> None:
    """End this process as a process with wait status `status` ended."""
    if os.WIFSIGNALED(status):
        killed = os.WTERMSIG(status)
        signal.signal(killed, signal.SIG_DFL)
        os.kill(os.getpid(), killed)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128)


#: Signals a terminal or ai-sdlc sends the command's process group (the command gets them).
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_PR_SET_CHILD_SUBREAPER = 36


def _exec(executable: str, argv: list[str]) -> None:
    try:
        os.execv(executable, argv)
    except OSError as exc:
        sys.stderr.write(f"[ai-sdlc] cannot run {argv[0]!r}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        os._exit(127 if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_SANDBOX)


def _subreaper() -> bool:
    """Make orphans of our descendants ours (Linux 3.4+); False where that is not possible."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _wait(pid: int) -> int:
    """The command's wait status, reaping whatever else ends meanwhile."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if done == pid:
            return status


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
