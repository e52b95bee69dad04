"""Read a story for a locked edit with one parse, and write its changes back exactly.

A file in the fast loader's subset gets the values and the line map the splicer needs from one
pass of libyaml's C parser (values with ruamel's YAML 1.2 rules, node marks), and a write
re-reads only the lines it wrote. Anything else (anchors, tags, tabs, raw Unicode line
separators, an invalid file) takes ruamel's round-trip path, which also words the errors.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.store import fastload, loading, schema, splice
from ai_sdlc.store.storyfile import StoryText
from ai_sdlc.store.values import to_plain

#: Line breaks YAML 1.2 does not count but libyaml and our line splitter do: take ruamel's path.
_ODD_BREAKS = re.compile("[\x85\u2028\u2029]")


class Editable(msgspec.Struct):
    """A story file parsed for editing."""

    text: StoryText
    data: MutableMapping[Any, Any]  # what the caller changes (ruamel's mapping on the slow path)
    before: dict[Any, Any]  # plain snapshot of the values as read
    shape: splice.Layout | None
    fast: bool

    def frontmatter_for(self, after: dict[Any, Any], path: str) -> str:
        """New frontmatter text holding `after` (plain values), checked before it is returned."""
        return splice.rewrite(
            self.text.frontmatter,
            self.text.newline,
            self.before,
            after,
            self.shape,
            read=_fast_reader(path) if self.fast else _reference_reader(path),
            lines_only=self.fast,
            live=None if self.fast else self.data,
            path=path,
        )


def load(path: Path, folder_id: str, data: bytes) -> Editable:
    """Parse + validate a story for editing; an invalid file is an InvalidInputError with its
    line and column (the same error `StoryStore.get` gives)."""
    shown = str(path)
    parts = loading.parts_of(data, shown)
    frontmatter = parts.frontmatter
    if not _ODD_BREAKS.search(frontmatter):
        try:
            values, root = fastload.load_with_node(frontmatter)
        except fastload.NotFast:
            pass
        else:
            if isinstance(values, dict) and schema.find_problem(values, folder_id) is None:
                layout = splice.layout(frontmatter, root, list(values))
                if layout is not None:
                    mutable = OrderedDict((k, to_plain(v)) for k, v in values.items())
                    return Editable(parts, mutable, values, layout, fast=True)
    return _load_reference(path, folder_id, data)


def _load_reference(path: Path, folder_id: str, data: bytes) -> Editable:
    from ai_sdlc.store import roundtrip

    loaded = loading.load_roundtrip(path, folder_id, data)
    frontmatter = loaded.text.frontmatter
    shape = splice.layout(frontmatter, roundtrip.compose(frontmatter), list(loaded.plain))
    return Editable(loaded.text, loaded.data, loaded.plain, shape, fast=False)


def _reference_reader(path: str) -> splice.Reader:
    from ai_sdlc.store import roundtrip

    return lambda text: roundtrip.load(text, path)


def _fast_reader(path: str) -> splice.Reader:
    def read(text: str) -> Any:
        try:
            return fastload.load(text)
        except fastload.NotFast:
            from ai_sdlc.store import roundtrip

            return roundtrip.load(text, path)

    return read
