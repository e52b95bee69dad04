"""Issue 33, cases 1 and "one rule" on Python: the src-layout project of issue 23 (`calc`
installed editable into its own `.venv`, the failing `tests/test_mul.py` written first,
`worktree.setup` as `init` proposes it, verify `.venv/bin/python -m pytest`). An agent that
shadows pytest with a module of its own (at the project folder, in `src/`, or git-ignored), or,
judged by `make test`, that makes the Makefile's target `true`, never reaches done and each
attempt is counted, the reason naming the file; an honest agent still is done.

Each layout's path is walked end to end through the real CLI: a story gaming what decides the
verdict is blocked with both attempts counted (the src layout's runs, one done and one blocked,
are tests/e2e/test_honest_verification.py's, on the same project). Every row of the verdict table
(tests/support/verdicts.py) is then the judge's verdict on that row's change, made by the same
agent in a story worktree prepared once per layout (`tests/support/judge_rows.Bench`: the
session's own sandbox, verification and judge)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_honest_verification import ON_BENCH, src_bench, template
from tests.support.git_support import git_env, own_git_config
from tests.support.held_support import AGENT, ImplementStory
from tests.support.held_support import ENV as HELD_ENV
from tests.support.judge_rows import Bench
from tests.support.verdicts import PY_MAKE, PY_SCRIPT, PY_SRC, Row, rows
from tests.support.worktree_env_support import copy_project

__all__ = ["git_env", "src_bench", "template"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]

#: The verify command's own definition, by layout: a Makefile target running a shell script of
#: the project, or that script itself, which runs the venv's pytest.
PYTEST = "exec .venv/bin/python -m pytest -q -p no:cacheprovider\n"
DEFINED = {
    PY_MAKE: ("make test", {"Makefile": "test:\n\tsh run-tests.sh\n", "run-tests.sh": PYTEST}),
    PY_SCRIPT: ("sh run-tests.sh", {"run-tests.sh": PYTEST}),
}
SHORT = {PY_SRC: "src", PY_MAKE: "make", PY_SCRIPT: "script"}
ALLOWED_SHADOW = next(r for r in rows(PY_SRC, allowed=True) if r.said)


def project(template: Path, folder: Path, layout: str) -> Path:
    """A copy of the src-layout project; for a defined layout, with the files that define
    its verify command committed and `verify.test` set to that command."""
    repo = copy_project(template, folder)
    if layout in DEFINED:
        command, files = DEFINED[layout]
        for name, text in files.items():
            (repo.root / name).write_text(text)
        with own_git_config(folder):
            repo.commit_all(f"{command} runs the tests")
        config = repo.root / ".ai-sdlc" / "config.yaml"
        text = config.read_text()
        old = "  test: .venv/bin/python -m pytest -q -p no:cacheprovider\n"
        assert old in text
        config.write_text(text.replace(old, f"  test: {command}\n", 1))  # accepted by Bench
    return repo.root


@pytest.fixture(scope="module")
def bench_for(
    template: Path, src_bench: Bench, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Bench]:
    """The layout's bench: the src layout's is test_honest_verification's `src_bench`; a
    defined layout's is made at its first row (once per module, on `ON_BENCH`'s worker)."""
    made: dict[str, Bench] = {PY_SRC: src_bench}

    def get(layout: str) -> Bench:
        if layout not in made:
            folder = tmp_path_factory.mktemp(f"bench-{SHORT[layout]}")
            made[layout] = Bench(project(template, folder, layout), folder / "records")
        return made[layout]

    return get


@ON_BENCH
def test_a_shadowing_pytest_allowed_by_the_story_still_meets_the_real_runner(
    bench_for: Callable[[str], Bench],
) -> None:
    """Issue 33, safe path (and the verdict table's allowed `shadow-py` row): a story allowing
    test changes lets the held-files check pass a new top-level `pytest.py`; its verification
    still runs the real pytest (the base's baseline chose `PYTHONSAFEPATH=1`), which fails the
    wrong `mul`."""
    bench = bench_for(PY_SRC)
    assert bench.baseline.safe_path
    baselines = list((bench.root / ".ai-sdlc" / "state" / "baselines").glob("*.json"))
    assert len(baselines) == 1 and '"safe_path": true' in baselines[0].read_text()
    verdict = bench.judge(AGENT, ALLOWED_SHADOW.behaviour, allowed=True, env=HELD_ENV)
    assert not verdict.passed
    assert ALLOWED_SHADOW.said in verdict.reason, verdict.reason
    assert "assert 7 == 12" in verdict.reason, verdict.reason


#: Every Python row but the allowed shadowing one, which the safe-path test above judges.
#: `setupcfg-py` after the other src rows: setup.cfg is a setup input, so its change and its
#: undoing each set the worktree's venv up again.
_SRC = [r for r in rows(PY_SRC) + rows(PY_SRC, allowed=True) if r != ALLOWED_SHADOW]
JUDGED = (
    [r for r in _SRC if r.behaviour != "setupcfg-py"]
    + [r for r in _SRC if r.behaviour == "setupcfg-py"]
    + rows(PY_MAKE)
    + rows(PY_SCRIPT)
)


@ON_BENCH
@pytest.mark.parametrize(
    "row",
    JUDGED,
    ids=[f"{SHORT[r.layout]}{'-allowed' if r.allowed else ''}-{r.behaviour}" for r in JUDGED],
)
def test_verdict(bench_for: Callable[[str], Bench], row: Row) -> None:
    """A row of the verdict table: the agent's change passes the judge, or fails it with a
    reason naming the held file (what the story's counted attempt then says)."""
    bench = bench_for(row.layout)
    verdict = bench.judge(AGENT, row.behaviour, allowed=row.allowed, env=HELD_ENV)
    if row.said:
        assert not verdict.passed, verdict
        assert row.said in verdict.reason, verdict.reason
    else:
        assert verdict.passed, verdict.reason


#: The defined layouts' paths; the src layout's (a story done, a gaming story blocked with both
#: attempts counted) are tests/e2e/test_honest_verification.py's runs on the same project.
BLOCKED = [(PY_MAKE, "make-py"), (PY_SCRIPT, "script-py")]


@pytest.mark.parametrize(("layout", "behaviour"), BLOCKED, ids=[b for _l, b in BLOCKED])
def test_a_story_gaming_the_verdict_is_never_done_and_each_attempt_counts(
    template: Path, tmp_path: Path, layout: str, behaviour: str
) -> None:
    """Each layout's path through the real CLI: both attempts (one retry) counted with the
    held file named, the reviewer never asked, nothing committed."""
    [row] = [r for r in rows(layout) if r.behaviour == behaviour]
    root = project(template, tmp_path, layout)
    held = ImplementStory(root, tmp_path / "records" / "agent.log", behaviour)
    result = held.run()
    assert result.returncode == 5, result.output
    held.assert_blocked_counted(row.said)


def test_a_story_allowed_to_change_held_files_shows_them_to_the_review(
    template: Path, tmp_path: Path
) -> None:
    """With `allow_test_changes: true` a right `mul` with a new `.pytest.ini` is done, and the
    review is told which held files it edits, with their diff (it listed test files only)."""
    [row] = [r for r in rows(PY_SRC, allowed=True) if not r.said]
    held = ImplementStory(
        project(template, tmp_path, PY_SRC), tmp_path / "records" / "agent.log", row.behaviour
    )
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
