"""Issue 33: Python test steps run with safe-path semantics (`PYTHONSAFEPATH=1`) where the
project allows it, end to end through the real CLI. (On the src-layout project a story that
allows test changes, so the held-files check lets a new top-level `pytest.py` through, is still
judged by the real pytest: tests/e2e/test_held_python.py,
`test_a_shadowing_pytest_allowed_by_the_story_still_meets_the_real_runner`.) A flat project
whose tests import its modules from the working folder (`python -m pytest` puts it on
`sys.path`) keeps that: an honest agent is done, and a shadowing `pytest.py` there is caught by
the held-files check."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.git_support import git_env, make_repo
from tests.support.held_support import HeldStory, ImplementStory
from tests.support.verdicts import PY_FLAT, Row, ids, rows

__all__ = ["git_env"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]


def flat_story(tmp_path: Path, behaviour: str) -> HeldStory:
    """calc.py at the project folder, its tests importing it as `calc` (no conftest, no
    pythonpath setting): only `python -m pytest`'s working folder on `sys.path` finds it."""
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "calc").mkdir()
    (root / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_add.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / "tests" / "test_mul.py").write_text(
        "from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
    )
    with open(root / ".gitignore", "a") as handle:
        handle.write("__pycache__/\n")
    repo.commit_all("flat calc, and a failing test for mul written first")
    # The project's config as a user writes it by hand (`ImplementStory` adds the agent's
    # command and its records folder, then accepts it with one `config --accept`).
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\nverify:\n  test: {sys.executable} -m pytest -q -p "
        "no:cacheprovider\nlimits:\n  implementation_retries: 1\nsandbox:\n  writable: []\n"
    )
    return ImplementStory(root, tmp_path / "records" / "agent.log", behaviour)


@pytest.mark.parametrize("row", rows(PY_FLAT), ids=ids(rows(PY_FLAT)))
def test_a_flat_project_keeps_its_working_folder_on_the_path(tmp_path: Path, row: Row) -> None:
    held = flat_story(tmp_path, row.behaviour)
    result = held.run()
    assert result.returncode == (5 if row.said else 0), result.output
    if row.said:
        held.assert_blocked_counted(row.said)
    else:
        held.assert_done()
    baselines = list((held.root / ".ai-sdlc" / "state" / "baselines").glob("*.json"))
    assert len(baselines) == 1 and '"safe_path": false' in baselines[0].read_text()
