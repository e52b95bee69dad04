"""Crash-safe file writes shared by every package that persists state.

Atomic file replacement: readers see the old file or the new one, never a torn write.

The temp file lives in the target's folder (os.replace is atomic only within one file system),
gets the target's permission bits back (mkstemp creates 0600), and is fsynced before the rename;
the folder is fsynced after it so the rename itself survives a crash.
"""

from __future__ import annotations

import contextlib
import os
import stat
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
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable and sync_folder:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """`atomic_write_bytes` of UTF-8 text, written exactly (no newline translation)."""
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)
