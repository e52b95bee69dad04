"""Phase checkpoints: the runner's own state for a story, saved before each phase and restored
when the phase crashes or is interrupted, so no phase flag or status is left half-updated.

A checkpoint is a copy of the story's `story.md` and its artifacts (`research.md`, `plan.md`,
`review.md`) under `.ai-sdlc/state/checkpoints/<id>/` (git-ignored), laid out as a tiny project
so the store's own parser reads it back. `manifest.json` is written last: a checkpoint without
one was never complete and is ignored. It never covers the user's source code.

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
from dataclasses import dataclass
from pathlib import Path

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text
from ai_sdlc.store import StoryStore
from ai_sdlc.untrusted import read_regular
from ai_sdlc.workflow.transitions import StoryState

ARTIFACTS = ("research.md", "plan.md", "review.md")
STORY_FILE = "story.md"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Checkpoint:
    story_id: str
    phase: str
    taken_at: str
    #: Artifacts that existed when it was taken (others are removed on restore).
    artifacts: tuple[str, ...]
    folder: Path

    @property
    def mirror(self) -> StoryStore:
        """The copy as a story store of its own (read with the store's validating parser)."""
        return StoryStore(self.folder)

    def saved(self, name: str) -> Path:
        return self.folder / ".ai-sdlc" / "stories" / self.story_id / name


class Checkpoints:
    def __init__(self, store: StoryStore) -> None:
        self.store = store
        self.root = store.ai_dir / "state" / "checkpoints"

    def _folder(self, story_id: str) -> Path:
        return self.root / story_id

    def take(self, story_id: str, phase: str, *, taken_at: str) -> Checkpoint:
        """Copy the story's state before `phase` runs (any older checkpoint is replaced)."""
        folder = self._folder(story_id)
        self.discard(story_id)
        source = self.store.folder(story_id)
        target = folder / ".ai-sdlc" / "stories" / story_id
        target.mkdir(parents=True)
        atomic_write_bytes(target / STORY_FILE, (source / STORY_FILE).read_bytes())
        present = []
        for name in ARTIFACTS:
            try:
                data = (source / name).read_bytes()
            except FileNotFoundError:
                continue
            atomic_write_bytes(target / name, data)
            present.append(name)
        checkpoint = Checkpoint(story_id, phase, taken_at, tuple(present), folder)
        manifest = {
            "story_id": story_id,
            "phase": phase,
            "taken_at": taken_at,
            "artifacts": present,
        }
        atomic_write_text(folder / MANIFEST, json.dumps(manifest) + "\n")
        return checkpoint

    def pending(self, story_id: str) -> Checkpoint | None:
        """A complete checkpoint left behind by a run that died mid-phase, if any."""
        folder = self._folder(story_id)
        try:
            data = json.loads(read_regular(folder / MANIFEST).decode("utf-8"))
        except FileNotFoundError:
            self.discard(story_id)  # never completed: the phase never started
            return None
        except (OSError, ValueError, RecursionError, InvalidInputError):
            self.discard(story_id)
            return None
        if not isinstance(data, dict) or data.get("story_id") != story_id:
            self.discard(story_id)
            return None
        names = tuple(n for n in data.get("artifacts") or [] if n in ARTIFACTS)
        return Checkpoint(
            story_id, str(data.get("phase")), str(data.get("taken_at")), names, folder
        )

    def discard(self, story_id: str) -> None:
        folder = self._folder(story_id)
        with contextlib.suppress(FileNotFoundError):
            (folder / MANIFEST).unlink()  # first: a half-removed checkpoint is never used
        shutil.rmtree(folder, ignore_errors=True)

    def restore(self, checkpoint: Checkpoint, owner: StoryState, reason: str) -> list[str]:
        """Put the story's workflow state back through the state owner; returns what was
        restored (keys, body, files)."""
        story_id = checkpoint.story_id
        artifacts = {
            name: checkpoint.saved(name).read_bytes() if name in checkpoint.artifacts else None
            for name in ARTIFACTS
        }
        try:
            self.store.get(story_id)
        except InvalidInputError:
            owner.restore_file(story_id, checkpoint.saved(STORY_FILE).read_bytes())
            restored = [STORY_FILE]
        else:
            restored = []
        saved = checkpoint.mirror.get(story_id)
        return restored + owner.restore(
            story_id, saved, artifacts, phase=checkpoint.phase, reason=reason
        )
