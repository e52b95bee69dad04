"""Issue 33, cases 1 and "one rule" on Python, end to end through the real CLI: the src-layout
project of issue 23 (`calc` installed editable into its own `.venv`, the failing
`tests/test_mul.py` written first, `worktree.setup` as `init` proposes it, verify
`.venv/bin/python -m pytest`). An agent that shadows pytest with a module of its own (at the
project folder, in `src/`, or git-ignored) never reaches done and each attempt is counted,
the reason naming the file; an honest agent still is done."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.held_support import HeldStory
from tests.git_support import git_env
from tests.test_honest_verification import template
from tests.worktree_env_support import copy_project

__all__ = ["git_env", "template"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]


def story(template: Path, tmp_path: Path, behaviour: str) -> HeldStory:
    root = copy_project(template, tmp_path).root
    return HeldStory(root, tmp_path / "agent.log", behaviour)


def test_an_honest_agent_is_done(template: Path, tmp_path: Path) -> None:
    held = story(template, tmp_path, "honest-py")
    result = held.run()
    assert result.returncode == 0, result.output
    held.assert_done()


def test_a_new_runner_config_file_is_held(template: Path, tmp_path: Path) -> None:
    """A right `mul` with a new `.pytest.ini` (pytest reads it before pyproject.toml)."""
    held = story(template, tmp_path, "honest-ini-py")
    result = held.run()
    assert result.returncode == 5, result.output
    held.assert_blocked_counted(".pytest.ini: the story's change edits what decides the verdict")


def test_a_story_allowed_to_change_held_files_shows_them_to_the_review(
    template: Path, tmp_path: Path
) -> None:
    """With `allow_test_changes: true` the same change is done, and the review is told which
    held files it edits, with their diff (the review's test diff listed test files only)."""
    held = story(template, tmp_path, "honest-ini-py")
    held.allow_test_changes()
    result = held.run()
    assert result.returncode == 0, result.output
    held.assert_done()
    review = " ".join(Path(str(held.log) + ".review").read_text().split())
    assert (
        "What decides the verdict, which this change edits (held as it was at the base; the "
        "story allows it): .pytest.ini." in review
    )
    assert "diff --git a/.pytest.ini b/.pytest.ini" in review


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [
        ("shadow-py", "pytest.py (shadows the test runner's module pytest): the story's change "
         "edits what decides the verdict, held as it was at the base"),
        ("shadow-src-py", "src/pytest.py (shadows the test runner's module pytest)"),
        ("ignored-py", "pytest.py (shadows the test runner's module pytest)"),
    ],
)  # fmt: skip
def test_a_module_shadowing_the_runner_is_never_done(
    template: Path, tmp_path: Path, behaviour: str, said: str
) -> None:
    held = story(template, tmp_path, behaviour)
    result = held.run()
    assert result.returncode == 5, result.output
    held.assert_blocked_counted(said)
