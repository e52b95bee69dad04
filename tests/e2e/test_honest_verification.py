"""Issue 23's "Done when", end to end through the real CLI, on the most common Python set-up: a
src-layout package (`src/calc/`) installed editable into the project's own `.venv`, the failing
`tests/test_mul.py` written first (test-first), `worktree.setup` as `ai-sdlc init` proposes it,
and a `command` agent (tests/support/fakes/project_agent.py) doing every phase in the story's
worktree.

An honest agent's story is done and committed; an agent that breaks the code, or that deletes,
skips, weakens the failing test or skips everything from a new conftest.py, never is, and each
of its attempts is counted; an empty change and a refine answer without a decision are counted,
never approved; a base that cannot be verified stops before any agent call, nothing counted.

The project and its venv are built once per session (`pip install -e .`, offline; the venv
reads the test venv's own packages, so each sandboxed pytest run starts from the seeded
bytecode: `calc_project(real_site=True)`) and copied for each test with the venv relocated
(tests/support/worktree_env_support.py). The runs through
the real CLI start at the implementation where refinement is not the promise; the changes that
differ only in what the judge sees (each game, a new conftest, a break in the worktree) are
judged in one story worktree prepared once (tests/support/judge_rows.py), beside one run of
the games' path end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from ai_sdlc.worktree_env import wrongtree
from tests.conftest import CliResult, run_cli
from tests.support.git_support import Repo, git, git_env
from tests.support.held_support import configure, start_at_implement
from tests.support.judge_rows import Bench
from tests.support.paths import FAKES
from tests.support.worktree_env_support import RECIPE, VERIFY, calc_project, copy_project

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")

AGENT = FAKES / "project_agent.py"
#: PYTEST_DISABLE_PLUGIN_AUTOLOAD: the project's venv reads the test venv's packages as they are
#: (`calc_project(real_site=True)`), whose pytest plugins (hypothesis, xdist...) a user's
#: project has none of.
ENV = {"AI_SDLC_PROVIDER": "command", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
#: Written first, failing at the base: `calc.mul` does not exist yet.
TEST_MUL = "from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"


#: The session's template and src bench: each module that imports the fixtures below registers
#: a copy of them, which pytest would run once per module (three builds of each in `make
#: test`); the session's stash keeps the first one's result for all.
_TEMPLATE = pytest.StashKey[Path]()
_SRC_BENCH = pytest.StashKey[Bench]()


@pytest.fixture(scope="session")
def template(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project, once per session (`_TEMPLATE`): calc with its editable venv, the failing
    test_mul committed, then `ai-sdlc init` (which proposes the setup) and the verification
    and limits set through `ai-sdlc config`, as a user would."""
    stash = request.config.stash
    if _TEMPLATE not in stash:
        stash[_TEMPLATE] = build_template(tmp_path_factory.mktemp("calc-template"))
    return stash[_TEMPLATE]


def build_template(folder: Path) -> Path:
    """The project of `template`, built in `folder`."""
    gitconfig = folder / "gitconfig"
    gitconfig.write_text("[user]\n\tname = T\n\temail = t@example.com\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        repo = calc_project(folder, real_site=True)
        root = repo.root
        (root / "tests" / "test_mul.py").write_text(TEST_MUL)
        repo.commit_all("a failing test for mul, written first")
        (root / ".ai-sdlc" / "config.yaml").unlink(missing_ok=True)
        init = run_cli(root, "init", "--json")
        assert init.returncode == 0, init.output
        assert json.loads(init.stdout)["worktree_setup"] == json.loads(RECIPE)
        for key, value in (
            ("ai.provider", "command"),
            ("verify.test", VERIFY),
            ("limits.implementation_retries", "1"),
            ("limits.refinement_iterations", "1"),
        ):
            done = run_cli(root, "config", key, value)
            assert done.returncode == 0, done.output
    return root


class Project:
    """A copy of the template with the stand-in agent doing `behaviour`: its config written
    once (`held_support.configure`: the agent's command, and its records folder outside the
    project named in `sandbox.writable`, as a user widens it), and one story, which starts at
    its implementation unless `at_refine`."""

    def __init__(
        self, template: Path, tmp_path: Path, behaviour: str, *, at_refine: bool = False
    ) -> None:
        self.repo: Repo = copy_project(template, tmp_path)
        self.root = self.repo.root
        self.log = tmp_path / "records" / "agent.log"
        self.log.parent.mkdir()
        command = [sys.executable, str(AGENT), str(self.log), behaviour, "{phase}", "{prompt_file}"]
        configure(self.root, command, self.log.parent, ENV)
        self.sid = self.repo.story("Multiply numbers")
        if not at_refine:
            start_at_implement(self.root, self.sid)

    def config(self, key: str, value: str) -> None:
        done = run_cli(self.root, "config", key, value)
        assert done.returncode == 0, done.output

    def run(self, addopts: str | None = None) -> CliResult:
        """`ai-sdlc run` of the story (`addopts`: the user's PYTEST_ADDOPTS)."""
        env = ENV if addopts is None else {**ENV, "PYTEST_ADDOPTS": addopts}
        return run_cli(self.root, "run", self.sid, env=env, timeout=180)

    def fm(self) -> dict[str, object]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def recoveries(self) -> list[dict[str, object]]:
        """The recovery events of the story's event log (the ledger the counter is kept by)."""
        log = self.root / ".ai-sdlc" / "stories" / self.sid / "events.jsonl"
        found = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        return [e for e in found if e.get("action") == "recovery"]

    def commits(self) -> int:
        branch = str(self.fm()["branch"])
        return int(git(self.root, "rev-list", "--count", f"main..{branch}").strip())


def test_the_copied_project_is_set_up_as_a_user_has_it(template: Path, tmp_path: Path) -> None:
    """The relocated venv imports the copy's own main checkout (the guard's case), and the
    setup in the config is the one `init` proposed."""
    root = copy_project(template, tmp_path).root
    found = wrongtree.check(
        [("test", VERIFY)],
        worktree=root / ".ai-sdlc" / "worktrees" / "S-0001",
        main=root,
        project=root,
        worktrees_root=root / ".ai-sdlc" / "worktrees",
        environ={"PATH": "/usr/bin:/bin"},
    )
    assert [Path(f.target) for f in found] == [root / "src"]
    shown = run_cli(root, "config", "worktree.setup")
    assert json.loads(RECIPE)[0] in shown.stdout
    assert "proposed by `ai-sdlc init`" in (root / ".ai-sdlc" / "config.yaml").read_text()


#: Reporting options that leave pytest's output empty (the counts come from the judge's own
#: report): a user's PYTEST_ADDOPTS changes no verdict (tests/verify/test_verify_addopts_cli.py).
SILENT = "-p no:terminal -qq --no-summary"


def test_1_an_honest_agent_reaches_done_with_a_commit(template: Path, tmp_path: Path) -> None:
    """Done and committed, under the user's silencing PYTEST_ADDOPTS (`SILENT`): no notice
    of options left out, and the review is told both counts. The agent's right `mul` comes
    with a new src/sitecustomize.py, which runs inside the test process: the base's tests run
    once more without it (they pass: done), and the review is told it is there."""
    project = Project(template, tmp_path, "honest-startup")

    result = project.run(addopts=SILENT)

    assert result.returncode == 0, result.output
    assert "verification ignores" not in result.stderr
    review = " ".join(Path(str(project.log) + ".review").read_text().split())
    assert "Tests: 2 passed, 0 failed, 0 skipped" in review
    assert "(at the story's base: 0 passed, 1 failed, 0 skipped)" in review
    assert (
        "Files this change adds that Python runs at interpreter start, inside the test "
        "process: src/sitecustomize.py." in review
    )
    fm = project.fm()
    assert fm["status"] == "done"
    assert fm.get("total_recovery_attempts", 0) == 0
    assert project.calls().count("implement") == 1 and "review" in project.calls()
    assert project.commits() >= 1
    branch = str(fm["branch"])
    assert git(project.root, "show", f"{branch}:src/calc/mul.py").endswith("return a * b\n")
    assert git(project.root, "show", f"{branch}:tests/test_mul.py") == TEST_MUL
    assert git(project.root, "show", f"{branch}:src/sitecustomize.py")
    assert not (project.root / "src" / "calc" / "mul.py").exists()  # main checkout untouched


GAMES = {
    "delete-py": "tests/test_mul.py: the story's change removes or weakens test_mul",
    "skip-py": "tests/test_mul.py: the story's change removes or weakens test_mul",
    "weaken-py": "tests/test_mul.py: the story's change removes or weakens test_mul",
    "conftest-py": "conftest.py: the story's change adds test configuration; without it the "
    "base's tests fail against the change: tests/test_mul.py::test_mul: assert 7 == 12",
    # Found by trying as a hostile agent would: new test configuration that hides the failing
    # test from the floor (which counts only) is taken away for one run of the base's tests.
    "ignore-py": "conftest.py: the story's change adds test configuration; without it the "
    "base's tests fail against the change: tests/test_mul.py::test_mul: assert 7 == 12",
    "forge-py": "tests/conftest.py: the story's change adds test configuration; without it",
    # Found by a hostile test: code run at interpreter start, from the worktree's git-ignored
    # venv (not in the diff) or from a new module on the editable path.
    "venv-pth-py": "the attempt changed the worktree's environment: "
    ".venv/lib/python{v}/site-packages/forge_at_start.py, "
    ".venv/lib/python{v}/site-packages/zz-forge.pth",
    "sitecustomize-py": "src/sitecustomize.py: the story's change adds test configuration; "
    "without it the base's tests fail against the change: tests/test_mul.py::test_mul",
    # After this file's other rows on the bench: pyproject.toml is a setup input, so its
    # change and its undoing each set the worktree's venv up again.
    "testpaths-py": "pyproject.toml: the story's change adds test configuration; without it",
}


#: The tests on `src_bench`, in every module that uses it, on one xdist worker (`--dist
#: loadgroup`): the bench is then made once in `make test`, not once per worker.
ON_BENCH = pytest.mark.xdist_group("py-src-bench")


@pytest.fixture(scope="session")
def src_bench(
    request: pytest.FixtureRequest, template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Bench:
    """A story of the project with its worktree, environment and baseline made once per
    session (`_SRC_BENCH`), where the judge's verdict on each change is taken
    (tests/support/judge_rows.py): this file's changes, the src-layout rows of the verdict
    table (tests/e2e/test_held_python.py) and the reporting options' verdicts
    (tests/verify/test_verify_addopts_cli.py)."""
    stash = request.config.stash
    if _SRC_BENCH not in stash:
        folder = tmp_path_factory.mktemp("bench-src")
        stash[_SRC_BENCH] = Bench(copy_project(template, folder).root, folder / "records", ENV)
    return stash[_SRC_BENCH]


@ON_BENCH
def test_1_an_honest_new_conftest_for_new_tests_is_not_taken_for_gaming(src_bench: Bench) -> None:
    """The base's tests run once more without the new conftest.py (and the new test using its
    fixture): they pass, and the change passes the judge."""
    verdict = src_bench.judge(AGENT, "honest-conftest")

    assert verdict.passed, verdict.reason
    assert verdict.judged["protected_added"] == ["tests/conftest.py"]
    assert verdict.judged["base_tests_counts"]["passed"] == 2  # test_add and test_mul, alone


@ON_BENCH
def test_2_an_agent_that_breaks_the_code_only_in_the_worktree_is_never_done(
    src_bench: Bench,
) -> None:
    """`add` broken in the worktree: the main venv would still pass (it imports <main>/src);
    the worktree's own venv does not. Judged under the user's silencing PYTEST_ADDOPTS
    (`SILENT`), whose verdict is the same as without them (the reporting options' other
    verdicts, and this story counted and never done end to end:
    tests/verify/test_verify_addopts_cli.py)."""
    verdict = src_bench.judge(AGENT, "break-py", env={"PYTEST_ADDOPTS": SILENT})

    assert not verdict.passed
    assert verdict.counts is not None and verdict.counts.passed == 0, verdict.counts
    assert verdict.reason == "tests/test_mul.py: ModuleNotFoundError: No module named 'calc.mul'"


@ON_BENCH
@pytest.mark.parametrize("behaviour", list(GAMES))
def test_3_the_judge_refuses_each_game_of_the_failing_test(
    src_bench: Bench, behaviour: str
) -> None:
    """Each game's change fails the judge, the reason naming what it did; a game in the
    worktree's environment leaves it made again (the next attempt starts from what setup
    makes)."""
    verdict = src_bench.judge(AGENT, behaviour)

    assert not verdict.passed
    said = GAMES[behaviour].format(v=f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert said in verdict.reason, verdict.reason
    assert not list((src_bench.path / ".venv").glob("lib/python*/site-packages/*forge*"))


def test_3_an_agent_gaming_the_failing_test_never_reaches_done_and_each_attempt_counts(
    template: Path, tmp_path: Path
) -> None:
    """The games' path through the real CLI (a forging plugin dropped into the worktree's
    git-ignored venv, which no diff shows): both attempts counted, the reviewer never asked,
    nothing committed, the attempt's files rolled back and the venv made again. (Each game's
    verdict: `test_3_the_judge_refuses_each_game_of_the_failing_test`; the roll-back of edited
    and deleted files: tests/git/test_git_workspace.py.)"""
    project = Project(template, tmp_path, "venv-pth-py")

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.fm()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    assert fm["total_recovery_attempts"] == 2
    recoveries = project.recoveries()
    assert [e.get("recovery_kind") for e in recoveries] == ["implementation_retry"] * 2
    reasons = [str(e.get("reason")) for e in recoveries]
    said = GAMES["venv-pth-py"].format(v=f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert all(said in r for r in reasons), reasons
    assert project.calls().count("implement") + project.calls().count("rework") == 2
    assert "review" not in project.calls()  # the reviewer, who approves anything, never asked
    assert project.commits() == 0
    worktree = project.root / str(fm["worktree_path"])
    assert not (worktree / "src" / "calc" / "mul.py").exists()  # rolled back
    assert (worktree / "tests" / "test_mul.py").read_text() == TEST_MUL
    assert not list((worktree / ".venv").glob("lib/python*/site-packages/*forge*"))  # made again


def test_4_an_empty_change_is_counted_never_approved(template: Path, tmp_path: Path) -> None:
    """The agent changed nothing and says it implemented the story: an implementation retry,
    without asking the reviewer (who approves anything)."""
    project = Project(template, tmp_path, "empty")

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.fm()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    reasons = [str(e.get("reason")) for e in project.recoveries()]
    assert len(reasons) == 2 and all("changed no file" in r for r in reasons), reasons
    assert "review" not in project.calls()
    assert project.commits() == 0


def test_4_a_refine_answer_without_a_decision_is_counted_never_approved(
    template: Path, tmp_path: Path
) -> None:
    """An agent's error text without `DECISION:` is asked again once, then counted as a
    refinement; it never becomes the story, and nothing is implemented."""
    project = Project(template, tmp_path, "undecided", at_refine=True)
    body = StoryStore(project.root).get(project.sid).body

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.fm()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"refinement": 2}  # limits.refinement_iterations: 1
    assert project.calls() == ["refine"] * 4  # two refinements, each asked again once
    assert StoryStore(project.root).get(project.sid).body == body
    assert "APIConnectionError" not in body


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("tests/conftest.py", "import hypothesis_not_installed_xyz\n"),
            "verification fails before any change: pytest could not run (exit 4",
        ),
        (
            ("", ""),
            "verification fails before any change: [ai-sdlc] cannot run '.venv/bin/pytest'",
        ),
    ],
    ids=["pytest-cannot-run", "verify-executable-missing"],
)
def test_5_a_base_that_cannot_be_verified_stops_before_any_agent_call(
    template: Path, tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    project = Project(template, tmp_path, "honest-py", at_refine=True)
    name, text = change
    if name:  # a committed conftest.py importing a package nobody installed
        (project.root / name).write_text(text)
        project.repo.commit_all("conftest")
    else:  # `.venv/bin/pytest`: no such console script, in the worktree or the project
        project.config("verify.test", ".venv/bin/pytest -q")

    result = project.run()

    assert result.returncode == 3, result.output
    assert said in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert project.calls() == []  # no agent was ever started
    fm = project.fm()
    assert fm.get("total_recovery_attempts", 0) == 0
    assert not fm.get("recovery_breakdown")
    assert project.recoveries() == []
    assert fm["status"] != "blocked"
