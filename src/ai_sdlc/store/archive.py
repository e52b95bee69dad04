"""Archived stories: `.ai-sdlc/archive/<id>/`, the story's whole folder moved out of the backlog.

An archived story is no longer listed (`status`, `list`, runs and the graph never see it), but it
is kept as it was (its file, artifacts and events), committed like the backlog, and `show`
still finds it there. Its id is never given to a new story: the recovery ledger of an id
(`.ai-sdlc/state/ledger/<id>.jsonl`) stays with that id. Only the state owner moves a story here
(`StoryState.archive`), under the story's lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import ids
from ai_sdlc.store.store import ARCHIVE, StoryStore, _id_numbers
from ai_sdlc.store.story import Story


def archive_dir(store: StoryStore) -> Path:
    return store.ai_dir / ARCHIVE


def archived_numbers(store: StoryStore) -> list[int]:
    """The id numbers of archived stories (never reused by `add`)."""
    return _id_numbers(archive_dir(store))


def archived_path(store: StoryStore, story_id: str) -> Path | None:
    """The archived `story.md` of `story_id`, or None when it was not archived."""
    path = archive_dir(store) / ids.canonical_id(story_id) / "story.md"
    return path if path.is_file() and not path.parent.is_symlink() else None


def get_archived(store: StoryStore, story_id: str) -> Story:
    """An archived story, read and checked as `StoryStore.get` reads an active one."""
    from ai_sdlc.store import editing, loading

    path = archived_path(store, story_id)
    if path is None:
        raise FileNotFoundError(story_id)
    loaded = editing.load(path, path.parent.name, loading.read(path))
    return Story(path.parent.name, path, loaded.data, body=loaded.text.body)


def move_to_archive(store: StoryStore, story_id: str) -> Path:
    """Move the story's folder to the archive under its lock; returns the new folder."""
    folder = store.folder(story_id)
    target = archive_dir(store) / folder.name
    with store._locked(folder.name, f"story {folder.name}"):
        if os.path.lexists(target):
            raise InvalidInputError(
                f"cannot archive {folder.name}: the archive already holds a folder of that id",
                path=str(target),
                hint="move that folder away first",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(folder, target)
    from ai_sdlc.fsutil import fsync_dir

    fsync_dir(target.parent)
    fsync_dir(folder.parent)
    return target
