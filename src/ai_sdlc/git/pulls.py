"""Pull requests through the GitHub CLI (`gh`), and the PR text built from a story.

Every call is made through the caller's guard (the `github` resilience policy): a network
failure, an HTTP 5xx or a rate limit raises `TransientRemoteError` and is retried there.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ai_sdlc.git.run import REMOTE_TIMEOUT, Completed, GitError, run
from ai_sdlc.secrets import redact, redact_title

T = TypeVar("T")

#: Lines of `plan.md` quoted in the PR body.
PLAN_LINES = 40


class Guard(Protocol):
    """Runs one external call under a resilience policy (e.g. `GuardFactory.git`)."""

    def __call__(self, fn: Callable[[], T], /) -> T: ...


def call_directly(fn: Callable[[], T], /) -> T:
    """The guard used when none is given: one attempt, no retries."""
    return fn()


class GitHubCli:
    """`gh pr …` in one repository folder."""

    def __init__(self, cwd: Path, *, executable: str = "gh", guard: Guard = call_directly):
        self.cwd = cwd
        self.executable = executable
        self.guard = guard

    def available(self) -> bool:
        return shutil.which(self.executable, path=os.environ.get("PATH")) is not None

    def _gh(self, *args: str, timeout: float = REMOTE_TIMEOUT) -> Completed:
        return run((self.executable, *args), self.cwd, remote=True, timeout=timeout)

    def existing(self, branch: str) -> str | None:
        """The URL of the open PR whose head is `branch`, if there is one."""
        found = self.open_pr(branch)
        return found[0] if found is not None else None

    def open_pr(self, branch: str) -> tuple[str, str] | None:
        """(URL, base branch) of the open PR whose head is `branch`, if there is one."""
        done = self.guard(
            lambda: self._gh(
                "pr", "list", "--head", branch, "--state", "open", "--json", "url,baseRefName"
            )
        )
        try:
            items = json.loads(done.stdout or "[]")
        except json.JSONDecodeError:
            shown = redact(done.stdout[:200])
            raise GitError(f"gh pr list printed something that is not JSON: {shown}") from None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping) and isinstance(item.get("url"), str):
                return str(item["url"]), str(item.get("baseRefName") or "")
        return None

    def retarget(self, branch: str, base: str) -> None:
        """Point the open PR of `branch` at `base` (a stacked PR whose dependency merged)."""
        self.guard(lambda: self._gh("pr", "edit", branch, "--base", base))

    def create(self, *, title: str, body: str, head: str, base: str, draft: bool) -> str:
        args = ["pr", "create", "--title", title, "--body", body, "--head", head, "--base", base]
        if draft:
            args.append("--draft")
        done = self.guard(lambda: self._gh(*args))
        url = _last_url(done.stdout)
        if url is None:
            raise GitError(f"gh pr create printed no PR URL: {redact(done.stdout[-300:])}")
        return url


def _last_url(text: str) -> str | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith(("https://", "http://")):
            return line
    return None


def plan_summary(story_folder: Path) -> str | None:
    """The first lines of the story's `plan.md` (read-only), or None without a plan."""
    try:
        text = (story_folder / "plan.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = text.strip().splitlines()
    if not lines:
        return None
    shown = "\n".join(lines[:PLAN_LINES])
    if len(lines) > PLAN_LINES:
        shown += f"\n\n… ({len(lines) - PLAN_LINES} more lines in plan.md)"
    return shown


def pr_title(story: Any) -> str:
    title = redact_title(story.frontmatter.get("title", ""))
    return f"{story.id}: {title}" if title else story.id


def pr_body(story: Any, *, verification: str, breakdown: str) -> str:
    """The PR description: the story, its plan, how it was verified, what recovery it took."""
    fm: Mapping[str, Any] = story.frontmatter
    parts = [f"**{story.id}**: {redact_title(fm.get('title', ''))}"]
    plan = plan_summary(story.folder)
    if plan:
        parts.append("## Plan\n\n" + plan)
    if fm.get("unverified") is True and "Unverified" not in verification:
        verification = (
            "**Unverified**: nothing was built or tested for this change. " + verification
        )
    if fm.get("allow_test_changes") is True:
        verification += (
            "\n\n**Test changes allowed** (`allow_test_changes: true` in the story): the base's "
            "tests were not re-run against this change; review every test change."
        )
    parts.append("## Verification\n\n" + verification)
    total = int(fm.get("total_recovery_attempts") or 0)
    parts.append(f"## Recovery\n\n{total} recovery attempt{'s' if total != 1 else ''}: {breakdown}")
    parts.append("---\nOpened by ai-sdlc.")
    return redact("\n\n".join(parts))
