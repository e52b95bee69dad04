"""Sidecar file locks: an OS lock (flock) on `<name>.lock`, held across a read and a write.

The kernel drops a flock when its holder dies, so a killed process never leaves a lock behind.
On POSIX this module is all there is (importing the `filelock` package costs ~12 ms of CPU on
every command: logging, secrets, inspect); on Windows it hands over to `filelock`.

Semantics match what the callers relied on: a lock object is re-entrant within one thread
(a counter), and two threads, or two lock objects, exclude each other like two processes do.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

_POLL_SECONDS = 0.02


class LockTimeout(TimeoutError):
    """The lock stayed held by someone else for the whole timeout."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the lock {path} could not be acquired")
        self.path = path


class SidecarLock:
    """`with SidecarLock(path, timeout=5): ...`; timeout < 0 waits forever, 0 tries once."""

    def __init__(self, path: str | os.PathLike[str], timeout: float = -1) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self._local = threading.local()
        self._windows: Any = None
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            from filelock import FileLock

            self._windows = FileLock(self.path, timeout=timeout)

    @property
    def is_locked(self) -> bool:
        if self._windows is not None:  # pragma: no cover
            return bool(self._windows.is_locked)
        return getattr(self._local, "depth", 0) > 0

    def acquire(self, timeout: float | None = None) -> None:
        wait = self.timeout if timeout is None else timeout
        if sys.platform == "win32":  # pragma: no cover
            from filelock import Timeout

            try:
                self._windows.acquire(timeout=wait)
            except Timeout:
                raise LockTimeout(self.path) from None
            return
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            return
        self._local.fd = _flock(self.path, wait)
        self._local.depth = 1

    def release(self) -> None:
        if self._windows is not None:  # pragma: no cover
            self._windows.release()
            return
        depth = getattr(self._local, "depth", 0)
        if depth <= 0:
            return
        self._local.depth = depth - 1
        if depth == 1:
            fd, self._local.fd = self._local.fd, None
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> SidecarLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


@contextmanager
def held(lock: SidecarLock, *, busy: str, hint: str) -> Iterator[None]:
    """Hold `lock`; when another process keeps it for the whole timeout, a BusyError (exit 1)
    saying `busy` (what is locked) and how long it waited."""
    from ai_sdlc.errors import BusyError

    try:
        lock.acquire()
    except LockTimeout:
        raise BusyError(
            f"{busy} by another ai-sdlc process (waited {lock.timeout:g} s)", hint=hint
        ) from None
    try:
        yield
    finally:
        lock.release()


def _flock(path: str, timeout: float) -> int:
    """Open `path` (created if missing, with its folder) and hold an exclusive flock on it."""
    import fcntl

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = None if timeout < 0 else time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeout(path)
            time.sleep(_POLL_SECONDS)
    except BaseException:  # a timeout, an interrupt while waiting, an OS error
        os.close(fd)
        raise
