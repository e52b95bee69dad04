"""Every file the change touched is newer than any build output before it is verified.

Build tools that decide by modification time (Cargo's fingerprints, make, incremental
compilers) rebuild a source only when it is newer than what was built from it. An agent may
build and test a right implementation itself, then write a wrong one with the right one's
old modification time: the git-ignored `target/` then calls the build fresh and the
verification runs the right code the diff does not hold. So, before each verification of an
attempt, the files the change adds or modifies (against the story's base: committed,
uncommitted or untracked) get a modification time past every git-ignored file's in the work
tree (the story's environment, `.venv/` and `node_modules/`, left out: no build tool reads
those as its outputs).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ai_sdlc.verify.protect import changed_files, git_bytes

#: Git-ignored folders that hold the environment, not build outputs.
ENVIRONMENT = (".venv/", "node_modules/")
#: How far past the newest build output a changed file is put (whole seconds: some tools
#: compare modification times at that grain).
MARGIN_NS = 2_000_000_000


def newer_than_outputs(path: Path, base: str) -> list[str]:
    """Give the files the change adds or modifies against `base` a modification time past
    every git-ignored file's in the work tree at `path`; the files, project-relative."""
    touched = [rel for status, rel in changed_files(path, base) if status != "D"]
    out = git_bytes(path, "ls-files", "--others", "--exclude-standard", "-z", "--", ".")
    touched += [os.fsdecode(f) for f in out.split(b"\0") if f]
    files = [rel for rel in dict.fromkeys(touched) if _regular(path / rel)]
    if not files:
        return []
    stamp = max(time.time_ns(), _newest_output(path) + MARGIN_NS)
    for rel in files:
        os.utime(path / rel, ns=(stamp, stamp), follow_symlinks=False)
    return files


def _newest_output(path: Path) -> int:
    """The newest modification time among the git-ignored files (0: none)."""
    out = git_bytes(
        path, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z",
        "--", ".",
    )  # fmt: skip
    newest = 0
    for entry in (os.fsdecode(f) for f in out.split(b"\0") if f):
        if entry.startswith(ENVIRONMENT):
            continue
        for root, _dirs, names in os.walk(path / entry):
            for name in names:
                newest = max(newest, _mtime(Path(root, name)))
        newest = max(newest, _mtime(path / entry))
    return newest


def _mtime(file: Path) -> int:
    try:
        return os.lstat(file).st_mtime_ns
    except OSError:
        return 0


def _regular(file: Path) -> bool:
    try:
        return file.is_file() and not file.is_symlink()
    except OSError:
        return False
