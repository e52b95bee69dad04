"""Issue 33, cases 1 and "one rule" on Python, end to end through the real CLI: the src-layout
project of issue 23 (`calc` installed editable into its own `.venv`, the failing
`tests/test_mul.py` written first, `worktree.setup` as `init` proposes it, verify
`.venv/bin/python -m pytest`). An agent that shadows pytest with a module of its own (at the
project folder, in `src/`, or git-ignored), or, judged by `make test`, that makes the
Makefile's target `true`, never reaches done and each attempt is counted, the reason naming
the file; an honest agent still is done."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_honest_verification import template
from tests.support.git_support import git_env
from tests.support.held_support import HeldStory
from tests.support.verdicts import PY_MAKE, PY_SCRIPT, PY_SRC, Row, ids, rows
from tests.support.worktree_env_support import copy_project

__all__ = ["git_env", "template"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]


def story(template: Path, tmp_path: Path, behaviour: str) -> HeldStory:
    root = copy_project(template, tmp_path).root
    return HeldStory(root, tmp_path / "records" / "agent.log", behaviour)


@pytest.mark.parametrize("row", rows(PY_SRC), ids=ids(rows(PY_SRC)))
def test_verdict(template: Path, tmp_path: Path, row: Row) -> None:
    """A row of the verdict table (tests/support/verdicts.py): done, or never done with each
    attempt counted and the held file named."""
    held = story(template, tmp_path, row.behaviour)
    result = held.run()
    if row.said:
        assert result.returncode == 5, result.output
        held.assert_blocked_counted(row.said)
    else:
        assert result.returncode == 0, result.output
        held.assert_done()


#: The verify command's own definition, by layout: a Makefile target running a shell script of
#: the project, or that script itself, which runs the venv's pytest.
PYTEST = "exec .venv/bin/python -m pytest -q -p no:cacheprovider\n"
DEFINED = {
    PY_MAKE: ("make test", {"Makefile": "test:\n\tsh run-tests.sh\n", "run-tests.sh": PYTEST}),
    PY_SCRIPT: ("sh run-tests.sh", {"run-tests.sh": PYTEST}),
}
DEFINED_ROWS = rows(PY_MAKE) + rows(PY_SCRIPT)


@pytest.mark.parametrize(
    "row",
    DEFINED_ROWS,
    ids=[f"{r.layout.split('(')[-1][1:-2]}-{r.behaviour}" for r in DEFINED_ROWS],
)
def test_verdict_defined(template: Path, tmp_path: Path, row: Row) -> None:
    """A row of the verdict table on the same project judged by `make test` or `sh
    run-tests.sh`: the files that define the command (the Makefile and the script its target
    runs) are held as they were at the base."""
    command, files = DEFINED[row.layout]
    repo = copy_project(template, tmp_path)
    for name, text in files.items():
        (repo.root / name).write_text(text)
    repo.commit_all(f"{command} runs the tests")
    held = HeldStory(repo.root, tmp_path / "records" / "agent.log", row.behaviour)
    held.config("verify.test", command)
    result = held.run()
    if row.said:
        assert result.returncode == 5, result.output
        held.assert_blocked_counted(row.said)
    else:
        assert result.returncode == 0, result.output
        held.assert_done()


DONE_ALLOWED = [r for r in rows(PY_SRC, allowed=True) if not r.said]


@pytest.mark.parametrize("row", DONE_ALLOWED, ids=ids(DONE_ALLOWED))
def test_a_story_allowed_to_change_held_files_shows_them_to_the_review(
    template: Path, tmp_path: Path, row: Row
) -> None:
    """With `allow_test_changes: true` a right `mul` with a new `.pytest.ini` is done, and the
    review is told which held files it edits, with their diff (it listed test files only)."""
    held = story(template, tmp_path, row.behaviour)
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
