"""Small records kept as blobs under `refs/ai-sdlc/` in a repository's own git folder.

A ref in the main repository's git folder survives what wipes the project's git-ignored files
(`git clean -xfd`, `rm -rf .ai-sdlc/state`). Reading one is on every story transaction's path,
so it does not start git: the ref's object id is read from its file (or `packed-refs`) and
compared with the id the expected content would have (git's blob hash, computed here); git is
started only to read a blob whose content is not the expected one, and to move a ref. Every
git command names the git folder explicitly and runs hardened (`git.run`: no hook, no
fsmonitor, whatever a config file says).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import zlib
from pathlib import Path

from ai_sdlc.errors import DISK_ERRNOS
from ai_sdlc.fsutil import atomic_write_bytes
from ai_sdlc.git.run import failure, git


def blob_id(data: bytes, *, length: int = 40) -> str:
    """The object id git gives a blob holding `data` (sha1, or sha256 for 64-digit ids)."""
    algo = hashlib.sha256 if length == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


class BlobRefs:
    """The `refs/ai-sdlc/...` of one repository (its common git folder)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir

    @classmethod
    def of_project(cls, root: Path) -> BlobRefs | None:
        """The refs of the repository holding `root` (its common git folder, as git would find
        it from `root`: a `.git` folder, or a `.git` file naming a worktree's folder whose
        `commondir` leads back); None when it is not in one. Read from files: no git started."""
        for folder in (root, *root.parents):
            dot = folder / ".git"
            if dot.is_dir():
                git_dir = dot
            elif dot.is_file():
                try:
                    text = dot.read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError):
                    return None
                if not text.startswith("gitdir:"):
                    return None
                git_dir = (folder / text.removeprefix("gitdir:").strip()).resolve()
            else:
                continue
            try:
                common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                common = ""
            if common:
                git_dir = (git_dir / common).resolve()
            return cls(git_dir) if (git_dir / "HEAD").exists() else None
        return None

    def _git(self, *args: str, input: str | None = None, check: bool = True) -> str:
        done = git(self.git_dir, f"--git-dir={self.git_dir}", *args, input=input, check=check)
        return done.stdout.strip() if done.ok else ""

    def oid(self, ref: str) -> str | None:
        """The object id `ref` points at, None when there is no such ref."""
        try:
            text = (self.git_dir / ref).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if text and not text.startswith("ref:"):
            return text
        packed = self._packed(ref)
        if packed is not None:
            return packed
        if (self.git_dir / "reftable").is_dir() or text:
            return self._git("rev-parse", "--verify", "-q", ref + "^{object}", check=False) or None
        return None

    def _packed(self, ref: str) -> str | None:
        try:
            with open(self.git_dir / "packed-refs", "rb") as fh:
                wanted = b" " + ref.encode() + b"\n"
                for line in fh:
                    if line.endswith(wanted):
                        return line[: -len(wanted)].decode("ascii", "replace")
        except OSError:
            return None
        return None

    def holds(self, ref: str, data: bytes) -> bool | None:
        """True when `ref` holds exactly `data`, False when it holds something else, None when
        there is no such ref (no git started)."""
        oid = self.oid(ref)
        if oid is None:
            return None
        return oid == blob_id(data, length=len(oid))

    def read(self, ref: str) -> bytes | None:
        """The blob `ref` points at; None when there is no such ref, b"" when its object
        cannot be read as a blob."""
        oid = self.oid(ref)
        if oid is None:
            return None
        done = git(self.git_dir, f"--git-dir={self.git_dir}", "cat-file", "blob", oid, check=False)
        return done.stdout.encode("utf-8") if done.ok else b""

    def write(self, ref: str, data: bytes) -> None:
        """Point `ref` at a blob holding `data` (raises `GitError` when git fails). The blob is
        stored as a loose object here (its format is fixed: zlib of `blob <size>\\0<data>`,
        named by its hash), so that one git process, `update-ref` with hooks off, does it."""
        oid = blob_id(data, length=64 if self._sha256() else 40)
        path = self.git_dir / "objects" / oid[:2] / oid[2:]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            packed = zlib.compress(b"blob %d\0" % len(data) + data)
            atomic_write_bytes(path, packed, durable=True)
            with contextlib.suppress(OSError):
                os.chmod(path, 0o444)
        done = git(
            self.git_dir,
            f"--git-dir={self.git_dir}",
            "update-ref",
            "-m",
            "ai-sdlc",
            ref,
            oid,
            check=False,
        )
        if not done.ok:
            if "couldn't write" in done.stderr:
                _check_room(self.git_dir / ref)
            raise failure(done)

    def _sha256(self) -> bool:
        try:
            config = (self.git_dir / "config").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return re.search(r"(?im)^\s*objectformat\s*=\s*sha256\s*$", config) is not None

    def remove_all(self, prefix: str) -> None:
        """Delete the refs directly under `prefix` (a folder ending in `/`; not deeper)."""
        names = self._git("for-each-ref", "--format=%(refname)", prefix, check=False)
        for name in names.splitlines():
            if "/" not in name.removeprefix(prefix):
                self._git("update-ref", "-d", name, check=False)


def _check_room(ref_path: Path) -> None:
    """git says only "couldn't write '<ref>.lock'" when the write into a lock it created fails
    (errno is lost): a page written beside it tells a full disk (raised as the `OSError`, which
    `errors.disk_full` reports as such) from anything else (then git's own error stands)."""
    folder = ref_path.parent
    probe = folder / f".ai-sdlc-room-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise OSError(exc.errno, exc.strerror, os.fspath(ref_path) + ".lock") from exc
        return
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise OSError(exc.errno, exc.strerror, os.fspath(ref_path) + ".lock") from exc
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
