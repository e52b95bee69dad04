"""Small records kept as blobs under `refs/ai-sdlc/` in a repository's own git folder.

A ref in the main repository's git folder survives what wipes the project's git-ignored files
(`git clean -xfd`, `rm -rf .ai-sdlc/state`). Reading one is on every story transaction's path,
so it does not start git: the ref's object id is read from its file (or `packed-refs`) and
compared with the id the expected content would have (git's blob hash, computed here); git is
started only to read a blob whose content is not the expected one, and to write. Every write
runs with hooks and fsmonitor off, naming the git folder explicitly.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ai_sdlc.git.run import git

_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


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
        """The refs of the repository holding `root`; None when it is not in one."""
        done = git(root, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
        path = done.stdout.strip()
        if not done.ok or not path:
            return None
        return cls(Path(path))

    def _git(self, *args: str, input: str | None = None, check: bool = True) -> str:
        done = git(
            self.git_dir, f"--git-dir={self.git_dir}", *_SAFE, *args, input=input, check=check
        )
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
        done = git(
            self.git_dir, f"--git-dir={self.git_dir}", *_SAFE, "cat-file", "blob", oid, check=False
        )
        return done.stdout.encode("utf-8") if done.ok else b""

    def write(self, ref: str, data: bytes) -> None:
        """Point `ref` at a blob holding `data` (raises `GitError` when git fails)."""
        oid = self._git("hash-object", "-w", "--stdin", input=data.decode("utf-8"))
        self._git("update-ref", "-m", "ai-sdlc", ref, oid)
