"""The user's state folder for one project: records kept outside the project on purpose.

`.ai-sdlc/state` sits inside the project, where an agent, a test suite or a user's own
`git clean -xfd` can wipe it. What must survive that (the copies of each story's ledger head,
the accepted guardrail settings) is also kept here: `$AI_SDLC_STATE_HOME`, else the XDG state
folder (`$XDG_STATE_HOME/ai-sdlc`, `~/.local/state/ai-sdlc`), in a folder named after a hash of
the project's real path (its `project` file names the path, for people looking around).
"""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from ai_sdlc.environ import home_folder
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.fsutil import append_whole, atomic_write_bytes

STATE_HOME_ENV = "AI_SDLC_STATE_HOME"
#: Bytes read from a journal's end for its last line; size past which it is compacted.
_TAIL = 64 * 1024
_COMPACT = 1024 * 1024


def user_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get(STATE_HOME_ENV, "")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform in ("win32", "darwin", "ios") or hasattr(sys, "getandroidapilevel"):
        import platformdirs

        return Path(platformdirs.user_state_dir("ai-sdlc", appauthor=False))
    xdg = env.get("XDG_STATE_HOME", "")
    if posixpath.isabs(xdg):
        return Path(xdg, "ai-sdlc")
    return Path(home_folder(env), ".local", "state", "ai-sdlc")


class ProjectState:
    """The state folder of the project at `root` (created when first written)."""

    def __init__(self, root: Path, environ: Mapping[str, str] | None = None) -> None:
        real = os.path.realpath(root)
        key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        self.project = real
        self.folder = user_state_dir(environ) / key

    def read(self, name: str) -> bytes | None:
        """The file's bytes; None when it does not exist (or is not a regular file)."""
        path = self.folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return None  # a symbolic link or a folder where the file was: not ours
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            return fh.read()

    def last_line(self, name: str) -> bytes | None:
        """The last complete line of a journal kept here (`append`); None when there is none."""
        path = self.folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - _TAIL))
            lines = fh.read().split(b"\n")
        lines.pop()  # after the last newline: b"" or a torn line
        return lines[-1] if lines else None

    def append(self, name: str, line: bytes) -> None:
        """Append a line to a journal kept here, whole (one fsync, no rename: a copy written
        on every ledger entry must cost little); past `_COMPACT` bytes it starts again from
        that line."""
        path = self.folder / name
        try:
            self._ensure(path)
            append_whole(path, line + b"\n", durable=True)
            if os.stat(path).st_size > _COMPACT:
                atomic_write_bytes(path, line + b"\n")
        except OSError as exc:
            raise self._unwritable(path, exc) from None

    def write(self, name: str, data: bytes) -> None:
        path = self.folder / name
        try:
            self._ensure(path)
            atomic_write_bytes(path, data)
        except OSError as exc:
            raise self._unwritable(path, exc) from None

    def _ensure(self, path: Path) -> None:
        if not (self.folder / "project").exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.folder / "project", self.project.encode() + b"\n")
        path.parent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _unwritable(path: Path, exc: OSError) -> BaseException:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            return exc  # a full or failing disk: reported as such by whoever handles those
        return AiSdlcError(
            f"cannot write {path}: {exc.strerror or exc}",
            hint=f"ai-sdlc keeps copies of its records there; make it writable or set "
            f"{STATE_HOME_ENV} to a writable folder",
        )

    def clear(self) -> None:
        """Forget every record of this project (a new project was created at its path)."""
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)
