"""`StoryStore`: the project's stories on disk, read fast, changed only under a lock.

Layout: `<root>/.ai-sdlc/stories/S-0001/story.md` (one folder per story, also holding research.md,
plan.md, review.md, events.jsonl and logs). Every read-modify-write holds a cross-process lock on
a sidecar file in `.ai-sdlc/.locks/` across the read AND the write (a lock on the file being
replaced protects nothing once os.replace swaps the inode). Writes are atomic and change only
the frontmatter lines whose values changed.

One file on purpose (about 530 lines): every method works under the same locks and cache of
one `StoryStore`; ids, scanning, the schema and the cache are modules of their own already.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ai_sdlc.errors import InvalidInputError, StoryNotFoundError, UsageError
from ai_sdlc.secrets import redact, redact_title
from ai_sdlc.store import ids, scanning, schema
from ai_sdlc.store.cache import StoryCache, stamp_of
from ai_sdlc.store.story import Story, StoryScan
from ai_sdlc.untrusted import strip_controls

if TYPE_CHECKING:
    from ai_sdlc.locks import SidecarLock

AI_DIR = ".ai-sdlc"
STORIES = "stories"
#: Archived stories' folders (`store.archive`), beside `stories/`.
ARCHIVE = "archive"
STORY_FILE = "story.md"
GITIGNORE_LINES = (".cache/", ".locks/", "state/", "runs/", "worktrees/")
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
        self._ignore_checked = False

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
        self._require_real_tree()
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
        if not current:  # a new file ignores itself too: `git status` stays as the user left it
            missing.append(".gitignore")
        header = "" if current else "# ai-sdlc local state (caches, locks, run logs): not for git\n"
        separator = "" if not current or current.endswith("\n") else "\n"
        fsutil.atomic_write_text(path, current + separator + header + "\n".join(missing) + "\n")
        return True

    def ensure_ignored(self) -> None:
        """Before the tool makes one of its own folders (cache, locks, state, runs, worktrees):
        make sure `.ai-sdlc/.gitignore` hides them, also in a project `init` never ran in (one
        the TypeScript tool made). Checked once per store; a read-only project is left as is."""
        if self._ignore_checked or not self.is_initialized():
            return
        self._ignore_checked = True
        with contextlib.suppress(OSError):
            self._ensure_gitignore()

    def _require_project(self) -> None:
        if not self.is_initialized():
            raise UsageError(
                f"no ai-sdlc project in {self.root} (no {AI_DIR}/{STORIES} folder)",
                hint="run `ai-sdlc init` there, or pass --project",
            )

    # -- references and paths --------------------------------------------------------------------

    def folder(self, story_id: str) -> Path:
        """Folder of an existing story; StoryNotFoundError if there is none.

        The folder and its story.md must be real (no symlink, FIFO, device...): anything else
        is an InvalidInputError naming the path and what it is, so that no read or write of a
        story ever leaves the project or blocks on a pipe.
        """
        canonical = ids.canonical_id(story_id)
        path = self.stories_dir / canonical
        self._require_real_tree()
        problem = scanning.not_a_story(str(path), str(path / STORY_FILE))
        if problem is None:
            return path
        if isinstance(problem, InvalidInputError):
            raise problem
        self._require_project()
        archived = self.ai_dir / ARCHIVE / canonical
        if (archived / STORY_FILE).is_file():  # `ai-sdlc archive` moved it: say where
            raise StoryNotFoundError(
                f"no story {canonical} in {self.stories_dir}: it was archived to {archived}",
                hint=f"`ai-sdlc show {canonical}` shows it; move its folder back into "
                f"{self.stories_dir} to work on it again",
            )
        raise StoryNotFoundError(
            f"no story {canonical} in {self.stories_dir}",
            hint="`ai-sdlc status` lists the stories",
        )

    def _require_real_tree(self) -> None:
        """`.ai-sdlc/` and `.ai-sdlc/stories/` must be real folders, not symlinks."""
        for folder in (self.ai_dir, self.stories_dir):
            try:
                mode = os.lstat(folder).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                raise InvalidInputError(
                    "refused: it is a symbolic link; .ai-sdlc/ must be a real folder tree",
                    path=str(folder),
                    hint="replace the link with the folder it points to (or remove it)",
                )

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

    def write_artifact(
        self, story_id: str, name: str, text: str, *, sync_folder: bool = True
    ) -> Path:
        """Atomically write an artifact (never `story.md`: that goes through `edit`), redacted.
        `sync_folder=False`: the caller fsyncs the story's folder (an `edit` writing `story.md`
        does), so one folder fsync makes both renames durable."""
        from ai_sdlc import fsutil

        if name == STORY_FILE:
            raise UsageError("story.md is written through StoryStore.edit, not as an artifact")
        path = self.artifact_path(story_id, name)
        # Artifacts are agent text (research, plan, review): redacted here, whoever writes them,
        # and without terminal control sequences (`cat plan.md` must not drive the terminal).
        data = redact(strip_controls(text)).encode("utf-8")
        fsutil.atomic_write_bytes(path, data, sync_folder=sync_folder)
        return path

    def replace_unreadable(self, story_id: str, data: bytes) -> None:
        """Put a saved copy back in place of a `story.md` that no longer parses (checkpoint
        restore), under the story's lock; a readable file is refused (use `edit`)."""
        from ai_sdlc import fsutil
        from ai_sdlc.store import loading

        path = self.story_path(story_id)
        with self._locked(path.parent.name, f"story {path.parent.name}"):
            try:
                loading.load_roundtrip(path, path.parent.name, loading.read(path))
            except InvalidInputError:
                fsutil.atomic_write_bytes(path, data)
                return
        raise UsageError(f"{path} is readable: change it through StoryStore.edit")

    def read_artifact(self, story_id: str, name: str) -> str | None:
        """Exact text of an artifact (no newline translation), or None when there is none."""
        from ai_sdlc import untrusted

        try:  # a regular file only: a symlinked plan.md must not show a file from elsewhere
            return untrusted.read_regular(self.artifact_path(story_id, name)).decode("utf-8")
        except FileNotFoundError:
            return None

    # -- reading ---------------------------------------------------------------------------------

    def get(self, story_id: str) -> Story:
        """Full parse + validation of one story: the reader `edit` uses (libyaml's C parser for
        most files, ruamel's round-trip for the rest), so the errors are the same."""
        from ai_sdlc.store import editing, loading

        path = self.story_path(story_id)
        loaded = editing.load(path, path.parent.name, loading.read(path))
        return Story(path.parent.name, path, loaded.data, body=loaded.text.body)

    def list(self) -> list[Story]:
        """All valid stories, sorted by id (invalid ones are in `scan().errors`)."""
        return self.scan().stories

    def scan(self) -> StoryScan:
        """Every story folder: valid stories sorted by id, and one error per invalid file."""
        self._require_project()
        self._require_real_tree()
        cache = StoryCache(self.cache_dir, self.stories_dir)
        cache.load()
        result = StoryScan()
        now_ns = self._now_ns()
        base = str(self.stories_dir)
        for _, name, linked in sorted(self._story_folders()):
            path = os.path.join(base, name, STORY_FILE)
            if linked:
                result.errors.append(scanning.refused_folder(os.path.join(base, name)))
                continue
            try:
                info = os.lstat(path)  # the same stamp as stat() for the regular files we read
            except FileNotFoundError:
                continue  # a folder without story.md (e.g. an `add` in progress)
            except OSError:
                info = None
            if info is None or not stat.S_ISREG(info.st_mode):
                result.errors.append(scanning.error_from(path, scanning.unreadable_payload(path)))
                continue
            stamp = stamp_of(info)
            item = scanning.from_cache(cache, name, path, stamp)
            if item is None:
                payload = scanning.read_for_cache(path, name, now_ns, cache)
                if payload is None:
                    continue
                item = scanning.from_payload(name, path, payload)
            if isinstance(item, Story):
                result.stories.append(item)
            else:
                result.errors.append(item)
        if self.write_cache:
            cache.save(before_write=self.ensure_ignored)
        return result

    def _story_folders(self) -> Iterator[tuple[int, str, bool]]:
        """(number, name, is a symlink) of every story folder; a symlink named like a story is
        listed too, so that scan() reports it as refused instead of hiding it."""
        with os.scandir(self.stories_dir) as entries:
            for entry in entries:
                number = ids.id_number(entry.name)
                if number is None:
                    continue
                if entry.is_symlink():
                    yield number, entry.name, True
                elif entry.is_dir():
                    yield number, entry.name, False

    # -- writing ---------------------------------------------------------------------------------

    def _lock(self, name: str) -> SidecarLock:
        from ai_sdlc.locks import SidecarLock

        self.ensure_ignored()
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        return SidecarLock(self.locks_dir / f"{name}.lock", timeout=self.lock_timeout)

    @contextmanager
    def _locked(self, name: str, what: str) -> Iterator[None]:
        from ai_sdlc.locks import held

        hint = "wait for the other command to finish, then retry"
        with held(self._lock(name), busy=f"{what} is locked", hint=hint):
            yield

    @contextmanager
    def graph_locked(self) -> Iterator[None]:
        """Held across a check of the whole backlog graph and the change it allows (a story's
        dependencies, an archive), so two such changes never both pass on the same old graph."""
        with self._locked("graph", "the backlog graph"):
            yield

    @contextmanager
    def edit(self, story_id: str) -> Iterator[Story]:
        """Locked read-modify-write of one story.

        `story.frontmatter` (a mutable mapping: ruamel's for files only ruamel reads, an
        OrderedDict otherwise) and `story.body` may be changed inside the block; on normal exit
        the story is validated and written atomically, changing only the lines of changed keys
        (new keys are appended; `del story.frontmatter[k]` removes k's lines; a key deleted and
        set again moves to the end, as in the mapping; setting a key to None writes `null`).
        Nothing is written if the block raises or if nothing changed. An invalid story file, or
        a value that cannot be stored exactly, raises InvalidInputError and nothing is written.
        One parse per edit: the read serves both the values and the line map of the splice.
        """
        from ai_sdlc import fsutil
        from ai_sdlc.store import editing, loading, storyfile

        path = self.story_path(story_id)
        story_name = path.parent.name
        with self._locked(story_name, f"story {story_name}"):
            data = loading.read(path)
            loaded = editing.load(path, story_name, data)
            story = Story(story_name, path, loaded.data, body=loaded.text.body)
            story._editable = True
            try:
                yield story
            finally:
                story._editable = False
            after = self._check_before_write(story, loaded.data, str(path), loaded.before)
            frontmatter = loaded.frontmatter_for(after, str(path))
            body = loaded.text.body
            if story._body_changed:  # agent text (refine): no terminal control sequences
                body = storyfile.normalise_newlines(strip_controls(story.body), loaded.text.newline)
            new = loaded.text.with_parts(frontmatter=frontmatter, body=body).text()
            try:
                encoded = new.encode("utf-8")
            except UnicodeEncodeError as exc:  # only the body is left unchecked by now
                raise InvalidInputError(
                    f"refusing to write: the body holds U+{ord(new[exc.start]):04X}, which "
                    "cannot be stored in a UTF-8 file",
                    path=str(path),
                    hint="decode the text properly (e.g. errors='replace'), or remove it",
                ) from None
            if encoded != data:
                _remove_stale_temps(path)
                fsutil.atomic_write_bytes(path, encoded)  # fsyncs the file, then the folder
                story.written = encoded
            for hook in story.after_write:  # still under the lock, once the file is written
                hook()

    def _check_before_write(
        self, story: Story, data: Any, path: str, before: dict[Any, Any]
    ) -> dict[Any, Any]:
        """Plain values to write; a value the story cannot hold, or one that cannot be written
        exactly, is refused here, before anything is written."""
        from ai_sdlc.store import render
        from ai_sdlc.store.values import UnsupportedValueError, strict_equal, to_plain

        plain: dict[Any, Any] = {}
        for key, value in data.items():
            try:
                plain[to_plain(key)] = to_plain(value)
            except UnsupportedValueError as exc:
                raise TypeError(f"{path}: `{key}`: {exc}") from None
        problem = schema.find_problem(plain, story.id)
        if problem is not None:
            raise InvalidInputError(
                f"refusing to write: {problem.message}", path=path, hint=problem.hint
            )
        for key, value in plain.items():
            if key in before and strict_equal(before[key], value):
                continue
            unwritable = render.problem({key: value})
            if unwritable is not None:
                what, fix = unwritable
                raise InvalidInputError(f"refusing to write `{key}`: {what}", path=path, hint=fix)
        return plain

    def add(
        self,
        title: str,
        *,
        type: str = "feature",
        labels: Iterable[str] = (),
        priority: int | None = None,
        body: str | None = None,
        status: str = "backlog",
        extra: Mapping[str, Any] | None = None,
    ) -> Story:
        """Create a story with the next free id (safe against concurrent adds). `extra`: more
        frontmatter fields (e.g. an imported issue's `ticket_*`), written after `labels`."""
        from ai_sdlc import fsutil
        from ai_sdlc.store import render

        self._require_project()
        clean_title = _check_title(title)
        if status not in schema.STATUSES:
            raise UsageError(
                f"unknown status {status!r}", hint=f"use one of: {', '.join(schema.STATUSES)}"
            )
        more = dict(extra or {})
        clash = sorted(more.keys() & {"id", "title", "slug", "priority", "status", "type"})
        clash += sorted(more.keys() & {"created", "updated", "labels", *schema.FLAG_FIELDS})
        if clash:
            raise UsageError(f"cannot add: field {clash[0]!r} is set by ai-sdlc itself")
        unwritable = render.problem(more)
        if unwritable is not None:
            raise UsageError(f"cannot store the extra fields: {unwritable[0]}", hint=unwritable[1])
        bad_type = schema.type_problem(type)
        if bad_type is not None:
            raise UsageError(bad_type.message, hint=bad_type.hint)
        clean_labels = _check_labels(labels)
        if priority is not None and (
            isinstance(priority, bool)
            or not isinstance(priority, int)
            or not 0 <= priority <= schema.MAX_COUNTER
        ):
            raise UsageError(f"priority must be a whole number from 0 to {schema.MAX_COUNTER:,}")
        with self._locked("ids", "story id allocation"):
            if priority is None:
                priority = self._next_priority()
            folder = self._claim_folder()
            created = self._today().isoformat()
            fields: list[tuple[str, Any]] = [
                ("id", folder.name),
                ("title", clean_title),
                ("slug", ids.slugify(redact_title(clean_title))),  # names the branch
                ("priority", priority),
                ("status", status),
                ("type", type),
                ("created", created),
                ("updated", created),
                ("labels", clean_labels),
                *more.items(),
                *((flag, False) for flag in schema.FLAG_FIELDS),
            ]
            problem = schema.find_problem(dict(fields), folder.name)
            if problem is not None:
                folder.rmdir()  # nothing is left behind for a refused story
                raise UsageError(f"cannot add: {problem.message}", hint=problem.hint)
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
        # An archived story's id keeps its ledger: it is never given to a new story.
        numbers = [*_id_numbers(self.stories_dir), *_id_numbers(self.ai_dir / ARCHIVE)]
        number = max(numbers, default=0) + 1
        while True:
            folder = self.stories_dir / ids.format_id(number)
            try:
                folder.mkdir()
            except FileExistsError:
                number += 1
                continue
            return folder


def _id_numbers(folder: Path) -> list[int]:
    """The numbers of the `S-<digits>` entries of `folder` (none when it does not exist)."""
    try:
        with os.scandir(folder) as entries:
            return [n for e in entries if (n := ids.any_id_number(e.name)) is not None]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _remove_stale_temps(path: Path) -> None:
    """Delete temp files of writers killed mid-write (safe: every writer holds this lock)."""
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()


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
