"""Listing cache: each story's validated frontmatter, keyed by its file's stat.

`ai-sdlc status` over thousands of stories must not re-parse unchanged files. An entry is used
only when the story file's (mtime_ns, size, inode) match what was read, so any edit (ours are
atomic replaces: new inode; editors change mtime) invalidates it. Files modified within the last
`RACY_SECONDS` are not cached: a second edit inside one timestamp tick with the same size would
otherwise be invisible (git's "racy clean" problem). The cache is a single JSON file under
`.ai-sdlc/.cache/`; a corrupt, foreign or old-format file is ignored and rebuilt, and a failed
write (read-only project) is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

FORMAT = "ai-sdlc/story-cache"
VERSION = 2  # 2: hostile-file limits and stricter values (old entries may now be invalid)
FILE_NAME = "stories.json"
RACY_SECONDS = 2.0

Stamp = tuple[int, int, int]


def stamp_of(result: os.stat_result) -> Stamp:
    return (result.st_mtime_ns, result.st_size, result.st_ino)


class CachedStory(msgspec.Struct):
    """One story's cached frontmatter (or its error), valid while the file's stamp is unchanged."""

    stamp: Stamp
    #: {"fm": encoded frontmatter, "plain": bool} or {"error": [message, line, column, hint]}
    payload: dict[str, Any]


class StoryCache:
    """Load once, look up per story, save when something changed."""

    def __init__(self, folder: Path, stories_dir: Path) -> None:
        self.path = folder / FILE_NAME
        self._folder = folder
        self._owner = str(stories_dir)
        self._old: dict[str, CachedStory] = {}
        self._new: dict[str, CachedStory] = {}
        self._dirty = False

    def load(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                raw = json.loads(handle.read())
        except (OSError, ValueError):
            return
        if (
            not isinstance(raw, dict)
            or raw.get("format") != FORMAT
            or raw.get("version") != VERSION
            or raw.get("stories_dir") != self._owner
            or not isinstance(raw.get("entries"), dict)
        ):
            return
        for story_id, item in raw["entries"].items():
            entry = _entry(item)
            if entry is not None:
                self._old[story_id] = entry

    def get(self, story_id: str, stamp: Stamp) -> dict[str, Any] | None:
        entry = self._old.get(story_id)
        if entry is None or entry.stamp != stamp:
            self._dirty = True
            return None
        self._new[story_id] = entry
        return entry.payload

    def put(self, story_id: str, stamp: Stamp, payload: dict[str, Any], now_ns: int) -> None:
        if now_ns - stamp[0] < RACY_SECONDS * 1e9:
            return  # too fresh to trust its timestamp; parse again next time
        self._new[story_id] = CachedStory(stamp, payload)
        self._dirty = True

    def save(self, before_write: Callable[[], None] | None = None) -> None:
        """Write the entries used or added in this run (dropping deleted stories);
        `before_write` runs first when something is written (the store's .gitignore check)."""
        if not self._dirty and self._new.keys() == self._old.keys():
            return
        if before_write is not None:
            before_write()
        body = {
            "format": FORMAT,
            "version": VERSION,
            "stories_dir": self._owner,
            "entries": {k: [*e.stamp, e.payload] for k, e in sorted(self._new.items())},
        }
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        with contextlib.suppress(OSError):
            from ai_sdlc import fsutil

            self._folder.mkdir(parents=True, exist_ok=True)
            fsutil.atomic_write_bytes(self.path, data, durable=False)


def _entry(item: object) -> CachedStory | None:
    if not (isinstance(item, list) and len(item) == 4):
        return None
    mtime, size, inode, payload = item
    if not all(type(n) is int for n in (mtime, size, inode)) or not isinstance(payload, dict):
        return None
    if "fm" in payload and isinstance(payload["fm"], dict):
        return CachedStory((mtime, size, inode), payload)
    error = payload.get("error")
    if isinstance(error, list) and len(error) == 4 and isinstance(error[0], str):
        return CachedStory((mtime, size, inode), payload)
    return None
