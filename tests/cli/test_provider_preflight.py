"""No silent stand-ins, and nothing touched before the provider's pre-flight passes: with no
provider configured a run stops (exit 4) naming the fix `doctor` shows; a named provider that
cannot start (no key) stops the same way, before any worktree, attempt number or event."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.git_support import Repo, git, git_env, make_repo  # noqa: F401 (fixture)

#: No provider from the environment, and no `claude` binary auto-detection could find.
NOTHING_CONFIGURED = {"AI_SDLC_PROVIDER": ""}
NO_CLAUDE = "ai:\n  claude:\n    binary: /nonexistent/claude\n"

pytestmark = pytest.mark.usefixtures("git_env")


def _story_state(repo: Repo) -> dict[str, object]:
    """Everything a run could have touched: the story folder's files (bytes), its worktrees,
    its branches, the ledger."""
    ai = repo.root / ".ai-sdlc"
    files = {
        str(p.relative_to(ai)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(ai.rglob("*"))
        if p.is_file() and p.relative_to(ai).parts[0] in ("stories", "worktrees", "runs")
    }
    ledger = ai / "state" / "ledger"
    return {
        "files": files,
        "worktrees": sorted(p.name for p in (ai / "worktrees").glob("*")),
        "branches": git(repo.root, "branch", "--list", "ai-sdlc/*"),
        "ledger": sorted(p.name for p in ledger.glob("*")) if ledger.is_dir() else [],
    }


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path)
    with (repo.root / ".ai-sdlc" / "config.yaml").open("a") as config:
        config.write(NO_CLAUDE)
    repo.story("Add a greeting")
    return repo


@pytest.mark.e2e
def test_no_provider_configured_stops_before_anything(repo: Repo) -> None:
    before = _story_state(repo)
    for args in (("run", "S-0001"), ("run", "--auto")):
        result = run_cli(repo.root, *args, env=NOTHING_CONFIGURED)
        assert result.returncode == 4, result.output
        assert result.stderr.count("no AI provider is configured") == 1, result.stderr
        assert "--provider scripted" in result.stderr  # the way out, named
        assert "SCRIPTED_CHANGES" not in result.output
        assert _story_state(repo) == before
    doctor = run_cli(repo.root, "doctor", env=NOTHING_CONFIGURED)
    assert doctor.returncode == 4, doctor.output
    assert "✗ provider: none: no AI provider is configured" in doctor.stdout, doctor.stdout
    assert "✓ provider: scripted" not in doctor.stdout
    assert "fix: set ANTHROPIC_API_KEY" in doctor.stdout
    # Named, the offline provider still runs.
    named = run_cli(repo.root, "run", "S-0001", "--provider", "scripted", env=NOTHING_CONFIGURED)
    assert named.returncode == 0, named.output


@pytest.mark.e2e
def test_six_failed_starts_leave_the_story_as_it_was(repo: Repo) -> None:
    story = repo.root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    text = story.read_bytes()
    before = _story_state(repo)
    for _ in range(6):
        result = run_cli(repo.root, "run", "S-0001", "--provider", "anthropic")
        assert result.returncode == 4, result.output
        assert result.stderr.count("ANTHROPIC_API_KEY is not set") == 1, result.stderr
        assert "rolled back" not in result.output
    assert story.read_bytes() == text
    assert _story_state(repo) == before
