"""What an implementation attempt's work was: nothing, or a change the review is shown.

No success without work: an implement or rework attempt that leaves the story with no change
against its base (in a story worktree: the branch's earlier commits and the uncommitted work
together; in the project folder itself, where no base is known: whatever changed during the
attempt) fails as an implementation retry before any verification or review. The review is shown
the change itself (the file list with line counts and the diff, or the list alone past
`REVIEW_DIFF_LIMIT`), and an answer without a decision line is asked for one once more
(`decision_reminder`) before it counts as a failed refinement or a rework, never as approval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.git.changes import ChangeSet, patch_text
from ai_sdlc.git.seam import StoryWorkspace

#: Characters of diff the review prompt carries at most; a larger change is listed by file.
REVIEW_DIFF_LIMIT = 40_000
#: Files the review prompt lists by name at most.
REVIEW_FILES_LIMIT = 200
#: Characters of the undecided answer quoted back when asking for the decision again.
QUOTED_ANSWER_LIMIT = 4000


class Work(msgspec.Struct, frozen=True):
    """The workspace after an attempt: its content key, the story's change against its base
    (None where no base is known), and whether the attempt itself changed anything."""

    key: str
    change: ChangeSet | None
    changed: bool

    @property
    def nothing(self) -> bool:
        """No work to verify or review: no change against the base (or, without a base, none
        made during the attempt)."""
        return self.change.empty if self.change is not None else not self.changed


def look(workspaces: StoryWorkspace, story: Any, path: Path, before: str) -> Work:
    """The work in `path` after an attempt that began at content key `before`."""
    change = workspaces.changes(story, path)
    key = change.key if change is not None else workspaces.fingerprint(story, path)
    return Work(key, change, key != before)


def no_work_reason(work: Work) -> str:
    if work.change is not None:
        return (
            "The implementation changed no file: the story has no change against its base "
            f"{work.change.base[:12]}, so there is nothing to verify or review"
        )
    return (
        "The implementation changed no file in the project folder during this attempt, so "
        "there is nothing to verify or review"
    )


NO_WORK_FEEDBACK = (
    "Your previous attempt changed no file. Make the change the story asks for in the "
    "workspace's files (a description of the change is not enough); if you could not write "
    "files, say exactly what stopped you."
)


def change_section(change: ChangeSet | None) -> str:
    """What the review is shown of the change: the files with their line counts, and the diff
    when it fits in `REVIEW_DIFF_LIMIT` characters."""
    if change is None:
        return (
            "No diff is available: the agents work in the project folder itself, with no story "
            "branch to compare with. Read the changed files in the workspace."
        )
    if change.empty:
        return "The story has no change against its base: there is nothing to approve."
    lines = [f"Against the story's base {change.base[:12]}: {change.summary()}.", ""]
    for f in change.files[:REVIEW_FILES_LIMIT]:
        counts = "binary" if f.binary else f"+{f.added} -{f.deleted}"
        lines.append(f"- {f.status} {f.path} ({counts})")
    if len(change.files) > REVIEW_FILES_LIMIT:
        lines.append(f"- … and {len(change.files) - REVIEW_FILES_LIMIT} more files")
    patch = patch_text(change, limit=REVIEW_DIFF_LIMIT)
    if patch is None:
        lines += [
            "",
            f"The diff is longer than {REVIEW_DIFF_LIMIT:,} characters and is not shown: read "
            "the files listed above in the workspace.",
        ]
    elif patch:
        fence = "`" * max(3, _longest_backtick_run(patch) + 1)
        lines += ["", f"{fence}diff", patch.rstrip("\n"), fence]
    return "\n".join(lines)


def decision_reminder(choices: tuple[str, ...], answer: str) -> str:
    """Appended to the prompt when an answer came without a decision line."""
    quoted = answer.strip()
    if len(quoted) > QUOTED_ANSWER_LIMIT:
        quoted = quoted[:QUOTED_ANSWER_LIMIT] + "\n[… cut …]"
    shown = " or ".join(f"'DECISION: {c}'" for c in choices)
    return (
        "\n## Your previous answer had no decision\n\n"
        f"It ended without a decision line, so it cannot be used. Answer again, ending with one "
        f"line {shown}.\nYour previous answer was:\n\n"
        + "\n".join(f"> {line}" for line in (quoted or "(empty)").splitlines())
        + "\n"
    )


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest
