"""Sidecar file locks: an OS lock (flock) on `<name>.lock`, held across a read and a write.

The kernel drops a flock when its holder dies, so a killed process never leaves a lock behind.
On POSIX this module is all there is (importing the `filelock` package costs ~12 ms of CPU on
every command: logging, secrets, inspect); on Windows it hands over to `filelock`.

Semantics match what the callers relied on: a lock object is re-entrant within one thread
(a counter), and two threads, or two lock objects, exclude each other like two processes do.

While the main thread holds a lock, Ctrl-C (SIGINT, and SIGTERM when it has a Python handler)
is held back and delivered the moment the last lock is let go (locks held for a whole run are
made with `shield=False`). Python raises KeyboardInterrupt at any function entry, including the
`release` a `finally` or `__exit__` is about to run; a lock left held that way made the run's
own clean-up wait forever for it. A wait for a lock held by another process stays
interruptible.

Lock files can be deleted under us (`git clean -xfd` removes the git-ignored `.ai-sdlc/.locks`).
A flock belongs to an inode: once the file is gone, the next process creates a new one and
"holds the same lock" too. So a flock only counts once the locked descriptor is still the file
at its path (same device and inode; otherwise the new file is locked instead), and on Linux the
lock is also the path's *name*: an abstract Unix socket bound under a name derived from the
path, which no file deletion can free (the kernel frees it when its holder dies).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

_POLL_SECONDS = 0.02
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Shield:
    """The stop signals held back while the main thread holds locks (one count per lock)."""

    depth: ClassVar[int] = 0
    previous: ClassVar[dict[int, Any]] = {}
    pending: ClassVar[list[tuple[int, Any]]] = []

    @classmethod
    def raise_up(cls) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False  # signals are handled in the main thread only
        if cls.depth == 0:
            for sig in _STOP_SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):  # SIG_DFL / SIG_IGN: nothing raises in this process
                    cls.previous[sig] = handler
                    signal.signal(sig, _hold_back)
        cls.depth += 1
        return True

    @classmethod
    def lower(cls) -> None:
        cls.depth -= 1
        if cls.depth > 0:
            return
        for sig, handler in cls.previous.items():
            signal.signal(sig, handler)
        cls.deliver(clear=True)

    @classmethod
    def deliver(cls, *, clear: bool = False) -> None:
        """Run the held-back signal's own handler (KeyboardInterrupt for Ctrl-C)."""
        previous = cls.previous
        if clear:
            cls.previous = {}
        if cls.pending:
            signum, frame = cls.pending[0]
            cls.pending = []
            previous[signum](signum, frame)


def _hold_back(signum: int, frame: Any) -> None:
    _Shield.pending.append((signum, frame))


class LockTimeout(TimeoutError):
    """The lock stayed held by someone else for the whole timeout."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the lock {path} could not be acquired")
        self.path = path


class SidecarLock:
    """`with SidecarLock(path, timeout=5): ...`; timeout < 0 waits forever, 0 tries once.
    `shield=False` for a lock held for a long time (a whole run): Ctrl-C must not wait for it."""

    def __init__(
        self, path: str | os.PathLike[str], timeout: float = -1, *, shield: bool = True
    ) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self.shield = shield
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
        shielded = self.shield and _Shield.raise_up()
        try:
            self._local.fd = _flock(self.path, wait)
        except BaseException:
            if shielded:
                _Shield.lower()  # a held-back Ctrl-C is raised here
            raise
        self._local.depth = 1
        self._local.shielded = shielded

    def release(self) -> None:
        if self._windows is not None:  # pragma: no cover
            self._windows.release()
            return
        depth = getattr(self._local, "depth", 0)
        if depth <= 0:
            return
        self._local.depth = depth - 1
        if depth == 1:
            held, self._local.fd = self._local.fd, None
            for fd in held:
                os.close(fd)  # closing the descriptors drops the flock and the name
            if getattr(self._local, "shielded", False):
                self._local.shielded = False
                _Shield.lower()  # a Ctrl-C held back meanwhile is raised now

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
def stop_signals_held() -> Iterator[None]:
    """Ctrl-C (and SIGTERM when it has a Python handler) held back in the main thread for the
    block and raised at its end: for a hand-over an interrupt must not split, such as a child
    process created but not yet owned by the code that would kill it."""
    shielded = _Shield.raise_up()
    try:
        yield
    finally:
        if shielded:
            _Shield.lower()  # a Ctrl-C held back meanwhile is raised now


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


def _flock(path: str, timeout: float) -> tuple[int, ...]:
    """Hold `path`: its name (Linux: an abstract socket, see `_name_lock`) and an exclusive
    flock on the file (created if missing, with its folder); the descriptors to close."""
    import fcntl

    deadline = None if timeout < 0 else time.monotonic() + timeout
    name = _name_lock(path)
    fd = -1
    try:
        while True:
            if name is not None and not name.held and not name.try_bind():
                name.close()  # abstract sockets refused here: the flock alone, as elsewhere
                name = None
            if name is None or name.held:
                if fd < 0:
                    fd = _open_lock_file(path)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass
                else:
                    if _still_at(fd, path):
                        return (fd,) if name is None else (fd, name.sock.detach())
                    # Deleted or replaced (e.g. `git clean -xfd`) between our open and our
                    # flock: a lock on an orphaned inode excludes nobody. Lock the new file.
                    os.close(fd)
                    fd = -1
                    continue
            if _Shield.pending:
                _Shield.deliver()  # Ctrl-C while waiting for another process: stop waiting
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeout(path)
            time.sleep(_POLL_SECONDS)
    except BaseException:  # a timeout, an interrupt while waiting, an OS error
        if fd >= 0:
            os.close(fd)
        if name is not None:
            name.close()
        raise


class _NameLock:
    """A lock on a lock file's *path*, not its inode (Linux): a bound abstract Unix socket whose
    name is derived from the path. Deleting lock files (`git clean -xfd` on `.ai-sdlc/`) while
    one is held lets a second process create and flock a new file; it cannot bind the same
    name. The kernel frees the name when the holder dies, like a flock."""

    def __init__(self, address: bytes) -> None:
        import socket

        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self.held = False

    def try_bind(self) -> bool:
        """Bind the name if free (`held` tells); False when this system refuses the binding
        for another reason than the name being taken."""
        try:
            self.sock.bind(self.address)
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        self.held = True
        return True

    def close(self) -> None:
        self.sock.close()


def _name_lock(path: str) -> _NameLock | None:
    """The path's name lock (None where abstract sockets do not exist: not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _NameLock(_name_address(os.path.abspath(path)))
    except OSError:
        return None


@functools.lru_cache(maxsize=256)
def _name_address(path: str) -> bytes:
    """The abstract socket address naming `path` (its folder resolved, for this user)."""
    folder, base = os.path.split(path)
    key = f"{os.getuid()}:{os.path.realpath(folder)}/{base}".encode("utf-8", "surrogateescape")
    return b"\0ai-sdlc-lock-" + hashlib.sha256(key).hexdigest()[:40].encode("ascii")


def _open_lock_file(path: str) -> int:
    """The lock file opened (created, with its folder, if missing)."""
    for _ in range(9):
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # its folder is missing, or was removed meanwhile
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _still_at(fd: int, path: str) -> bool:
    """True when the locked descriptor is still the file at `path` (same device and inode)."""
    try:
        here = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (here.st_dev, here.st_ino)
