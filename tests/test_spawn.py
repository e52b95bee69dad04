"""A Ctrl-C that lands while a child is being started leaves no child behind.

`subprocess.Popen` forks, then waits for the exec; an interrupt in that wait raises out of the
constructor after the child exists, so the caller cannot kill it (an agent would run on after
the run exited: tests/e2e/test_interrupts.py's between-phase points hit this on a loaded machine).
Here the child is held before its exec (a pre-exec hook that records its pid and sleeps), and
the interrupt is raised in the parent only once that pid is on disk: no timing window.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.sandbox import landlock
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.spawn import start_session, wait_for_exit
from tests.support.waits import GUARD, NEVER

pytestmark = pytest.mark.e2e


@contextmanager
def interrupt_once_written(marker: Path) -> Iterator[None]:
    """SIGALRM every 20 ms until `marker` holds a pid, then a KeyboardInterrupt (again every
    5 s until the block ends, should one be swallowed)."""

    def handler(signum: int, frame: Any) -> None:
        if marker.exists() and marker.read_text().strip():
            # Once more later, should this one be lost: CPython runs the os.register_at_fork
            # callbacks right after the fork, and an exception a signal handler raises inside
            # one of them is printed as unraisable and dropped (the start then waits forever
            # on the held child). Disarmed as soon as the interrupt is caught.
            signal.setitimer(signal.ITIMER_REAL, 5.0)
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.02)

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


#: The interrupt a fork callback swallows (see `interrupt_once_written`) is printed by CPython as
#: unraisable; that is the case the re-armed timer handles, not a failure.
swallowed_interrupt = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def held_before_exec(marker: Path) -> Callable[[], None]:
    def hook() -> None:  # runs in the child, between fork and exec
        marker.write_text(str(os.getpid()))
        time.sleep(NEVER)  # only a kill ends it within the guard

    return hook


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(os.name != "posix", reason="sessions and pre-exec hooks are POSIX")
@swallowed_interrupt
def test_an_interrupt_while_a_child_starts_kills_and_reaps_it(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    started = time.monotonic()
    with interrupt_once_written(marker), pytest.raises(KeyboardInterrupt):
        start_session(
            [sys.executable, "-c", "pass"],
            stdout=subprocess.DEVNULL,
            preexec_fn=held_before_exec(marker),
        )
    pid = int(marker.read_text())
    assert not alive(pid), f"child {pid} outlived the interrupted start"
    assert time.monotonic() - started < GUARD  # killed, not waited for


@pytest.mark.skipif(os.name != "posix", reason="sessions and pre-exec hooks are POSIX")
@swallowed_interrupt
def test_plain_popen_would_leave_the_child_running(tmp_path: Path) -> None:
    """What start_session guards against, shown on subprocess.Popen itself."""
    marker = tmp_path / "pid"
    with interrupt_once_written(marker), pytest.raises(KeyboardInterrupt):
        subprocess.Popen(
            [sys.executable, "-c", "pass"],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=held_before_exec(marker),
        )
    pid = int(marker.read_text())
    try:
        assert alive(pid)
    finally:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_child_that_starts_is_in_its_own_session() -> None:
    proc = start_session(
        [sys.executable, "-c", "import os; print(os.getsid(0))"], stdout=subprocess.PIPE
    )
    out, _ = proc.communicate(timeout=60)
    assert int(out) == proc.pid != os.getsid(0)


def children() -> set[int]:
    """This process's child processes, zombies included."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid():
                    found.add(int(entry.name))
    return found


def ctrl_c_at(position: int) -> tuple[Callable[..., None], list[int]]:
    """A profile function that sends this process a real SIGINT at the `position`-th call event
    after `fork` returned in the parent (0: as fork_exec returns, before Popen stores the pid),
    and a one-item list that counts those events. Python runs the signal's handler inside the
    profile function, so the KeyboardInterrupt surfaces exactly at that event."""
    seen = [-1]
    returned = [False]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if returned[0]:
            return
        if event == "return" and frame.f_code is start_session.__code__:
            returned[0] = True  # the hand-over: what the caller does next is its own affair
            return
        if seen[0] < 0:
            if event == "c_return" and getattr(arg, "__name__", "") == "fork_exec":
                seen[0] = 0
                if position == 0:
                    os.kill(os.getpid(), signal.SIGINT)
            return
        if event in ("call", "c_call"):
            seen[0] += 1
            if seen[0] == position:
                os.kill(os.getpid(), signal.SIGINT)

    return profile, seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("boxed", [False, True], ids=["plain", "sandboxed"])
def test_a_ctrl_c_at_any_call_of_the_start_leaves_no_child(tmp_path: Path, boxed: bool) -> None:
    """Ctrl-C at every call from the fork to the hand-over, one position per start: each start
    either raises KeyboardInterrupt with its child killed and reaped, or returns it (a Ctrl-C
    held back meanwhile is raised before the hand-over, never after it)."""
    if boxed and not landlock_available():
        pytest.skip("this kernel has no usable Landlock")
    policy = SandboxPolicy(LandlockBackend(), (str(tmp_path),)) if boxed else None
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    before = children()
    interrupted = 0
    for position in range(10_000):
        profile, seen = ctrl_c_at(position)
        sys.setprofile(profile)
        try:
            proc = start_session(argv, stdout=subprocess.DEVNULL, sandbox=policy)
        except KeyboardInterrupt:
            sys.setprofile(None)
            interrupted += 1
            left = children() - before
            for pid in left:  # the test's own clean-up: a lost child must not run on
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            assert not left, f"Ctrl-C at call {position} after the fork left child {left}"
            continue
        finally:
            sys.setprofile(None)
        proc.kill()
        proc.wait()
        assert seen[0] < position, f"Ctrl-C at call {position} was lost: the start returned"
        break
    assert interrupted > 10  # the positions really covered the start
    assert children() == before


def landlock_available() -> bool:
    try:
        return landlock.abi_version() > 0
    except OSError:
        return False


def test_wait_for_exit_sees_the_end_without_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Popen.wait(timeout=...)` looks, sleeps, looks again (up to 50 ms late); `wait_for_exit`
    is woken by the kernel when the child ends (a pidfd), and times out as `wait` does."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.exit(len(sys.stdin.read()))"],
        stdin=subprocess.PIPE,
    )
    sleeps: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: (sleeps.append(s), real_sleep(s)))
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_for_exit(child, 0.05)  # it waits for its stdin: it cannot have ended
        assert child.stdin is not None
        child.stdin.write(b"abc")
        child.stdin.close()
        assert wait_for_exit(child, 60) == 3
        assert wait_for_exit(child, 60) == 3  # already reaped: the same answer
    finally:
        child.kill()
        child.wait()
    assert sleeps == []
