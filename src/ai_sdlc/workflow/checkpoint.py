"""Phase checkpoints: the runner's own state for a story, saved before each phase and restored
when the phase crashes or is interrupted, so no phase flag or status is left half-updated.

A checkpoint is a copy of the story's `story.md` and its artifacts (`research.md`, `plan.md`,
`review.md`) under `.ai-sdlc/state/checkpoints/<id>/` (git-ignored), laid out as a tiny project
so the store's own parser reads it back. `manifest.json` is written last: a checkpoint without
one was never complete and is ignored. It never covers the user's source code.

Restoring is deliberately narrow. The workflow state comes back (`RESTORED_KEYS`, the story body,
the artifacts as they were, including removing ones the phase created); everything else in the
frontmatter keeps its current value, above all the guardrail accounting recorded during the
phase (`total_recovery_attempts`, `recovery_breakdown`, the retry counters, `usage`): a retry
that happened is never un-counted. Only when the phase left `story.md` unreadable is the whole
file restored, and the recovery counters logged in `events.jsonl` since are put back on top.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text
from ai_sdlc.store import FLAG_FIELDS, StoryStore
from ai_sdlc.workflow.events import read_events

ARTIFACTS = ("research.md", "plan.md", "review.md")
STORY_FILE = "story.md"
MANIFEST = "manifest.json"
#: The frontmatter keys a rollback restores: what a phase changes about the workflow.
RESTORED_KEYS: tuple[str, ...] = (
    "status",
    *FLAG_FIELDS,
    "rework_pending",
    "updated",
    "blocked_reason",
    "blocked_at",
)


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
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.discard(story_id)  # never completed: the phase never started
            return None
        except (OSError, ValueError):
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

    def restore(self, checkpoint: Checkpoint) -> list[str]:
        """Put the story's workflow state back; returns what was restored (keys, files)."""
        restored = self._restore_artifacts(checkpoint)
        try:
            restored += self._restore_frontmatter(checkpoint)
        except InvalidInputError:
            restored += self._restore_whole_file(checkpoint)
        return restored

    def _restore_artifacts(self, checkpoint: Checkpoint) -> list[str]:
        restored = []
        folder = self.store.folder(checkpoint.story_id)
        for name in ARTIFACTS:
            current = folder / name
            if name in checkpoint.artifacts:
                saved = checkpoint.saved(name).read_bytes()
                if not current.is_file() or current.read_bytes() != saved:
                    atomic_write_bytes(current, saved)
                    restored.append(name)
            elif current.exists():
                current.unlink()
                restored.append(name)
        return restored

    def _restore_frontmatter(self, checkpoint: Checkpoint) -> list[str]:
        saved = checkpoint.mirror.get(checkpoint.story_id)
        restored = []
        with self.store.edit(checkpoint.story_id) as story:
            fm = story.frontmatter
            for key in RESTORED_KEYS:
                if key in saved.frontmatter:
                    value = saved.frontmatter[key]
                    if key not in fm or fm[key] != value:
                        fm[key] = value
                        restored.append(key)
                elif key in fm:
                    del fm[key]
                    restored.append(key)
            if story.body != saved.body:
                story.body = saved.body
                restored.append("body")
        return restored

    def _restore_whole_file(self, checkpoint: Checkpoint) -> list[str]:
        """`story.md` is unreadable now: put the saved file back, then re-apply the recovery
        counters the ledger logged since (the counter is the guardrail; it never goes down)."""
        path = self.store.story_path(checkpoint.story_id)
        atomic_write_bytes(path, checkpoint.saved(STORY_FILE).read_bytes())
        logged = _last_logged_counters(path.parent)
        with self.store.edit(checkpoint.story_id) as story:
            total = logged.get("total_recovery_attempts")
            if isinstance(total, int) and total > story.counter("total_recovery_attempts"):
                story.frontmatter["total_recovery_attempts"] = total
            breakdown = logged.get("recovery_breakdown")
            if isinstance(breakdown, Mapping):
                merged = dict(story.recovery_breakdown)
                for kind, count in breakdown.items():
                    if isinstance(count, int) and count > merged.get(str(kind), 0):
                        merged[str(kind)] = count
                if merged != story.recovery_breakdown:
                    story.frontmatter["recovery_breakdown"] = merged
        return [STORY_FILE]


def _last_logged_counters(folder: Path) -> dict[str, Any]:
    last: dict[str, Any] = {}
    for event in read_events(folder):
        counters = event.get("counters")
        if isinstance(counters, dict):
            last = counters
    return last
