"""How a session's runner is wired to the project: its limits, verification commands, the
worktree environment, and the relay between the runner and whoever watches it.

Pure construction helpers of `session.Session.open`, kept apart so that the session reads as
what a run does (one story, the next action, a multi-story run) rather than how it is built.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ai_sdlc.config import Config
from ai_sdlc.config.guard import ConfigChangedError, GuardrailRecord
from ai_sdlc.errors import AiSdlcError, InvalidInputError
from ai_sdlc.providers.base import Phase
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.workflow.engine.runner import Limits

if TYPE_CHECKING:
    from ai_sdlc.worktree_env.setup import WorktreeEnvironment

Emit = Callable[[dict[str, Any]], None]


class Watcher(Protocol):
    """Who watches a runner: a multi-story run in this process, or (in a parallel run's
    worker) the link to the coordinator."""

    def observe(self, event: dict[str, Any]) -> None: ...

    def before_phase(self, story_id: str, phase: Phase) -> str | None: ...


class Relay:
    """Runner events go to the display and, during a multi-story run, to its watcher; the
    runner's `before_phase` hook is answered by that watcher, once the guardrail settings are
    checked against the accepted ones (`configguard`; again before every verification)."""

    def __init__(self, emit: Emit) -> None:
        self.out = emit
        self.watcher: Watcher | None = None
        self.guard: GuardrailRecord | None = None
        #: Logs an event on a story (the state owner's `note`).
        self.note: Callable[..., None] = lambda _story, _action, **_data: None
        self.story: str | None = None

    def check_config(self, story_id: str | None = None) -> None:
        """Stop (ConfigChangedError, exit 3) when a guardrail setting changed during the run;
        the story's events say so."""
        story_id = story_id or self.story
        if self.guard is None:
            return
        try:
            self.guard.check("during this run")
        except InvalidInputError as exc:  # changed, or no longer a valid config at all
            if story_id is not None:
                changed = exc.changes if isinstance(exc, ConfigChangedError) else {}
                with contextlib.suppress(AiSdlcError):
                    self.note(story_id, "config_changed", changed=changed, reason=exc.message)
            raise

    def emit(self, event: dict[str, Any]) -> None:
        if self.watcher is not None:
            self.watcher.observe(event)
        self.out(event)

    def before_phase(self, story_id: str, phase: Phase) -> str | None:
        self.story = story_id
        self.check_config(story_id)
        return self.watcher.before_phase(story_id, phase) if self.watcher else None


def limits_from(config: Config) -> Limits:
    limits = config.typed().limits
    return Limits(
        global_recovery=limits.global_recovery,
        implementation_retries=limits.implementation_retries,
        review_rejections=limits.review_rejections,
        refinement_iterations=limits.refinement_iterations,
        pr_rounds=limits.pr_rounds,
        phase_timeout=limits.phase_timeout,
        story_tokens=limits.story_tokens,
        story_cost_usd=limits.story_cost_usd,
        run_cost_usd=limits.run_cost_usd,
    )


def worktree_environment(
    workspaces: Any,
    config: Config,
    commands: list[tuple[str, str]],
    confine: Callable[[Path], SandboxPolicy | None] = lambda _workspace: None,
) -> WorktreeEnvironment | None:
    """The setup and wrong-tree guard of story worktrees (None without git worktrees: the
    project folder's own environment is the one verification must use)."""
    from ai_sdlc.git.workspace import GitWorkspace
    from ai_sdlc.verify.commands import verify_environment
    from ai_sdlc.worktree_env.setup import SetupSettings, WorktreeEnvironment

    if not isinstance(workspaces, GitWorkspace):
        return None
    extra = dict(config.typed().verify.env)
    passed = tuple(config.typed().sandbox.pass_env)
    environment = WorktreeEnvironment(
        SetupSettings.from_config(config),
        project=workspaces.root,
        main=workspaces.top,
        worktrees_root=workspaces.worktrees_root,
        verify_commands=commands,
        environ=lambda: verify_environment(extra, passed),
        sandbox=confine,
    )
    workspaces.environment = environment
    return environment


def verification_commands(config: Config) -> list[tuple[str, str]]:
    return config.typed().verify.commands()
