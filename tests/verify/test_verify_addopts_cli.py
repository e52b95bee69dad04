"""The user's PYTEST_ADDOPTS does not change the judge's verdict, on the src-layout project of
tests/e2e/test_honest_verification.py (editable venv, the failing test_mul written first, a
`command` agent): with reporting options (`-rs`, `-p no:terminal -qq --no-summary`) an honest
story is done and a broken one is blocked, exactly as without them; with options that would
hide the failing tests (a test path, `-k`, `--ignore`, `--deselect`) a broken story is still
blocked, and the run says which options verification left out.

Two runs through the real CLI walk the two paths: an honest story done under one set of
reporting options (`SILENT`: tests/e2e/test_honest_verification.py's
`test_1_an_honest_agent_reaches_done_with_a_commit`, the review told both counts), and here a
broken one blocked, both attempts counted, under the other set and every hiding option at
once. The other option set's verdict on each change is the judge's, in a story worktree
prepared once (tests/support/judge_rows.py; its base's run under `SILENT` is test_1's, the
broken change's verdict under `SILENT` test_2's there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_honest_verification import AGENT, ON_BENCH, Project, src_bench, template
from tests.support.git_support import git_env
from tests.support.judge_rows import Bench

__all__ = ["git_env", "src_bench", "template"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

#: Reporting options that remove the text pytest's failing tests are read from (`-rs` drops the
#: FAILED lines, `-p no:terminal` all output). Every option, one by one, is checked against
#: real pytest in tests/verify/test_verify_pytest_run.py; here each set once per verdict.
RS = "-rs"
#: Options that, if honoured, would make the broken story's suite pass (see the test); each
#: alone would (a test path, `-k`, `--ignore` with `--deselect`).
HIDING = [
    "tests/test_sub.py",
    "-k sub",
    "--ignore=tests/test_mul.py --deselect tests/test_add.py::test_add -x",
]
MISSING_MUL = "tests/test_mul.py: ModuleNotFoundError: No module named 'calc.mul'"


@ON_BENCH
def test_the_judge_passes_an_honest_change_whatever_the_reporting_options(
    src_bench: Bench,
) -> None:
    """The other verdict: the honest change under `-rs` passes with both counts read (the
    broken one under `-p no:terminal …` fails naming the failing test module and its error:
    tests/e2e/test_honest_verification.py's `test_2_…`, on the same bench)."""
    honest = src_bench.judge(AGENT, "honest-py", env={"PYTEST_ADDOPTS": RS})
    assert honest.passed, honest.reason
    counted = {"runner": "pytest", "skipped": 0}
    assert honest.judged["counts"] == {**counted, "passed": 2, "failed": 0}, honest.judged
    assert honest.judged["base_counts"] == {**counted, "passed": 0, "failed": 1}


def test_options_hiding_the_failing_tests_cannot_make_a_broken_story_done(
    template: Path, tmp_path: Path
) -> None:
    """A passing tests/test_sub.py beside them: honoured, any of these options would run it
    alone at the base and in the attempt (1 passed both times, `add` broken unseen) and the
    story would be done. Verification leaves them out, says so, keeps `-rs` (which drops the
    FAILED lines), and the story is blocked, each attempt's reason read the same way."""
    project = Project(template, tmp_path, "break-py")
    (project.root / "tests" / "test_sub.py").write_text("def test_sub():\n    assert 3 - 1 == 2\n")
    project.repo.commit_all("a passing test")

    result = project.run(addopts=" ".join([RS, *HIDING]))

    assert result.returncode == 5, result.output
    fm = project.fm()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    reasons = [str(e.get("reason")) for e in project.recoveries()]
    assert len(reasons) == 2 and all(MISSING_MUL in r for r in reasons), reasons
    notice = " ".join(line for line in result.stderr.splitlines() if "verification ignores" in line)
    assert "from PYTEST_ADDOPTS" in notice
    for option in HIDING:
        assert option.split()[0] in notice, (option, notice)
    assert RS not in notice.split()
