"""Phase checkpoints: the runner's own state for a story, saved before each phase and restored
when the phase crashes or is interrupted, so no phase flag or status is left half-updated.

A checkpoint is a copy of the story's `story.md` and its artifacts (`research.md`, `plan.md`,
`review.md`) in one file, `.ai-sdlc/state/checkpoints/<id>.json` (git-ignored), written with
one atomic write: it is wholly there or not at all, with no folder to create or remove. The
copies are JSON strings that give back the exact bytes (undecodable bytes travel as surrogate
escapes, in ASCII JSON). It never covers the user's source code. A checkpoint left in the
earlier layout (a folder `<id>/` holding the copies as files and a `manifest.json` written last)
is still restored.

It is not fsynced (two fsyncs per phase saved): a killed process leaves it whole in the page
cache; only a power loss can lose it, or bring back the one before. The attempt's reservation in
the ledger, which is fsynced, names its checkpoint (`Checkpoint.tag`), and a checkpoint is
restored only while the reservation naming it is open: after a power loss the phase is at worst
not rolled back (its own writes are transactions, old or new), never rolled back to another
phase's state.

Restoring is deliberately narrow and done by the state owner (`transitions.StoryState.restore`):
the workflow state comes back (`RESTORED_KEYS`, the story body, the artifacts as they were,
including removing ones the phase created); everything else in the frontmatter keeps its current
value, above all the guardrail accounting (`total_recovery_attempts`, `recovery_breakdown`, the
retry counters, `usage`): a retry that happened is never un-counted. Only when the phase left
`story.md` unreadable is the whole file put back, and the ledger's accounting is re-applied on
top by the owner's next transaction.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.fsutil import atomic_write_bytes
from ai_sdlc.store import Story, StoryStore
from ai_sdlc.untrusted import read_regular
from ai_sdlc.workflow.state.ledger import Journal
from ai_sdlc.workflow.state.transitions import StoryState

ARTIFACTS = ("research.md", "plan.md", "review.md")
STORY_FILE = "story.md"
#: The earlier layout's completion marker (inside `<id>/`).
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Checkpoint:
    """A story's files as they were before a phase, to restore after an interrupted run."""

    story_id: str
    phase: str
    taken_at: str
    #: Artifacts that existed when it was taken (others are removed on restore).
    artifacts: tuple[str, ...]
    #: Where the checkpoint file lives (`.ai-sdlc/state/checkpoints/`).
    folder: Path
    #: The saved bytes by file name (`story.md` and the artifacts); empty for a checkpoint
    #: described without its copies (a worker's note of one its coordinator holds).
    files: Mapping[str, bytes] = field(default_factory=dict, compare=False, repr=False)

    @property
    def path(self) -> Path:
        return self.folder / f"{self.story_id}.json"

    @property
    def tag(self) -> str:
        """What the attempt's reservation records of its checkpoint (`begin_action`)."""
        return f"{self.phase}@{self.taken_at}"

    def saved(self, name: str) -> bytes:
        """The saved copy of `name` (KeyError when it holds none)."""
        return self.files[name]

    def story(self) -> Story:
        """The saved `story.md`, read with the store's validating parser."""
        from ai_sdlc.store import editing

        loaded = editing.load(self.path, self.story_id, self.saved(STORY_FILE))
        return Story(self.story_id, self.path, loaded.data, body=loaded.text.body)


class Checkpoints:
    def __init__(self, store: StoryStore) -> None:
        self.store = store
        self.root = store.ai_dir / "state" / "checkpoints"

    def take(self, story_id: str, phase: str, *, taken_at: str) -> Checkpoint:
        """Copy the story's state before `phase` runs (an older checkpoint is replaced)."""
        source = self.store.folder(story_id)
        files = {STORY_FILE: (source / STORY_FILE).read_bytes()}
        present = []
        for name in ARTIFACTS:
            try:
                files[name] = (source / name).read_bytes()
            except FileNotFoundError:
                continue
            present.append(name)
        checkpoint = Checkpoint(story_id, phase, taken_at, tuple(present), self.root, files)
        self._write(checkpoint)
        return checkpoint

    def pending(self, story_id: str) -> Checkpoint | None:
        """A complete checkpoint left behind, if any (one that cannot be read is dropped: it was
        never completed)."""
        return self._read(story_id)

    def interrupted(self, story_id: str) -> Checkpoint | None:
        """The checkpoint of a phase a dead run cut short: pending while the ledger still holds
        that phase's reservation. A run that died before the action began, or after the phase
        completed but before the checkpoint was discarded, left nothing to undo (restoring
        would roll back a finished phase): its checkpoint is dropped."""
        checkpoint = self._read(story_id)
        if checkpoint is None:
            return None
        open_ = Journal(self.store.ai_dir).read(self.store.folder(story_id).name).open
        if open_ is None or open_.get("checkpoint", checkpoint.tag) != checkpoint.tag:
            self.discard(story_id)  # nothing in flight, or another attempt's (power loss)
            return None
        return checkpoint

    def _read(self, story_id: str) -> Checkpoint | None:
        path = self.root / f"{story_id}.json"
        try:
            data = json.loads(read_regular(path).decode("utf-8"))
        except FileNotFoundError:
            return self._earlier_layout(story_id)
        except (OSError, ValueError, RecursionError, InvalidInputError):
            self.discard(story_id)
            return None
        checkpoint = _parse(data, story_id, self.root, None)
        if checkpoint is None:
            self.discard(story_id)
        return checkpoint

    def discard(self, story_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.root / f"{story_id}.json").unlink()

    def restore(self, checkpoint: Checkpoint, owner: StoryState, reason: str) -> list[str]:
        """Put the story's workflow state back through the state owner; returns what was
        restored (keys, body, files)."""
        story_id = checkpoint.story_id
        artifacts = {
            name: checkpoint.saved(name) if name in checkpoint.artifacts else None
            for name in ARTIFACTS
        }
        try:
            self.store.get(story_id)
        except InvalidInputError:
            owner.restore_file(story_id, checkpoint.saved(STORY_FILE))
            restored = [STORY_FILE]
        else:
            restored = []
        saved = checkpoint.story()
        return restored + owner.restore(
            story_id, saved, artifacts, phase=checkpoint.phase, reason=reason
        )

    def _write(self, checkpoint: Checkpoint, *, durable: bool = False) -> None:
        data = {
            "story_id": checkpoint.story_id,
            "phase": checkpoint.phase,
            "taken_at": checkpoint.taken_at,
            "artifacts": list(checkpoint.artifacts),
            "files": {
                name: copy.decode("utf-8", "surrogateescape")
                for name, copy in checkpoint.files.items()
            },
        }
        self.root.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data) + "\n"  # ASCII: surrogate escapes survive the round trip
        atomic_write_bytes(checkpoint.path, text.encode("ascii"), durable=durable)

    def _earlier_layout(self, story_id: str) -> Checkpoint | None:
        """A checkpoint in the earlier layout: moved to the current one (so `discard` drops
        it), or removed when it was never completed."""
        folder = self.root / story_id
        try:
            data = json.loads(read_regular(folder / MANIFEST).decode("utf-8"))
            checkpoint = _parse(data, story_id, self.root, folder)
        except FileNotFoundError:
            checkpoint = None
        except (OSError, ValueError, RecursionError, InvalidInputError):
            checkpoint = None
        if checkpoint is not None:
            self._write(checkpoint, durable=True)  # before the earlier copies are removed
        if folder.is_dir():
            with contextlib.suppress(FileNotFoundError):
                (folder / MANIFEST).unlink()  # first: a half-removed checkpoint is never used
            shutil.rmtree(folder, ignore_errors=True)
        return checkpoint


def _parse(data: Any, story_id: str, root: Path, earlier: Path | None) -> Checkpoint | None:
    """The checkpoint a file describes; None when it is not one of `story_id`'s or a copy is
    missing. `earlier`: the folder of an earlier-layout checkpoint, which holds the copies."""
    if not isinstance(data, dict) or data.get("story_id") != story_id:
        return None
    names = tuple(n for n in data.get("artifacts") or [] if n in ARTIFACTS)
    files: dict[str, bytes] = {}
    held = data.get("files")
    for name in (STORY_FILE, *names):
        if earlier is not None:
            try:
                files[name] = read_regular(earlier / ".ai-sdlc" / "stories" / story_id / name)
            except (OSError, InvalidInputError):
                return None
            continue
        text = held.get(name) if isinstance(held, dict) else None
        if not isinstance(text, str):
            return None
        files[name] = text.encode("utf-8", "surrogateescape")
    return Checkpoint(
        story_id, str(data.get("phase")), str(data.get("taken_at")), names, root, files
    )
