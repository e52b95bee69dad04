"""The story runner: executes a story's next actions until it is done, blocked or waiting.

The runner decides; the state owner (`transitions.StoryState`) writes. Every action begins with
`begin_action`, which refuses a blocked story or one at the global recovery limit and reserves
the attempt before it runs; every attempt ends settled (passed, failed = a recovery, released),
and every API retry is counted before its sleep, so the global limit applies on every path,
including a process that dies mid-attempt. Phase limits (implementation retries, rework
cycles, refinement iterations) block the story too, but the failed attempt is counted first and
the global limit always takes precedence.

This module owns the phase loop (`run`: assess the next action until the story is done,
blocked or waiting) and checkpointed execution (each phase runs from a checkpoint that a crash
or an interrupt rolls back). The rest of the runner is built in layers beneath it: `base`
(settings, dependencies, shared moves), `children` (the checks after every child), `calls`
(the agent call and its budgets), `judging`
(verification and the judge), `phases` (refine, research, plan, implement) and `review`
(the review, publishing).
"""

from __future__ import annotations

import contextlib

from ai_sdlc.errors import AiSdlcError, StoryBlockedError, disk_full
from ai_sdlc.git.stacking import DependenciesConflictError
from ai_sdlc.providers.base import Phase
from ai_sdlc.workflow.engine.assess import IN_REVIEW, NextAction, assess
from ai_sdlc.workflow.engine.base import Limits, PhaseRetry, RunnerDeps, StoryOutcome, describe
from ai_sdlc.workflow.engine.pullrequests import PullRequests
from ai_sdlc.workflow.state.checkpoint import Checkpoint
from ai_sdlc.workflow.state.events import iso
from ai_sdlc.worktree_env.setup import WorktreeSetupError

#: A story that has taken this many actions in one `run` is stopped (a bug guard: every
#: action either completes a phase or counts a recovery, so real runs end far sooner).
MAX_ACTIONS_PER_RUN = 200


class StoryRunner(PullRequests):
    """Runs one story's phases (see the module docstring); built once per session."""

    # --- public ---------------------------------------------------------------------------
    def run(self, story_id: str, *, step: Phase | None = None) -> StoryOutcome:
        """Take the story as far as it can go (or run one `step`); the calls' metrics are
        flushed when it ends, however it ends."""
        metrics = self.deps.metrics
        try:
            outcome = self._run(story_id, step)
        except BaseException:
            if metrics is not None:  # the stop must reach the caller unchanged
                with contextlib.suppress(AiSdlcError):
                    metrics.flush()
            raise
        if metrics is not None:
            metrics.flush()
        return outcome

    def _run(self, story_id: str, step: Phase | None) -> StoryOutcome:
        actions = 0
        start = self.deps.monotonic()
        self._emit("story_started", story_id)
        self._roll_back_interrupted_phase(story_id)
        self._prepared.pop(story_id, None)
        caught_up = False
        while True:
            story = self.owner.ensure_can_act(story_id)
            if not caught_up:  # once per run: a branch a sibling's merge left in conflict
                caught_up = True
                if self._catch_up(story):
                    continue
            if step is not None:
                if actions:
                    return StoryOutcome(story_id, "stepped", f"ran {step.value}", actions)
                action = NextAction(story_id, step, f"--step {step.value}")
            else:
                action = assess(story.frontmatter, gates=self.deps.gates, global_limit=self.limit)
            if action.phase is None:
                result = {"done": "done", "waiting": "waiting"}.get(action.kind, "idle")
                reason = action.reason
                if action.kind == IN_REVIEW or (action.kind == "done" and story.status != "done"):
                    ended = self._follow(story) if action.kind == IN_REVIEW else self._finish(story)
                    if ended is None:
                        continue  # in review now, a PR rework round, or done: look again
                    result, reason = ended
                self._emit(
                    "story_finished",
                    story_id,
                    outcome=result,
                    reason=reason,
                    elapsed=round(self.deps.monotonic() - start, 3),
                )
                return StoryOutcome(story_id, result, reason, actions)
            if actions >= MAX_ACTIONS_PER_RUN:
                self._block(story_id, f"Runner safety cap reached ({actions} actions in one run)")
            actions += 1
            self._story = story
            self._execute_checkpointed(story_id, action.phase)

    def _execute(self, story_id: str, phase: Phase) -> None:
        handler = {
            Phase.REFINE: self._refine,
            Phase.RESEARCH: self._document,
            Phase.PLAN: self._document,
            Phase.IMPLEMENT: self._implement,
            Phase.REWORK: self._implement,
            Phase.REVIEW: self._review,
        }[phase]
        handler(story_id, phase)

    def _execute_checkpointed(self, story_id: str, phase: Phase) -> None:
        """Run one phase from a checkpoint: if it crashes or is interrupted, its attempt is
        released uncounted and the story's workflow state goes back to the checkpoint (the
        recovery accounting stays) — unless the attempt was settled before (its transaction
        stands). A guardrail block is an outcome, not a crash. A process
        that dies mid-phase leaves its attempt reserved: the next run counts it."""
        reason = self.deps.before_phase(story_id, phase)
        if reason:
            self._block(story_id, reason)
        checkpoint = self.checkpoints.take(story_id, phase.value, taken_at=iso(self.deps.clock()))
        self._checkpoint = checkpoint.tag
        self._reserved = False
        self._ticket = None
        try:
            try:
                self._execute(story_id, phase)
            finally:
                pending = self._take_usage()
                if pending is not None:  # the phase ended another way: keep what was spent
                    with contextlib.suppress(AiSdlcError):
                        self.owner.add_usage(story_id, pending, calls=1)
        except PhaseRetry:
            pass  # counted and reverted; the story goes on from the checkpoint's state
        except StoryBlockedError:
            self.checkpoints.discard(story_id)
            raise
        except BaseException as exc:
            if isinstance(exc, (WorktreeSetupError, DependenciesConflictError)) and (
                not self._reserved
            ):
                # The worktree's environment, or dependency branches that conflict, stopped
                # the run before the phase began: no attempt, no state changed, nothing to
                # release or roll back (and no crash to retry: the way out is the user's).
                self.checkpoints.discard(story_id)
                raise
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else describe(exc)
            if disk_full(exc) is None:
                settled = self._settled(checkpoint)
                with contextlib.suppress(AiSdlcError):
                    self.owner.release(story_id, phase, why)
                if settled:  # the attempt ended (passed, or failed and counted) before this:
                    self.checkpoints.discard(story_id)  # what it wrote stands
                else:
                    self._roll_back(checkpoint, why)
                raise
            # A full disk failed the attempt, it did not end it: nothing more is written now
            # (a release, a roll-back: each would meet the full disk again, half-done). The
            # next run takes over as after a crash: it counts the attempt if it is still
            # reserved, and restores the checkpoint only then (a failure already settled,
            # perhaps blocking the story, is not undone because a later write failed).
            raise
        self.checkpoints.discard(story_id)
        if self.deps.metrics is not None:
            self.deps.metrics.flush_if_due()

    def _settled(self, checkpoint: Checkpoint) -> bool:
        """True when the attempt this checkpoint was taken for is no longer reserved: it was
        settled (and perhaps blocked the story) before the phase went wrong, so rolling the
        workflow state back would undo a finished transaction (as `Checkpoints.interrupted`
        decides after a crash)."""
        try:
            open_ = self.owner.ledger(checkpoint.story_id).open
        except Exception:
            return False  # cannot tell: roll back, as always
        return open_ is None or open_.get("checkpoint", checkpoint.tag) != checkpoint.tag

    def _roll_back_interrupted_phase(self, story_id: str) -> None:
        """A checkpoint left by a run that died mid-phase (SIGKILL, power loss): restore it."""
        checkpoint = self.checkpoints.interrupted(story_id)
        if checkpoint is not None:
            self._roll_back(checkpoint, f"an earlier run stopped during {checkpoint.phase}")

    def _roll_back(self, checkpoint: Checkpoint, reason: str) -> None:
        story_id = checkpoint.story_id
        try:
            restored = self.checkpoints.restore(checkpoint, self.owner, reason)
        except Exception as exc:  # keep the checkpoint: the next run restores it
            self._emit("rollback_failed", story_id, phase=checkpoint.phase, reason=str(exc))
            return
        self.checkpoints.discard(story_id)
        self._emit(
            "rollback_initiated",
            story_id,
            phase=checkpoint.phase,
            reason=reason[:500],
            restored=restored,
        )


__all__ = ["MAX_ACTIONS_PER_RUN", "Limits", "RunnerDeps", "StoryOutcome", "StoryRunner"]
