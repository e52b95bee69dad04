"""The user's PYTEST_ADDOPTS does not change the judge's verdict, end to end through the real
CLI on the src-layout project of tests/e2e/test_honest_verification.py (editable venv, the failing
test_mul written first, a `command` agent): with reporting options (`-rs`, `-rA -v`, `-qq`,
`-p no:terminal`) an honest story is done and a broken one is blocked, exactly as without them;
with options that would hide the failing tests (a test path, `-k`, `--ignore`, `--deselect`) a
broken story is still blocked, and the run says which options verification left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli
from tests.e2e.test_honest_verification import ENV, Project, template
from tests.support.git_support import git_env

__all__ = ["git_env", "template"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

#: Reporting options that remove the text pytest's failing tests are read from (`-rs` drops the
#: FAILED lines, `-p no:terminal` all output). Every option, one by one, is checked against
#: real pytest in tests/verify/test_verify_pytest_run.py; here two whole runs per verdict.
HARMLESS = ["-rs", "-p no:terminal -qq --no-summary"]
#: Options that, if honoured, would make the broken story's suite pass (see the test).
HIDING = [
    "tests/test_sub.py",
    "-k sub --ignore=tests/test_mul.py --deselect tests/test_add.py::test_add -x",
]


def _run(project: Project, addopts: str) -> CliResult:
    env = {**ENV, "PYTEST_ADDOPTS": addopts}
    return run_cli(project.root, "run", project.sid, env=env, timeout=180)


@pytest.mark.parametrize("addopts", HARMLESS)
def test_an_honest_story_is_done_whatever_the_reporting_options(
    template: Path, tmp_path: Path, addopts: str
) -> None:
    project = Project(template, tmp_path, "honest-py")

    result = _run(project, addopts)

    assert result.returncode == 0, result.output
    fm = project.fm()
    assert fm["status"] == "done" and fm.get("total_recovery_attempts", 0) == 0
    assert "verification ignores" not in result.stderr
    review = Path(str(project.log) + ".review").read_text()
    assert "Tests: 2 passed, 0 failed, 0 skipped" in review
    assert "(at the story's base: 0 passed, 1 failed, 0 skipped)" in review


@pytest.mark.parametrize("addopts", HARMLESS)
def test_a_broken_story_is_blocked_whatever_the_reporting_options(
    template: Path, tmp_path: Path, addopts: str
) -> None:
    """The reason names the failing test module and its error, read the same way each time."""
    project = Project(template, tmp_path, "break-py")

    result = _run(project, addopts)

    assert result.returncode == 5, result.output
    fm = project.fm()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    reasons = [str(e.get("reason")) for e in project.recoveries()]
    assert len(reasons) == 2
    assert all("tests/test_mul.py: ModuleNotFoundError: No module named 'calc.mul'" in r
               for r in reasons), reasons  # fmt: skip


@pytest.mark.parametrize("addopts", HIDING)
def test_options_hiding_the_failing_tests_cannot_make_a_broken_story_done(
    template: Path, tmp_path: Path, addopts: str
) -> None:
    """A passing tests/test_sub.py beside them: honoured, these options would run it alone
    at the base and in the attempt (1 passed both times, `add` broken unseen) and the story
    would be done. Verification leaves them out, says so, and the story is blocked."""
    project = Project(template, tmp_path, "break-py")
    (project.root / "tests" / "test_sub.py").write_text("def test_sub():\n    assert 3 - 1 == 2\n")
    project.repo.commit_all("a passing test")

    result = _run(project, addopts)

    assert result.returncode == 5, result.output
    fm = project.fm()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    assert "verification ignores" in result.stderr and "from PYTEST_ADDOPTS" in result.stderr
    assert addopts.split()[0] in result.stderr
