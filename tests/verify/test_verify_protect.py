"""Protected tests and the judge on real git repositories with real commands: which files are
protected, the base's versions put in place and the agent's always put back (also after an
interrupt and after a killed process), test configuration in shared files, the baseline of a
worktree that has moved on, JUnit counts."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.verify import run_commands
from ai_sdlc.verify.judge import Judge, JudgeSettings
from ai_sdlc.verify.protect import (
    DEFAULT_PROTECTED,
    added_configuration,
    base_versions_in_place,
    matches,
    pathspecs,
    protected_changes,
    restore_pending,
)
from tests.support.git_support import git, git_env

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")


@pytest.mark.parametrize(
    ("path", "protected"),
    [
        ("tests/test_calc.py", True),
        ("tests/data/input.json", True),
        ("pkg/tests/helpers.py", True),
        ("test/mul.js", True),
        ("web/__tests__/app.js", True),
        ("spec/calc_spec.rb", True),
        ("test_calc.py", True),
        ("src/pkg/test_util.py", True),
        ("calc_test.go", True),
        ("web/app.test.ts", True),
        ("web/app.spec.ts", True),
        ("conftest.py", True),
        ("src/conftest.py", True),
        ("pytest.ini", True),
        ("jest.config.js", True),
        ("vitest.config.mts", True),
        (".mocharc.yml", True),
        ("src/calc.py", False),
        ("pyproject.toml", False),
        ("testing.py", False),
        ("contest.py", False),
        ("docs/tests.md", False),
    ],
)
def test_default_protected_patterns(path: str, protected: bool) -> None:
    assert matches(path, DEFAULT_PROTECTED) is protected


def test_anchored_and_folder_patterns() -> None:
    assert matches("tests/unit/a.py", ["tests/unit/"])
    assert not matches("pkg/tests/unit/a.py", ["tests/unit/"])
    assert matches("pkg/tests/unit/a.py", ["**/tests/unit/"])
    assert matches("checks/a_check.py", ["checks/*_check.py"])
    assert not matches("checks/sub/a_check.py", ["checks/*_check.py"])
    assert not matches("anything.py", [])


def repo_with(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def test_git_pathspecs_select_what_the_patterns_match(tmp_path: Path) -> None:
    names = [
        "tests/test_a.py",
        "pkg/tests/b.py",
        "src/c_test.go",
        "src/calc.py",
        "conftest.py",
        "docs/x.md",
        "web/a.spec.ts",
    ]
    root = repo_with(tmp_path, dict.fromkeys(names, "x\n"))
    listed = git(root, "ls-files", "--", *pathspecs(DEFAULT_PROTECTED)).split()
    assert sorted(listed) == sorted(n for n in names if matches(n, DEFAULT_PROTECTED))


def test_changed_protected_files_and_test_sections(tmp_path: Path) -> None:
    root = repo_with(
        tmp_path,
        {
            "tests/test_a.py": "def test_a():\n    assert True\n",
            "tests/test_b.py": "def test_b():\n    assert True\n",
            "calc.py": "x = 1\n",
            "pyproject.toml": '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\n'
            'addopts = "-q"\n',
        },
    )
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (root / "tests" / "test_b.py").unlink()
    (root / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")
    (root / "calc.py").write_text("x = 2\n")
    pyproject = root / "pyproject.toml"
    # a dependency added: the project's to change, not a test change
    pyproject.write_text(pyproject.read_text().replace('name = "calc"', 'name = "calc"\nx = 1'))
    assert protected_changes(root, base, DEFAULT_PROTECTED) == (
        ["tests/test_a.py", "tests/test_b.py"],
        [],
    )
    pyproject.write_text(pyproject.read_text().replace('"-q"', '"-q --deselect tests"'))
    files, sections = protected_changes(root, base, DEFAULT_PROTECTED)
    assert files == ["tests/test_a.py", "tests/test_b.py"]
    assert sections == ["pyproject.toml [tool.pytest.ini_options]"]


def test_added_test_configuration_committed_or_not(tmp_path: Path) -> None:
    """New config files (untracked or committed), a test section a shared file gained, and the
    new tests beside them; edits of what the base already had are not "added"."""
    root = repo_with(
        tmp_path,
        {
            "tests/test_a.py": "def test_a():\n    assert True\n",
            "pyproject.toml": '[project]\nname = "calc"\n',
            "setup.cfg": "[tool:pytest]\naddopts = -q\n",
        },
    )
    base = git(root, "rev-parse", "HEAD").strip()
    assert added_configuration(root, base, DEFAULT_PROTECTED) == ([], [])
    (root / "tests" / "test_new.py").write_text("def test_new(x):\n    assert x\n")
    (root / "src").mkdir()
    (root / "src" / "calc.py").write_text("x = 1\n")
    (root / "setup.cfg").write_text("[tool:pytest]\naddopts = -q -x\n")  # an edit, not added
    assert added_configuration(root, base, DEFAULT_PROTECTED) == ([], ["tests/test_new.py"])
    (root / "tests" / "conftest.py").write_text("collect_ignore = ['test_a.py']\n")
    (root / "pytest.ini").write_text("[pytest]\n")
    git(root, "add", "pytest.ini")
    git(root, "commit", "-q", "-m", "pytest.ini")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[tool.pytest.ini_options]\ntestpaths = ["x"]\n')
    config, added = added_configuration(root, base, DEFAULT_PROTECTED)
    assert sorted(config) == ["pyproject.toml", "pytest.ini", "tests/conftest.py"]
    assert added == ["tests/test_new.py"]
    # with a narrower `verify.protected`, only the sections of shared files are still seen
    assert added_configuration(root, base, ["tests/test_a.py"]) == (["pyproject.toml"], [])


def test_base_versions_are_put_in_place_and_the_agents_put_back(tmp_path: Path) -> None:
    root = repo_with(
        tmp_path,
        {"tests/test_a.py": "base a\n", "tests/test_b.py": "base b\n", "tests/run.sh": "base\n"},
    )
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "test_a.py").write_text("agent a\n")
    (root / "tests" / "test_b.py").unlink()
    (root / "tests" / "run.sh").write_text("agent run\n")
    (root / "tests" / "run.sh").chmod(0o755)
    state = tmp_path / "state"
    changed = ["tests/test_a.py", "tests/test_b.py", "tests/run.sh"]
    seen: dict[str, str] = {}
    with base_versions_in_place(root, base, changed, state):
        for name in changed:
            seen[name] = (root / name).read_text()
    assert seen == {"tests/test_a.py": "base a\n", "tests/test_b.py": "base b\n",
                    "tests/run.sh": "base\n"}  # fmt: skip
    assert (root / "tests" / "test_a.py").read_text() == "agent a\n"
    assert not (root / "tests" / "test_b.py").exists()
    assert (root / "tests" / "run.sh").read_text() == "agent run\n"
    assert (root / "tests" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert not list(state.rglob("*.json"))  # nothing left to restore
    # an interrupt inside: put back all the same
    with pytest.raises(KeyboardInterrupt), base_versions_in_place(root, base, changed, state):
        raise KeyboardInterrupt
    assert (root / "tests" / "test_a.py").read_text() == "agent a\n"
    assert not (root / "tests" / "test_b.py").exists()


KILLED = """\
import os, sys
from pathlib import Path
from ai_sdlc.verify.protect import base_versions_in_place
root, base, state = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
with base_versions_in_place(root, base, ["tests/test_a.py"], state):
    os._exit(9)  # killed while the base's versions are in place
"""


def test_a_process_killed_mid_check_loses_nothing(tmp_path: Path) -> None:
    root = repo_with(tmp_path, {"tests/test_a.py": "base a\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "test_a.py").write_text("agent a\n")
    state = tmp_path / "state"
    done = subprocess.run([sys.executable, "-c", KILLED, str(root), base, str(state)], check=False)
    assert done.returncode == 9
    assert (root / "tests" / "test_a.py").read_text() == "base a\n"  # left in place by the kill
    assert restore_pending(root, state) == ["tests/test_a.py"]
    assert (root / "tests" / "test_a.py").read_text() == "agent a\n"
    assert restore_pending(root, state) == []


def pytest_line() -> str:
    return shlex.join([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"])


def verifier(command: str) -> object:
    def verify(path: Path) -> object:
        return run_commands([("test", command)], cwd=path, timeout=120)

    return verify


CALC = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "pytest.ini": "[pytest]\npythonpath = .\n",
}


def test_a_baseline_for_a_tree_that_moved_on_uses_a_temporary_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    root = repo_with(tmp_path, CALC)
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "test_more.py").write_text("def test_more():\n    pass\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "an attempt")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")  # uncommitted, broken
    judge = Judge(JudgeSettings(commands=(("test", pytest_line()),)), tmp_path / "state")
    baseline = judge.baseline(root, base, verifier(pytest_line()))  # type: ignore[arg-type]
    assert baseline is not None and baseline.passed
    assert baseline.counts is not None and baseline.counts.passed == 1  # the base's one test
    assert "a - b" in (root / "calc.py").read_text()  # the work tree untouched
    assert git(root, "worktree", "list").count("\n") == 1  # the temporary checkout is gone
    cached = list((tmp_path / "state" / "baselines").glob("*.json"))
    assert len(cached) == 1
    # a new judge (another process) reads it from the cache without running anything
    again = Judge(JudgeSettings(commands=(("test", pytest_line()),)), tmp_path / "state")
    assert again.known(root, base) == baseline
    # another verification config is another baseline, and so is another worktree setup or
    # `verify.env` (the base's verification ran in another environment)
    other = Judge(JudgeSettings(commands=(("test", "true"),)), tmp_path / "state")
    assert other.known(root, base) is None
    command = (("test", pytest_line()),)
    for changed in (
        JudgeSettings(commands=command, setup=("pip install -e .",)),
        JudgeSettings(commands=command, env=(("PYTEST_ADDOPTS", "-p no:xdist"),)),
    ):
        assert Judge(changed, tmp_path / "state").known(root, base) is None, changed


def test_a_changed_pytest_section_fails_the_attempt_and_the_opt_out_lets_it_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    files = dict(CALC)
    del files["pytest.ini"]
    files["pyproject.toml"] = '[tool.pytest.ini_options]\npythonpath = ["."]\n'
    root = repo_with(tmp_path, files)
    base = git(root, "rev-parse", "HEAD").strip()
    verify = verifier(pytest_line())
    judge = Judge(JudgeSettings(commands=(("test", pytest_line()),)), tmp_path / "state")
    assert judge.baseline(root, base, verify) is not None  # type: ignore[arg-type]
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\naddopts = "-k \'not add\'"\n'
    )
    (root / "tests" / "test_other.py").write_text("def test_other():\n    pass\n")
    verdict = verify(root)  # type: ignore[operator]
    assert verdict.passed  # the agent's own run: test_add deselected
    judged = judge.judge(root, base, verdict, verify)  # type: ignore[arg-type]
    assert not judged.passed
    assert judged.reason.startswith(
        "pyproject.toml [tool.pytest.ini_options]: the story's change edits the project's test "
        "configuration"
    )
    allowed = judge.judge(root, base, verdict, verify, allow_test_changes=True)  # type: ignore[arg-type]
    assert allowed.passed
    assert allowed.judged["allow_test_changes"] is True


def test_junit_report_gives_the_counts(tmp_path: Path) -> None:
    root = repo_with(tmp_path, {"x.txt": "x\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    writer = tmp_path / "write_junit.py"
    writer.write_text(
        "import sys\nfrom pathlib import Path\n"
        "n = int(Path(sys.argv[1]).read_text()) if Path(sys.argv[1]).exists() else 3\n"
        "cases = ''.join(f'<testcase name=\"t{i}\"/>' for i in range(n))\n"
        "Path('report.xml').write_text(f'<testsuite>{cases}</testsuite>')\n"
    )
    count = tmp_path / "count"
    command = shlex.join([sys.executable, str(writer), str(count)])
    settings = JudgeSettings(commands=(("test", command),), junit="report.xml")
    judge = Judge(settings, tmp_path / "state")
    verify = verifier(command)
    baseline = judge.baseline(root, base, verify)  # type: ignore[arg-type]
    assert baseline is not None and baseline.counts is not None
    assert (baseline.counts.passed, baseline.counts.runner) == (3, "junit")
    assert not (root / "report.xml").exists()  # read, then removed: never committed
    count.write_text("2")  # one test fewer passes
    (root / "x.txt").write_text("changed\n")
    judged = judge.judge(root, base, verify(root), verify)  # type: ignore[arg-type,operator]
    assert not judged.passed
    assert judged.reason.startswith("pass-count floor: 2 tests passed, the base had 3 passing")


def test_a_base_whose_pytest_cannot_run_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # this venv's plugins: 1 s a run
    root = repo_with(tmp_path, {"x.txt": "x\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    command = shlex.join([sys.executable, "-m", "pytest", "no/such/tests"])
    judge = Judge(JudgeSettings(commands=(("test", command),)), tmp_path / "state")
    with pytest.raises(InvalidInputError, match="verification fails before any change: pytest"):
        judge.baseline(root, base, verifier(command))  # type: ignore[arg-type]


def test_what_the_baseline_writes_into_the_untouched_worktree_is_undone(tmp_path: Path) -> None:
    """The baseline runs before a read-only phase: files its tests write there (a report, a
    rewritten fixture) must not be blamed on that phase's agent. Ignored files stay."""
    root = repo_with(
        tmp_path, {"sub/data.txt": "base\n", "sub/.gitignore": "*.log\n", "sub/x.txt": "x\n"}
    )
    base = git(root, "rev-parse", "HEAD").strip()
    writes = (
        "from pathlib import Path; Path('out/report.txt').parent.mkdir();"
        "Path('out/report.txt').write_text('r'); Path('data.txt').write_text('changed');"
        "Path('run.log').write_text('log')"
    )
    command = shlex.join([sys.executable, "-c", writes])
    judge = Judge(JudgeSettings(commands=(("test", command),)), tmp_path / "state")
    sub = root / "sub"
    baseline = judge.baseline(sub, base, verifier(command))  # type: ignore[arg-type]
    assert baseline is not None and baseline.passed
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert (sub / "data.txt").read_text() == "base\n"
    assert (sub / "run.log").exists()  # ignored: left alone


def test_a_test_file_the_agent_made_a_symlink_comes_back_as_one(tmp_path: Path) -> None:
    root = repo_with(tmp_path, {"tests/test_a.py": "base a\n", "tests/real.py": "real\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    link = root / "tests" / "test_a.py"
    link.unlink()
    link.symlink_to("real.py")
    with base_versions_in_place(root, base, ["tests/test_a.py"], tmp_path / "state"):
        assert not link.is_symlink() and link.read_text() == "base a\n"
    assert link.is_symlink() and str(link.readlink()) == "real.py"
    assert (root / "tests" / "real.py").read_text() == "real\n"  # never written through


def test_a_test_file_replaced_by_a_folder_fails_the_attempt(tmp_path: Path) -> None:
    root = repo_with(tmp_path, {"tests/test_a.py": "def test_a():\n    pass\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    judge = Judge(JudgeSettings(commands=(("test", "true"),)), tmp_path / "state")
    verify = verifier("true")
    assert judge.baseline(root, base, verify) is not None  # type: ignore[arg-type]
    (root / "tests" / "test_a.py").unlink()
    (root / "tests" / "test_a.py").mkdir()
    (root / "tests" / "test_a.py" / "keep.txt").write_text("agent's\n")
    judged = judge.judge(root, base, verify(root), verify)  # type: ignore[arg-type,operator]
    assert not judged.passed
    assert (
        judged.reason == "tests/test_a.py: the story's change replaces this test file by a folder"
    )
    assert (root / "tests" / "test_a.py" / "keep.txt").read_text() == "agent's\n"


def test_nothing_is_written_through_a_test_folder_made_a_symlink(tmp_path: Path) -> None:
    """An agent that points `tests/` outside the work tree never gets the base's versions
    written (or the agent's "put back") there: the attempt fails and the outside is untouched."""
    root = repo_with(tmp_path, {"tests/test_a.py": "def test_a():\n    pass\n"})
    base = git(root, "rev-parse", "HEAD").strip()
    judge = Judge(JudgeSettings(commands=(("test", "true"),)), tmp_path / "state")
    verify = verifier("true")
    assert judge.baseline(root, base, verify) is not None  # type: ignore[arg-type]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_a.py").write_text("precious\n")
    (root / "tests" / "test_a.py").unlink()
    (root / "tests").rmdir()
    (root / "tests").symlink_to(outside)
    judged = judge.judge(root, base, verify(root), verify)  # type: ignore[arg-type,operator]
    assert not judged.passed
    assert judged.reason == "tests/test_a.py: the story's change makes its folder tests a symlink"
    assert (outside / "test_a.py").read_text() == "precious\n"
    state = tmp_path / "state"
    with (
        pytest.raises(OSError, match="symlink"),
        base_versions_in_place(root, base, ["tests/test_a.py"], state),
    ):
        pass
    assert (outside / "test_a.py").read_text() == "precious\n"
