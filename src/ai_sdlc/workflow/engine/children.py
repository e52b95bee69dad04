"""After every child: the workspace's git metadata put back, and a change to it counted.

Children (the agent, the verify and setup commands, whatever they start) may write anything in
the story's worktree, and the user's plain git later trusts two things there: the `.git`
pointer and any `.git` below the top (issue 32, case 2). So every step that runs children is
followed, on every path out of it (pass, fail, crash, interrupt, timeout, a full disk), by the
workspace's `settle`, before ai-sdlc's own git or anything else runs there. What a child
changed fails the attempt as an implementation retry, named in its reason (through
`StoryState.fail_attempt`, so it counts towards the global limit); on a path that would
otherwise end the attempt uncounted (an interrupt, a timeout) it is counted too, then the
original error goes on. Kept apart so the one rule reads in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ai_sdlc.errors import AgentReportedError, AiSdlcError, StoryBlockedError
from ai_sdlc.git.run import GitError
from ai_sdlc.providers.base import Phase
from ai_sdlc.providers.tools import AccessViolationError
from ai_sdlc.workflow.engine.base import PhaseRetry, RunnerBase, T, plural
from ai_sdlc.workflow.state import ledger as L
from ai_sdlc.workflow.state.transitions import PhaseLimit, Ticket

#: What a child changed of the git metadata, at the head of the failure's reason.
TAMPERED = "a child process changed the worktree's git metadata"

#: Errors whose attempt is already counted (or whose story is blocked) by the runner itself.
_COUNTED = (PhaseRetry, StoryBlockedError, AgentReportedError, AccessViolationError)


class ChildChecks(RunnerBase):
    """Runs a step that starts children, then settles the workspace's git metadata."""

    def _children(
        self,
        story_id: str,
        phase: Phase,
        path: Path,
        step: Callable[[], T],
        *,
        settle: bool = True,
    ) -> T:
        """`step()` (which starts children in `path`), then the git metadata put back on
        every path; a change found is a counted failed attempt (`PhaseRetry` on the normal
        path; the original error, or an `AgentReportedError` naming it, on the others).
        `settle` False: the caller settles on the normal path (`settle_children`)."""
        try:
            result = step()
        except BaseException as exc:
            self._children_failed(story_id, phase, path, exc)
            raise
        if settle:
            self.settle_children(story_id, phase, path)
        return result

    def _children_failed(self, story_id: str, phase: Phase, path: Path, exc: BaseException) -> None:
        """The step raised `exc`: put the git metadata back; a change found is counted, unless
        the runner counts `exc` itself (then its message names the change)."""
        found: list[str] = []
        with contextlib.suppress(Exception):  # else the next run's `prepare` puts it back
            found = self.workspaces.settle(self._story_for(story_id), path)
        if not found:
            return
        reason = tamper_reason(found)
        if isinstance(exc, AgentReportedError | AccessViolationError):
            raise type(exc)(f"{reason}; {exc.message}", hint=exc.hint) from exc
        if not isinstance(exc, _COUNTED):
            with contextlib.suppress(AiSdlcError, OSError, PhaseRetry):
                self._tampered(story_id, phase, path, found)

    def settle_children(self, story_id: str, phase: Phase, path: Path) -> None:
        """Put the workspace's git metadata back; a change found fails the attempt."""
        found = self.workspaces.settle(self._story_for(story_id), path)
        if found:
            self._tampered(story_id, phase, path, found)

    def _tampered(self, story_id: str, phase: Phase, path: Path, found: list[str]) -> NoReturn:
        """Count the attempt in flight as a failed implementation attempt naming `found`; its
        work saved and rolled back (implement, rework) or reverted (a read-only phase)."""
        ticket = self._ticket
        if ticket is None or ticket.story.id != story_id:
            raise GitError(f"{story_id}: {tamper_reason(found)}, outside any attempt")
        reason = tamper_reason(found)
        patch, unsaved = self._undo_attempt(ticket, path, phase)
        limit = self.deps.limits.implementation_retries
        editing = phase in (Phase.IMPLEMENT, Phase.REWORK)
        self._emit_phase(story_id, phase, "violation", ticket.attempt, reason=reason)
        self._fail(
            story_id,
            phase,
            L.IMPLEMENTATION_RETRY,
            outcome="git_metadata_changed",
            feedback=reason + ". Never touch `.git` files or folders, nor make repositories.",
            reason=reason,
            patch=patch,
            paths=found[:50],
            limit=PhaseLimit(
                "implementation_retry_count",
                limit,
                lambda n: (
                    f"Children changed the worktree's git metadata {plural(n, 'time')} "
                    f"(limit {plural(limit, 'retry', 'retries')}): {reason}"
                ),
            )
            if editing
            else None,
        )
        raise unsaved if unsaved is not None else PhaseRetry(reason)

    def _undo_attempt(
        self, ticket: Ticket, path: Path, phase: Phase
    ) -> tuple[tuple[int, str] | None, Exception | None]:
        """The attempt's work saved as a patch and rolled back (an editing phase), or reverted
        (a read-only one); a failure to do so is returned, to raise once it is counted."""
        try:
            if phase in (Phase.IMPLEMENT, Phase.REWORK):
                record = self.workspaces.attempt_failed(ticket.story, path, attempt=ticket.attempt)
                return ((ticket.attempt, record.patch) if record.patch else None), None
            if self.workspaces.read_only_violations(ticket.story, path):
                self.workspaces.revert(ticket.story, path)
        except Exception as exc:
            return None, exc
        return None, None

    def _story_for(self, story_id: str) -> object:
        ticket = self._ticket
        if ticket is not None and ticket.story.id == story_id:
            return ticket.story
        story = self._story
        return story if story is not None and story.id == story_id else self.store.get(story_id)


def tamper_reason(found: list[str]) -> str:
    shown = "; ".join(found[:5])
    more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
    return f"{TAMPERED}: {shown}{more}"
