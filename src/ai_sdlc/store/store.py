"""`StoryStore`: the project's stories on disk, read fast, changed only under a lock.

Layout: `<root>/.ai-sdlc/stories/S-0001/story.md` (one folder per story, also holding research.md,
plan.md, review.md, events.jsonl and logs). Every read-modify-write holds a cross-process lock on
a sidecar file in `.ai-sdlc/.locks/` across the read AND the write (a lock on the file being
replaced protects nothing once os.replace swaps the inode). Writes are atomic and change only
the frontmatter lines whose values changed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ai_sdlc.errors import BusyError, InvalidInputError, StoryNotFoundError, UsageError
from ai_sdlc.store import ids, schema
from ai_sdlc.store.cache import Stamp, StoryCache, stamp_of
from ai_sdlc.store.story import Story, StoryScan

if TYPE_CHECKING:
    from filelock import FileLock

AI_DIR = ".ai-sdlc"
STORIES = "stories"
STORY_FILE = "story.md"
GITIGNORE_LINES = (".cache/", ".locks/", "state/", "runs/")
PRIORITY_GAP = 10


class StoryStore:
    """Stories of the project at `root` (the folder holding `.ai-sdlc`)."""

    def __init__(
        self,
        root: Path,
        *,
        lock_timeout: float = 60.0,
        today: Callable[[], dt.date] = dt.date.today,
        now_ns: Callable[[], int] = time.time_ns,
        write_cache: bool = True,
    ) -> None:
        self.root = Path(root)
        #: False for commands that must write nothing at all (`run --dry-run`).
        self.write_cache = write_cache
        self.lock_timeout = lock_timeout
        self._today = today
        self._now_ns = now_ns

    # -- layout -----------------------------------------------------------------------------

    @property
    def ai_dir(self) -> Path:
        return self.root / AI_DIR

    @property
    def stories_dir(self) -> Path:
        return self.ai_dir / STORIES

    @property
    def locks_dir(self) -> Path:
        return self.ai_dir / ".locks"

    @property
    def cache_dir(self) -> Path:
        return self.ai_dir / ".cache"

    def is_initialized(self) -> bool:
        return self.stories_dir.is_dir()

    def init(self) -> bool:
        """Create `.ai-sdlc/stories/` and `.ai-sdlc/.gitignore`; True if anything was created."""
        created = False
        for folder in (self.ai_dir, self.stories_dir):
            if folder.is_dir():
                continue
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise InvalidInputError(
                    "exists but is not a folder", path=str(folder), hint="move the file away"
                ) from None
            created = True
        return self._ensure_gitignore() or created

    def _ensure_gitignore(self) -> bool:
        from ai_sdlc import fsutil

        path = self.ai_dir / ".gitignore"
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        present = {line.strip() for line in current.splitlines()}
        missing = [line for line in GITIGNORE_LINES if line not in present]
        if not missing:
            return False
        header = "" if current else "# ai-sdlc local state (caches, locks, run logs): not for git\n"
        separator = "" if not current or current.endswith("\n") else "\n"
        fsutil.atomic_write_text(path, current + separator + header + "\n".join(missing) + "\n")
        return True

    def _require_project(self) -> None:
        if not self.is_initialized():
            raise UsageError(
                f"no ai-sdlc project in {self.root} (no {AI_DIR}/{STORIES} folder)",
                hint="run `ai-sdlc init` there, or pass --project",
            )

    # -- references and paths --------------------------------------------------------------------

    def folder(self, story_id: str) -> Path:
        """Folder of an existing story; StoryNotFoundError if there is none."""
        canonical = ids.canonical_id(story_id)
        path = self.stories_dir / canonical
        if not (path / STORY_FILE).is_file():
            self._require_project()
            raise StoryNotFoundError(
                f"no story {canonical} in {self.stories_dir}",
                hint="`ai-sdlc status` lists the stories",
            )
        return path

    def story_path(self, story_id: str) -> Path:
        return self.folder(story_id) / STORY_FILE

    def resolve(self, ref: str) -> str:
        """Story id for a CLI reference: `S-0001`, `s-1` or a slug (UsageError / not found)."""
        story_id, slug = ids.parse_ref(ref)
        if story_id is not None:
            return self.folder(story_id).name
        matches = [s.id for s in self.list() if s.frontmatter.get("slug") == slug]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise UsageError(
                f"slug {slug!r} matches several stories: {', '.join(matches)}",
                hint="use the story id instead",
            )
        raise StoryNotFoundError(
            f"no story with id or slug {ref!r} in {self.stories_dir}",
            hint="`ai-sdlc status` lists the stories",
        )

    def artifact_path(self, story_id: str, name: str) -> Path:
        """Path of a file in the story's folder (`plan.md`, `events.jsonl`, ...)."""
        return self.folder(story_id) / ids.check_artifact_name(name)

    def write_artifact(self, story_id: str, name: str, text: str) -> Path:
        """Atomically write an artifact (never `story.md`: that goes through `edit`)."""
        from ai_sdlc import fsutil

        if name == STORY_FILE:
            raise UsageError("story.md is written through StoryStore.edit, not as an artifact")
        path = self.artifact_path(story_id, name)
        fsutil.atomic_write_text(path, text)
        return path

    def read_artifact(self, story_id: str, name: str) -> str | None:
        """Exact text of an artifact (no newline translation), or None when there is none."""
        try:
            return self.artifact_path(story_id, name).read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None

    # -- reading ---------------------------------------------------------------------------------

    def get(self, story_id: str) -> Story:
        """Full round-trip parse + validation of one story."""
        from ai_sdlc.store import loading

        path = self.story_path(story_id)
        loaded = loading.load_roundtrip(path, path.parent.name, loading.read(path))
        return Story(path.parent.name, path, loaded.data, body=loaded.text.body)

    def list(self) -> list[Story]:
        """All valid stories, sorted by id (invalid ones are in `scan().errors`)."""
        return self.scan().stories

    def scan(self) -> StoryScan:
        """Every story folder: valid stories sorted by id, and one error per invalid file."""
        self._require_project()
        cache = StoryCache(self.cache_dir, self.stories_dir)
        cache.load()
        result = StoryScan()
        now_ns = self._now_ns()
        base = str(self.stories_dir)
        for _, name in sorted(self._story_folders()):
            path = os.path.join(base, name, STORY_FILE)
            try:
                stamp = stamp_of(os.stat(path))
            except OSError:
                continue  # a folder without story.md (e.g. an `add` in progress)
            item = _from_cache(cache, name, path, stamp)
            if item is None:
                payload = _read_for_cache(path, name, now_ns, cache)
                if payload is None:
                    continue
                item = _from_payload(name, path, payload)
            if isinstance(item, Story):
                result.stories.append(item)
            else:
                result.errors.append(item)
        if self.write_cache:
            cache.save()
        return result

    def _story_folders(self) -> Iterator[tuple[int, str]]:
        with os.scandir(self.stories_dir) as entries:
            for entry in entries:
                number = ids.id_number(entry.name)
                if number is not None and entry.is_dir():
                    yield number, entry.name

    # -- writing ---------------------------------------------------------------------------------

    def _lock(self, name: str) -> FileLock:
        from filelock import FileLock

        self.locks_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.locks_dir / f"{name}.lock"), timeout=self.lock_timeout)

    @contextmanager
    def _locked(self, name: str, what: str) -> Iterator[None]:
        from filelock import Timeout

        lock = self._lock(name)
        try:
            lock.acquire()
        except Timeout:
            raise BusyError(
                f"{what} is locked by another ai-sdlc process (waited {self.lock_timeout:g}s)",
                hint="wait for the other command to finish, then retry",
            ) from None
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def edit(self, story_id: str) -> Iterator[Story]:
        """Locked read-modify-write of one story.

        `story.frontmatter` (ruamel mapping) and `story.body` may be changed inside the block;
        on normal exit the story is validated and written atomically, changing only the lines of
        changed keys (new keys are appended; `del story.frontmatter[k]` removes k's lines;
        setting a key to None writes `null`). Nothing is written if the block raises or if
        nothing changed. An invalid story file raises InvalidInputError and is left untouched.
        """
        from ai_sdlc import fsutil
        from ai_sdlc.store import loading, splice, storyfile

        path = self.story_path(story_id)
        story_name = path.parent.name
        with self._locked(story_name, f"story {story_name}"):
            data = loading.read(path)
            loaded = loading.load_roundtrip(path, story_name, data)
            story = Story(story_name, path, loaded.data, body=loaded.text.body)
            story._editable = True
            try:
                yield story
            finally:
                story._editable = False
            self._check_before_write(story, loaded.data, str(path))
            frontmatter = splice.rewrite(
                loaded.text.frontmatter, loaded.text.newline, loaded.plain, loaded.data, str(path)
            )
            body = loaded.text.body
            if story._body_changed:
                body = storyfile.normalise_newlines(story.body, loaded.text.newline)
            new = loaded.text.with_parts(frontmatter=frontmatter, body=body).text().encode()
            if new != data:
                _remove_stale_temps(path)
                fsutil.atomic_write_bytes(path, new)

    def _check_before_write(self, story: Story, data: Any, path: str) -> None:
        from ai_sdlc.store.values import UnsupportedValueError, to_plain

        try:
            plain = to_plain(data)
        except UnsupportedValueError as exc:
            raise TypeError(f"{path}: {exc}") from None
        problem = schema.find_problem(plain, story.id)
        if problem is not None:
            raise InvalidInputError(
                f"refusing to write: {problem.message}", path=path, hint=problem.hint
            )

    def add(
        self,
        title: str,
        *,
        type: str = "feature",
        labels: Iterable[str] = (),
        priority: int | None = None,
        body: str | None = None,
    ) -> Story:
        """Create a story with the next free id (safe against concurrent adds)."""
        from ai_sdlc import fsutil
        from ai_sdlc.store import render

        self._require_project()
        clean_title = _check_title(title)
        if type not in schema.STORY_TYPES:
            raise UsageError(
                f"unknown story type {type!r}", hint=f"use one of: {', '.join(schema.STORY_TYPES)}"
            )
        clean_labels = _check_labels(labels)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise UsageError("priority must be a whole number")
        with self._locked("ids", "story id allocation"):
            if priority is None:
                priority = self._next_priority()
            folder = self._claim_folder()
            created = self._today().isoformat()
            fields: list[tuple[str, Any]] = [
                ("id", folder.name),
                ("title", clean_title),
                ("slug", ids.slugify(clean_title)),
                ("priority", priority),
                ("status", "backlog"),
                ("type", type),
                ("created", created),
                ("updated", created),
                ("labels", clean_labels),
                *((flag, False) for flag in schema.FLAG_FIELDS),
            ]
            lines = ["---"]
            for key, value in fields:  # dates come out quoted, as the TypeScript tool writes them
                text = render.inline(value)
                lines += (
                    [f"{key}: {text}"] if text is not None else [f"{key}:", *render.block(value, 2)]
                )
            text_body = body if body is not None else f"# {clean_title}\n"
            fsutil.atomic_write_text(folder / STORY_FILE, "\n".join([*lines, "---", text_body]))
        return self.get(folder.name)

    def _next_priority(self) -> int:
        priorities = [p for s in self.list() if isinstance(p := s.frontmatter.get("priority"), int)]
        return max(priorities, default=0) + PRIORITY_GAP

    def _claim_folder(self) -> Path:
        """Make the next id's folder with an exclusive mkdir (the id lock is held)."""
        with os.scandir(self.stories_dir) as entries:
            numbers = [n for e in entries if (n := ids.any_id_number(e.name)) is not None]
        number = max(numbers, default=0) + 1
        while True:
            folder = self.stories_dir / ids.format_id(number)
            try:
                folder.mkdir()
            except FileExistsError:
                number += 1
                continue
            return folder


def _remove_stale_temps(path: Path) -> None:
    """Delete temp files of writers killed mid-write (safe: every writer holds this lock)."""
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _read_for_cache(path: str, name: str, now_ns: int, cache: StoryCache) -> dict[str, Any] | None:
    """Parse one story (fast path first) into a cache payload; None if it vanished."""
    from ai_sdlc.store import loading
    from ai_sdlc.store.values import encode

    try:
        with open(path, "rb") as handle:
            stamp = stamp_of(os.fstat(handle.fileno()))
            data = handle.read()
    except OSError:
        return None
    try:
        plain, _ = loading.load_fast(path, name, data)
        form, same = encode(plain)
        payload: dict[str, Any] = {"fm": form, "plain": same}
    except InvalidInputError as exc:
        payload = {"error": [_bare_message(exc), exc.line, exc.column, exc.hint]}
    cache.put(name, stamp, payload, now_ns)
    return payload


def _bare_message(exc: InvalidInputError) -> str:
    where = exc.path or ""
    if exc.line is not None:
        where += f":{exc.line}"
        if exc.column is not None:
            where += f":{exc.column}"
    prefix = where + ": " if exc.path is not None else ""
    return exc.message[len(prefix) :] if exc.message.startswith(prefix) else exc.message


def _from_cache(
    cache: StoryCache, name: str, path: str, stamp: Stamp
) -> Story | InvalidInputError | None:
    payload = cache.get(name, stamp)
    if payload is None:
        return None
    try:
        return _from_payload(name, path, payload)
    except (ValueError, TypeError, KeyError):
        return None  # a damaged entry: parse the file again


def _from_payload(name: str, path: str, payload: dict[str, Any]) -> Story | InvalidInputError:
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


def _check_title(title: str) -> str:
    clean = title.strip() if isinstance(title, str) else ""
    if not clean:
        raise UsageError("a story needs a title", hint='ai-sdlc add "Export the board as CSV"')
    if not clean.isprintable():
        raise UsageError("the title must be one line of printable text")
    return clean


def _check_labels(labels: Iterable[str]) -> list[str]:
    clean: list[str] = []
    for label in labels:
        text = label.strip() if isinstance(label, str) else ""
        if not text or not text.isprintable():
            raise UsageError(f"invalid label {label!r}", hint="labels are short one-line words")
        if text not in clean:
            clean.append(text)
    return clean
