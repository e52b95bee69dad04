"""`Story`: one story's id, paths, frontmatter and body, plus the counter helpers guardrails use.

A story from `StoryStore.get` holds ruamel's round-trip mapping; one from `list()` holds plain
values (from the fast loader or the cache) and reads its body lazily. Only a story handed out by
`StoryStore.edit` may be changed: its changes are written when the `with` block ends.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store.schema import COUNTER_FIELDS, STATUSES
from ai_sdlc.store.values import json_safe, to_plain


class Story:
    """A story as read from `.ai-sdlc/stories/<id>/story.md`."""

    def __init__(
        self,
        story_id: str,
        path: Path | str,
        frontmatter: MutableMapping[str, Any],
        *,
        body: str | None = None,
        read_body: Callable[[], str] | None = None,
        json_ready: bool = False,
    ) -> None:
        self.id = story_id
        self._path = path
        self.frontmatter = frontmatter
        self._body = body
        self._read_body = read_body
        self._json_ready = json_ready
        self._editable = False
        self._body_changed = False
        #: Called by `StoryStore.edit` after the file is written, still under the story lock
        #: (the state owner appends the story's events there).
        self.after_write: list[Callable[[], None]] = []
        #: The bytes `StoryStore.edit` wrote (file and folder fsynced), None when it wrote
        #: nothing (read by the `after_write` hooks).
        self.written: bytes | None = None

    def __repr__(self) -> str:
        return f"Story({self.id!r}, status={self.status!r}, title={self.title!r})"

    @property
    def path(self) -> Path:
        """The story's `story.md` (built lazily: listing thousands of stories skips pathlib)."""
        if not isinstance(self._path, Path):
            self._path = Path(self._path)
        return self._path

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def body(self) -> str:
        """Markdown after the frontmatter, exactly as in the file (CRLF kept)."""
        if self._body is None:
            if self._read_body is None:
                return ""
            self._body = self._read_body()
        return self._body

    @body.setter
    def body(self, text: str) -> None:
        """Replace the body (inside `edit` only); line endings follow the file's."""
        self._require_edit("set the body")
        if not isinstance(text, str):
            raise TypeError("a story body is text")
        self._body = text
        self._body_changed = True

    @property
    def title(self) -> str:
        return str(self.frontmatter.get("title", ""))

    @property
    def status(self) -> str:
        return str(self.frontmatter.get("status", ""))

    @status.setter
    def status(self, value: str) -> None:
        self._require_edit("set the status")
        if value not in STATUSES:
            raise ValueError(f"unknown status {value!r}; use one of {', '.join(STATUSES)}")
        self.frontmatter["status"] = value

    def counter(self, name: str) -> int:
        """Value of a counter field; a missing counter is 0."""
        value = self.frontmatter.get(name)
        return int(value) if value is not None else 0

    def increment(self, name: str, by: int = 1) -> int:
        """Add `by` to a counter (inside `edit` only); returns the new value."""
        self._require_edit(f"increment {name}")
        if name not in COUNTER_FIELDS:
            raise ValueError(f"{name!r} is not a counter; counters: {', '.join(COUNTER_FIELDS)}")
        if isinstance(by, bool) or not isinstance(by, int) or by < 1:
            raise ValueError("increment by a whole number >= 1")
        value = self.counter(name) + by
        self.frontmatter[name] = value
        return value

    @property
    def recovery_breakdown(self) -> dict[str, int]:
        """Recovery attempts per kind (a copy; empty when the story has none)."""
        raw = self.frontmatter.get("recovery_breakdown")
        if not isinstance(raw, MutableMapping):
            return {}
        return {str(k): int(v) for k, v in raw.items()}

    def to_json(self) -> dict[str, Any]:
        """Frontmatter as JSON-safe data (dates as ISO strings), with `id` first."""
        plain = self.frontmatter if self._json_ready else json_safe(to_plain(self.frontmatter))
        data = dict(plain)
        data.pop("id", None)
        return {"id": self.id, **data}

    def _require_edit(self, action: str) -> None:
        if not self._editable:
            raise RuntimeError(f"cannot {action} outside `with store.edit({self.id!r})`")


class StoryScan(msgspec.Struct):
    """Result of `StoryStore.scan()`: valid stories (sorted by id) and per-file errors."""

    stories: list[Story] = msgspec.field(default_factory=list)
    errors: list[InvalidInputError] = msgspec.field(default_factory=list)
