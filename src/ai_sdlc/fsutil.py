"""Crash-safe file writes shared by every package that persists state.

Atomic file replacement: readers see the old file or the new one, never a torn write.

The temp file lives in the target's folder (os.replace is atomic only within one file system),
gets the target's permission bits back (mkstemp creates 0600), and is fsynced before the rename;
the folder is fsynced after it so the rename itself survives a crash.

Appends to a journal (`append_whole`) are whole lines or nothing: a torn tail is cut before the
next append, a failed append is cut back. Every write checks for short writes (`write_all`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

_UMASK: int | None = None


def _default_mode() -> int:
    global _UMASK
    if _UMASK is None:
        # os.umask can only be read by setting it; done once, before any thread needs it.
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return 0o666 & ~_UMASK


def fsync_dir(folder: Path) -> None:
    """Persist a rename in `folder` (no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(
    path: Path, data: bytes, *, durable: bool = True, sync_folder: bool = True
) -> None:
    """Replace `path` with `data` atomically, keeping its permission bits. `sync_folder=False`
    (durable writes only): the caller fsyncs the folder itself once its other renames in it
    are done (one folder fsync persists them all)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = _default_mode()
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            write_all(fd, data, path)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable and sync_folder:
        fsync_dir(path.parent)


def write_all(fd: int, data: bytes, path: str | os.PathLike[str]) -> None:
    """Write all of `data`, going on after a short write; a write that makes no progress (a
    full disk reports ENOSPC on the next call; a zero-length write is the same) raises, naming
    `path` (an `os.write` error names no file)."""
    view = memoryview(data)
    while view:
        try:
            done = os.write(fd, view)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, os.fspath(path)) from exc
        if done <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
        view = view[done:]


def append_whole(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Append `data` (whole lines) to `path` so that it ends up there whole or not at all.

    A torn tail (a line without its newline: a crash or a failed write mid-append) is cut off
    first, so the new lines are never glued to it; a write that fails part-way (ENOSPC after a
    short write) is cut back to where it started before the error is raised. Callers hold the
    file's lock (or are its only writer): the cut-back assumes nobody appended meanwhile."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device put in the file's place
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        size = _cut_torn_tail(fd, path)
        try:
            write_all(fd, data, path)
            if durable:
                os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _cut_torn_tail(fd: int, path: Path) -> int:
    """Truncate the file after its last newline when it does not end with one; its new size."""
    size = os.fstat(fd).st_size
    if not size or _read_at(fd, 1, size - 1) == b"\n":
        return size
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        found = _read_at(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            end = start + found + 1
            break
        end = start
    try:
        os.ftruncate(fd, end)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from exc
    return end


_TAIL_CHUNK = 64 * 1024


def _read_at(fd: int, size: int, offset: int) -> bytes:
    """`os.pread`, or a seek and a read where it is missing (Windows; appends ignore the
    position anyway)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """`atomic_write_bytes` of UTF-8 text, written exactly (no newline translation)."""
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove a temp folder ai-sdlc made and whatever a child left in it, whatever the child did
    to the mode bits inside (a test suite's read-only fixture folder in its `TMPDIR`, a Go
    module cache): a folder that refuses is made its owner's own (u+rwx) and tried again.
    Whatever still refuses stays (a temp folder's removal never fails a command)."""
    import shutil

    top = os.path.abspath(path)
    tried: set[str] = set()

    def remove(folder: str) -> None:
        if sys.version_info >= (3, 12):
            shutil.rmtree(folder, onexc=again)
        else:
            shutil.rmtree(folder, onerror=again)

    def again(_func: object, failed: str, _exc: object) -> None:
        if failed in tried:
            return
        tried.add(failed)
        with contextlib.suppress(OSError):
            parent = os.path.dirname(failed)
            if parent == top or parent.startswith(top + os.sep):  # never above the folder
                os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
                remove(failed)
            else:
                os.unlink(failed)

    remove(top)
