"""The sandbox launcher: stay outside the sandbox, restrict only the command it starts.

Run as `python -I -S -c <this source> [--lifeline FD] [--rw PATH]... [--ro PATH]...
[--deny PATH]... [--tcp PORTS] [--pidns] -- EXECUTABLE ARGV0 [ARG]...` (`--ro`: a path inside a
writable one that the command may not change, bound read-only where `--pidns` gives it a mount
namespace; `--deny`: a path no read may reach;
`--tcp`: the only TCP ports the command may connect to, comma-separated, "" for none, without
it the network is open; `--pidns`: run the command in a PID namespace of its own where the
kernel allows, see `pidns`) (`-I -S`: no site-packages, no environment-driven imports, ~25 ms).
Its code comes from ai-sdlc's memory (`backend.LAUNCH_CODE`, read once when ai-sdlc starts,
with the `landlock` and `pidns` modules), never from a file a child could have changed since:
an installation hard-linked into a writable cache (uv) would otherwise let one verify command
switch the sandbox off for every later child.

It makes itself the "subreaper" of everything the command starts, forks, and only the forked
child restricts itself with Landlock and becomes the command. The launcher therefore sits
outside the command's Landlock domain, so from ABI 6 the scoped signals keep the command and
everything it starts from signalling it: a detached grandchild can no longer kill the launcher
and live on unswept. When the command ends, every process it left behind is killed, those that
detached with a new session (`setsid`, a double fork) too: they are re-parented to the
launcher, not to init. Then the launcher ends as the command did (its exit status, or the
signal that killed it).

With `--pidns` (where the kernel allows it) the launcher unshares a PID and mount namespace
first; its forked child is then the namespace's first process: it mounts its own `/proc` and
forks the command, which restricts itself (no mount is possible in its domain) and execs; the
first process stays outside the command's domain and reports its wait status on a pipe. When
it ends, the kernel kills every process left in the namespace. The launcher stays outside the
sandbox here too.

Lifelines, both ways: the launcher's child gets `PR_SET_PDEATHSIG` (SIGKILL when the launcher
dies), and the launcher watches `--lifeline FD`, a pipe whose other end only the process that
started it holds: end-of-file means that process died (however: a SIGKILLed worker or
coordinator), and the launcher kills everything under it and ends, instead of running on
unowned.
"""

# The C module: `signal` imports enum (about 25 ms per sandboxed process on a loaded machine).
import _signal as signal  # type: ignore[import-not-found]
import os
import select
import sys
import time

#: Set in the command's environment: the pid of the process that started the launcher.
CALLER_VAR = "AI_SDLC_CALLER_PID"
#: The exit status when the sandbox cannot be applied (the shell's "cannot execute").
EXIT_CANNOT_SANDBOX = 126


class _suppress:
    """`contextlib.suppress`, without importing contextlib (functools, collections): this
    module runs in a fresh interpreter before every sandboxed command."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, self.kinds)


class Rules:
    """What the launcher's arguments ask for."""

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.deny_read: list[str] = []
        self.connect_ports: list[int] | None = None
        self.pidns = False
        self.lifeline: int | None = None
        self.read_only: list[str] = []


def parse(args: list[str]) -> tuple[Rules, str, list[str]]:
    """(the rules, executable, argv) from the launcher's own arguments."""
    rules = Rules()
    i = 0
    while i < len(args) and args[i] != "--":
        flag = args[i]
        if flag == "--pidns":
            rules.pidns = True
            i += 1
            continue
        if flag not in ("--rw", "--ro", "--deny", "--tcp", "--lifeline") or i + 1 >= len(args):
            raise ValueError(f"unexpected launcher argument {flag!r}")
        value = args[i + 1]
        if flag == "--rw":
            rules.writable.append(value)
        elif flag == "--ro":
            rules.read_only.append(value)
        elif flag == "--deny":
            rules.deny_read.append(value)
        elif flag == "--lifeline":
            rules.lifeline = int(value)
        else:
            rules.connect_ports = [int(port) for port in value.split(",") if port]
        i += 2
    rest = args[i + 1 :]
    if len(rest) < 2:
        raise ValueError("no command after '--'")
    return rules, rest[0], rest[1:]


def main() -> None:
    import pidns  # type: ignore[import-not-found]  # put in sys.modules by LAUNCH_CODE

    try:
        rules, executable, argv = parse(sys.argv[1:])
    except ValueError as exc:
        _refuse(exc)
        return
    lifeline = rules.lifeline
    # The command's caller as the host sees it: in a PID namespace of its own the command sees
    # neither this launcher nor what started it (tools that report their caller read this).
    os.environ[CALLER_VAR] = str(os.getppid())
    if rules.pidns:
        try:
            isolated = pidns.enter()
        except OSError as exc:  # a user namespace made but not mapped: do not go on in it
            _refuse(exc)
            return
        if isolated:
            _subreaper()
            _run_isolated(rules, executable, argv)
            return
    if not _subreaper():  # no subreaper here: restrict this process and become the command
        _restrict(rules)
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
        _restrict(rules)
        _exec(executable, argv)
    # Not a writer of the command's output: its pipes close when the command's processes do.
    for fd in (0, 1, 2):
        with _suppress(OSError):
            os.close(fd)
    status = _wait(pid, lifeline)
    _sweep()
    _end_as(status)


def _restrict(rules: Rules) -> None:
    """Restrict this process with Landlock as the rules say; exit 126 when that fails."""
    import landlock  # type: ignore[import-not-found]  # put in sys.modules by LAUNCH_CODE

    try:
        landlock.restrict(
            rules.writable, deny_read=rules.deny_read, connect_ports=rules.connect_ports
        )
    except OSError as exc:
        _refuse(exc)


def _run_isolated(rules: Rules, executable: str, argv: list[str]) -> None:
    """After `pidns.enter`: the next child is the first process (init) of a new PID namespace.
    It mounts its own `/proc`, forks the command, which restricts itself with Landlock (no
    mount is possible in its domain; init stays outside it, so from ABI 6 the command cannot
    signal init either) and execs; init reports the command's wait status on a pipe. When it
    ends, the kernel kills every process left in the namespace (detached ones too). This
    launcher stays outside the sandbox, watches the lifeline and ends as the command did."""
    import pidns  # put in sys.modules by LAUNCH_CODE

    lifeline = rules.lifeline
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _FORWARDED}
    report, reported = os.pipe()
    alive, held = os.pipe()  # end-of-file on `alive`: the launcher is gone
    init = os.fork()
    if init == 0:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        os.close(held)
        # getppid() is 0 in the new namespace (the parent is outside it): the pipe tells
        # whether the launcher died before the line above.
        if select.select([alive], [], [], 0)[0]:
            os._exit(EXIT_CANNOT_SANDBOX)
        os.close(alive)
        os.close(report)
        if lifeline is not None:
            os.close(lifeline)
        # A /proc that cannot be mounted (a container's masked one, in a user namespace) leaves
        # the old one: the namespace still ends what the command leaves, and doctor's probe
        # shows that /proc is not the namespace's. Nothing is mounted unless mounts are private
        # (a bind would reach the host). The read-only paths (the worktree's `.git` pointer)
        # are a second wall: ai-sdlc checks and puts them back after every child anyway.
        private = False
        with _suppress(OSError):
            pidns.make_private()
            private = True
        if private:
            with _suppress(OSError):
                pidns.mount_proc()
            for path in rules.read_only:
                with _suppress(OSError):
                    pidns.bind_read_only(path)
        pid = os.fork()
        if pid == 0:  # only the command restricts itself: this init stays out of its domain
            os.close(reported)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            _restrict(rules)
            _exec(executable, argv)
        for fd in (0, 1, 2):
            with _suppress(OSError):
                os.close(fd)
        status = _wait(pid, None)
        os.write(reported, (status if status is not None else 0).to_bytes(4, "little"))
        os._exit(0)
    os.close(reported)
    os.close(alive)  # `held` stays open as long as this launcher lives
    for fd in (0, 1, 2):
        with _suppress(OSError):
            os.close(fd)
    init_status = _wait(init, lifeline)
    _sweep()  # init, when the lifeline ended first: the kernel then ends its namespace
    if init_status is None:  # whoever started us is gone: nobody reads our status
        os._exit(1)
    with os.fdopen(report, "rb") as pipe:
        data = pipe.read()
    _end_as(int.from_bytes(data, "little") if len(data) == 4 else init_status)


def _end_as(status: int | None) -> None:
    """End this process as a process with wait status `status` ended (None: whoever started
    us is gone and nobody reads our status)."""
    if status is None:
        os._exit(1)
    if os.WIFSIGNALED(status):
        killed = os.WTERMSIG(status)
        with _suppress(OSError, ValueError):  # SIGKILL has no handler to reset
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
            with _suppress(OSError):
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
