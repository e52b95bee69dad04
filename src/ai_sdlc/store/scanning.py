"""Reading story folders for `StoryStore.scan`: each story file parsed into the listing cache's
payload (or taken from it while its stamp is unchanged), and the error for each folder or file
that cannot be a story (a symbolic link, not a regular file, unreadable, invalid YAML).

Files are opened without following a symlink and without blocking on a FIFO; an error payload
carries the reason the one reader every command uses gives, so `status` and `show` agree.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store.cache import Stamp, StoryCache, stamp_of
from ai_sdlc.store.story import Story


def read_for_cache(path: str, name: str, now_ns: int, cache: StoryCache) -> dict[str, Any] | None:
    """Parse one story (fast path first) into a cache payload; None if it vanished.

    Opened without following a symlink and without blocking on a FIFO; a file that is not a
    readable regular one is an error payload (not cached: its stamp says nothing).
    """
    from ai_sdlc.store import loading
    from ai_sdlc.store.values import encode

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError:
        return unreadable_payload(path)
    try:
        with open(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return unreadable_payload(path)
            stamp = stamp_of(info)
            data = handle.read()
    except OSError:
        return unreadable_payload(path)
    try:
        plain, _ = loading.load_fast(path, name, data)
        form, same = encode(plain)
        payload: dict[str, Any] = {"fm": form, "plain": same}
    except InvalidInputError as exc:
        payload = {"error": [bare_message(exc), exc.line, exc.column, exc.hint]}
    cache.put(name, stamp, payload, now_ns)
    return payload


def unreadable_payload(path: str) -> dict[str, Any]:
    """The error payload of a story file that cannot be read as a regular file (the reason
    comes from the one reader every command uses, so `status` and `show` say the same)."""
    from ai_sdlc.store import loading

    try:
        loading.read(Path(path))
    except InvalidInputError as exc:
        return {"error": [bare_message(exc), exc.line, exc.column, exc.hint]}
    except OSError as exc:
        return {"error": [f"cannot be read: {exc.strerror or exc}", None, None, None]}
    return {"error": ["changed while it was being read; run the command again", None, None, None]}


def error_from(path: str, payload: dict[str, Any]) -> InvalidInputError:
    message, line, column, hint = payload["error"]
    return InvalidInputError(message, path=path, line=line, column=column, hint=hint)


def refused_folder(folder: str) -> InvalidInputError:
    kind = "a symbolic link"
    with contextlib.suppress(OSError):
        kind = f"a symbolic link (to {os.readlink(folder)})"
    return InvalidInputError(
        f"refused: the story folder is {kind}; .ai-sdlc/ must be a real folder tree",
        path=folder,
        hint="replace the link with a real folder (or remove it)",
    )


def not_a_story(folder: str, story_file: str) -> InvalidInputError | bool | None:
    """Why a story folder cannot be used: an InvalidInputError when the folder is a symlink or
    not a folder, or story.md is not a regular file; True when story.md is missing; None when
    both are fine (lstat only: nothing is followed or opened)."""
    from ai_sdlc import untrusted

    try:
        mode = os.lstat(folder).st_mode
    except OSError:
        return True
    if stat.S_ISLNK(mode):
        return refused_folder(folder)
    if not stat.S_ISDIR(mode):
        return True  # e.g. a stray file named S-0001: no story there
    try:
        mode = os.lstat(story_file).st_mode
    except FileNotFoundError:
        return True
    except OSError as exc:
        return InvalidInputError(
            f"cannot be read: {exc.strerror or exc}", path=story_file, hint=untrusted.REGULAR_HINT
        )
    kind = untrusted.kind_of(mode)
    if kind is None:
        return None
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            kind = f"a symbolic link (to {os.readlink(story_file)})"
    return untrusted.not_regular(story_file, kind)


def bare_message(exc: InvalidInputError) -> str:
    where = exc.path or ""
    if exc.line is not None:
        where += f":{exc.line}"
        if exc.column is not None:
            where += f":{exc.column}"
    prefix = where + ": " if exc.path is not None else ""
    return exc.message[len(prefix) :] if exc.message.startswith(prefix) else exc.message


def from_cache(
    cache: StoryCache, name: str, path: str, stamp: Stamp
) -> Story | InvalidInputError | None:
    payload = cache.get(name, stamp)
    if payload is None:
        return None
    try:
        return from_payload(name, path, payload)
    except (ValueError, TypeError, KeyError):
        return None  # a damaged entry: parse the file again


def from_payload(name: str, path: str, payload: dict[str, Any]) -> Story | InvalidInputError:
    from ai_sdlc.store import loading
    from ai_sdlc.store.values import decode

    if "error" in payload:
        message, line, column, hint = payload["error"]
        if not all(v is None or type(v) is int for v in (line, column)):
            raise TypeError("malformed error entry")
        return InvalidInputError(
            str(message),
            path=path,
            line=line,
            column=column,
            hint=hint if isinstance(hint, str) else None,
        )
    same = payload.get("plain") is True
    frontmatter = payload["fm"] if same else decode(payload["fm"])
    if not isinstance(frontmatter, dict):
        raise TypeError("malformed frontmatter entry")
    return Story(
        name, path, frontmatter, read_body=lambda: loading.body_of(Path(path)), json_ready=same
    )
