"""Workspace snapshots for the CLI-agent providers, which cannot be confined tool by tool: a
read-only phase is checked afterwards by comparing the files before and after it."""

from __future__ import annotations

import os
from pathlib import Path

from ai_sdlc.providers.tools import SKIP_DIRS

Snapshot = dict[str, tuple[int, int]]


def snapshot(root: Path, *, limit: int = 50_000) -> Snapshot | None:
    """(size, mtime_ns) of every file under `root` (minus SKIP_DIRS); None past `limit` files."""
    state: Snapshot = {}
    base = root.resolve()
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = Path(folder) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            state[path.relative_to(base).as_posix()] = (st.st_size, st.st_mtime_ns)
            if len(state) > limit:
                return None
    return state


def changed_paths(before: Snapshot, after: Snapshot) -> list[str]:
    """Files added, removed or modified between two snapshots, sorted."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))
