"""A project kept in a subfolder of a larger repository (a monorepo's `service/`): its stories
run in worktrees of the whole repository, in the same subfolder there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import allow_unverified, run_cli
from tests.support.git_support import checkout_snapshot, git, git_env

pytestmark = pytest.mark.e2e

__all__ = ["git_env"]


@pytest.mark.usefixtures("git_env")
@pytest.mark.parametrize("committed", [True, False], ids=["service-committed", "service-new"])
def test_a_project_in_a_subfolder_of_the_repository(tmp_path: Path, committed: bool) -> None:
    repo = tmp_path / "mono"
    service = repo / "service"
    service.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("monorepo\n")
    if committed:
        (service / "app.py").write_text("print('hi')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    assert run_cli(service, "init").returncode == 0
    allow_unverified(service)
    assert run_cli(service, "add", "First").returncode == 0
    before = _outside_ai_sdlc(checkout_snapshot(repo))
    result = run_cli(service, "run", "S-0001", env={"AI_SDLC_GIT__KEEP_WORKTREES": "true"})
    assert result.returncode == 0, result.output
    story = (service / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_text()
    assert "status: done" in story
    assert "worktree_path: .ai-sdlc/worktrees/S-0001-first" in story
    assert (service / ".ai-sdlc" / "worktrees" / "S-0001-first" / "service").is_dir()
    assert _outside_ai_sdlc(checkout_snapshot(repo)) == before


def _outside_ai_sdlc(snapshot: dict[str, str]) -> dict[str, str]:
    """The user's checkout minus ai-sdlc's own story files (they live there by design)."""
    lines = snapshot["status"].splitlines(keepends=True)
    return {**snapshot, "status": "".join(ln for ln in lines if "/.ai-sdlc/" not in ln)}
