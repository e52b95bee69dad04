"""One `run` per story at a time, across processes.

An OS-level lock (flock, `ai_sdlc.locks`) on a sidecar file: the kernel releases it when the holder
dies, so a crashed or SIGKILLed run never leaves a story stuck. The holder's pid is kept next
to it only to make the refusal message useful.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ai_sdlc.errors import BusyError
from ai_sdlc.locks import LockTimeout, SidecarLock


def _lock_dir(ai_dir: Path) -> Path:
    folder = ai_dir / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def run_lock(ai_dir: Path, name: str, *, what: str) -> Iterator[None]:
    """Hold the run lock `name` (e.g. a story id) or raise BusyError at once."""
    folder = _lock_dir(ai_dir)
    # Held for the whole run: Ctrl-C must stop the run, not wait for the lock to be let go.
    lock = SidecarLock(folder / f"run-{name}.lock", timeout=0, shield=False)
    pid_file = folder / f"run-{name}.pid"
    try:
        lock.acquire()
    except LockTimeout:
        holder = ""
        with contextlib.suppress(OSError, ValueError):
            holder = f" (pid {int(pid_file.read_text().strip())})"
        raise BusyError(
            f"{what} is already being run by another ai-sdlc process{holder}",
            hint="wait for it to finish, or stop it; a crashed run releases the lock by itself",
        ) from None
    try:
        pid_file.write_text(str(os.getpid()))
        yield
    finally:
        with contextlib.suppress(OSError):
            pid_file.unlink()
        lock.release()
