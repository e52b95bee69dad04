"""Verification and the judge: is the attempt's work really good?

Owns running the project's own build and tests on a workspace (said once when none is
configured, never reported as passed), the judge (`verify.judge`: the base's baseline, the
pass-count floor, protected tests), reusing a verdict when the workspace is unchanged since it
was verified, and what the review is told about all of it. The project's tests are the judge
of every attempt; this module is where that promise is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import Story
from ai_sdlc.verify import VerificationResult, protect
from ai_sdlc.verify.judge import not_started
from ai_sdlc.verify.notes import note_on_tests
from ai_sdlc.workflow.engine.calls import AgentCalls
from ai_sdlc.workflow.state.transitions import Ticket


class Judging(AgentCalls):
    """Verifies an attempt's workspace and judges the verdict."""

    def _verify(self, story_id: str, phase: Phase, path: Path) -> VerificationResult:
        self._checked = None  # the verification commands run in the workspace
        if not self.deps.verification_configured:
            if story_id not in self._unverified:
                self._unverified.add(story_id)
                self._emit("verification_skipped", story_id, phase=phase.value)
            return VerificationResult(passed=True, steps=())
        self._sandbox(story_id, path)  # the verifier applies the same policy
        self._emit("step", story_id, phase=phase.value, step="verifying")
        self._emit("verification_started", story_id, phase=phase.value)
        verdict = self._children(
            story_id, phase, path, lambda: self._judge(story_id, path, self.deps.verifier(path))
        )
        self._emit(
            "verification_finished",
            story_id,
            phase=phase.value,
            passed=verdict.passed,
            steps=[s.name for s in verdict.steps],
        )
        return verdict

    def _baseline(self, story: Story, path: Path, phase: Phase) -> None:
        """Before any agent call: put back test files a killed run left in their base
        versions, and verify the story's untouched base once (raises InvalidInputError, exit
        3, when it cannot be verified: the attempt is released, no recovery counted)."""
        judge = self.deps.judge
        if judge is None or not self.deps.verification_configured:
            return
        restored = judge.recover(path)
        if restored:
            self._checked = None
            self._emit("protected_restored", story.id, paths=restored)
        base = self.workspaces.base_commit(story, path)
        if base is None or not judge.settings.baseline:
            return
        known = judge.known(path, base)
        if known is None:
            self._checked = None  # the verification commands run on the base in the workspace
            self._emit("baseline_started", story.id, base=base)
            known = self._children(
                story.id, phase, path, lambda: judge.baseline(path, base, self.deps.verifier)
            )
            if known is not None:
                self._emit(
                    "baseline_finished",
                    story.id,
                    passed=known.passed,
                    counts=known.counts.to_dict() if known.counts else None,
                    failing=list(known.failing[:20]),
                    set_aside=list(known.set_aside),
                    reason=known.reason,
                )
            if known is not None and known.set_aside:
                self.owner.note(
                    story.id, "baseline_set_aside", paths=list(known.set_aside), reason=known.reason
                )
        if known is not None and known.floor_off and story.id not in self._floor_off:
            self._floor_off.add(story.id)  # said once in every run, never silently
            self._emit("floor_off", story.id, reason=known.floor_off)
            self.owner.note(story.id, "floor_off", reason=known.floor_off)

    def _judge(self, story_id: str, path: Path, verdict: VerificationResult) -> VerificationResult:
        """The verification's verdict, judged: a command that cannot be started is a config
        error (exit 3, never retried); a pass lowering the floor or weakening a base test
        fails."""
        cannot = not_started(verdict)
        if cannot is not None:
            raise InvalidInputError(
                f"verification cannot run: {cannot}",
                hint="fix verify.build / verify.test in .ai-sdlc/config.yaml (no recovery "
                "was counted)",
            )
        judge = self.deps.judge
        if judge is None:
            return verdict
        story = self._story if self._story and self._story.id == story_id else None
        story = story or self.store.get(story_id)
        base = self.workspaces.base_commit(story, path)
        allowed = story.frontmatter.get("allow_test_changes") is True
        judged = judge.judge(path, base, verdict, self.deps.verifier, allow_test_changes=allowed)
        self._judged.pop(story_id, None)
        if judged.judged:
            self._judged[story_id] = {"judged": judged.judged}
        return judged

    def _review_tests(self, ticket: Ticket, path: Path) -> dict[str, Any]:
        """What the review is told about the tests: the counts (and the base's), the opt-out,
        the attempt's test changes against the base."""
        judge = self.deps.judge
        story = ticket.story
        allowed = story.frontmatter.get("allow_test_changes") is True
        judged = dict((ticket.verified or {}).get("judged") or {})
        if judge is None:
            return {"allow_test_changes": allowed}
        base = self.workspaces.base_commit(story, path)
        return {
            "allow_test_changes": allowed,
            "test_counts": judged.get("counts"),
            "base_test_counts": judged.get("base_counts"),
            "tests_diff": judge.tests_diff(path, base),
            "startup_files": protect.startup_files(list(judged.get("protected_added") or ())),
            "held_changed": list(judged.get("held_changed") or ()),
        }

    def _verdict_for_review(
        self, ticket: Ticket, path: Path, phase: Phase, key: str | None
    ) -> VerificationResult:
        """The implementation's verdict when the workspace is unchanged since it was verified
        (the test suite runs once per implementation attempt), else a fresh verification.
        `key`: the workspace's content key when the caller has just taken it."""
        verified = ticket.verified
        if (
            verified
            and verified.get("passed") is True
            and (key or self.workspaces.fingerprint(ticket.story, path))
            == verified.get("fingerprint")
        ):
            self._emit("verification_reused", ticket.story.id, phase=phase.value)
            return VerificationResult(passed=True, steps=())
        return self._verify(ticket.story.id, phase, path)


def verification_note(context: dict[str, Any]) -> str:
    """What the review is told about the project's own build and tests."""
    if not context.get("verification_configured", True):
        return (
            "No verification is configured (verify.build / verify.test): nothing was built or "
            "tested. Judge the change by reading it, and say so in your review."
        )
    if context.get("verification_passed"):
        if context.get("workspace_changed") is False:
            note = (
                "The project's build and tests passed, but the implementation changed no file: "
                "there is no change to approve."
            )
        else:
            note = "The project's build and tests passed on this change."
    else:
        output = str(context.get("verification_output") or "").strip() or "(no output captured)"
        note = f"The project's build or tests FAILED on this change:\n{output}"
    return note + note_on_tests(context)
