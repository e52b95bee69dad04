"""The judge reads the same verdict from pytest whatever the user's PYTEST_ADDOPTS says
(verify/pytest_run.py): the options that choose or stop the run are left out, and the failing
tests come from the junit report the judge asks for, not from text `-rs` or `-p no:terminal`
change. Real pytest processes on a small project."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from ai_sdlc.verify import run_commands
from ai_sdlc.verify.commands import VerificationResult, default_environment
from ai_sdlc.verify.pytest_run import dropped_options, judge_addopts

pytestmark = pytest.mark.e2e

REPORT = Path("/r/0.xml")
OURS = f"--junitxml={REPORT} -o junit_family=xunit1"


@pytest.mark.parametrize(
    ("value", "kept", "dropped"),
    [
        ("-rs", "-rs", []),
        ("-rA -v --tb=line", "-rA -v --tb=line", []),
        ("-qq --no-summary -p no:terminal", "-qq --no-summary -p no:terminal", []),
        ("-p no:cacheprovider -p xdist -n 4", "-p no:cacheprovider -p xdist -n 4", []),
        ("--cov src -W error --strict-markers", "--cov src -W error --strict-markers", []),
        ("--lf -x", "", ["--lf", "-x"]),
        ("-vx", "-v", ["-x"]),
        ("-k 'not mul' -m slow", "", ["-k not mul", "-m slow"]),
        ("-knot_mul -vv", "-vv", ["-knot_mul"]),
        ("--maxfail=1 --deselect t.py::a", "", ["--maxfail=1", "--deselect t.py::a"]),
        ("-v tests/unit", "-v", ["tests/unit"]),
        ("--co --sw --ignore=x -c other.ini", "", ["--co", "--sw", "--ignore=x", "-c other.ini"]),
        ("-o testpaths=x -o cache_dir=y", "-o cache_dir=y", ["-o testpaths=x"]),
        ("-p no:junitxml --junitxml=mine.xml", "", ["-p no:junitxml", "--junitxml=mine.xml"]),
        ("-v -- tests", "-v", ["--", "tests"]),
        ("'unbalanced", "", ["'unbalanced"]),
    ],
)
def test_options_that_choose_or_stop_the_run_are_left_out(
    value: str, kept: str, dropped: list[str]
) -> None:
    addopts, left_out = judge_addopts(value, REPORT)
    assert addopts == f"{kept} {OURS}".strip()
    assert left_out == dropped
    assert dropped_options({"PYTEST_ADDOPTS": value}) == dropped


TESTS = {
    "tests/test_a.py": (
        "import pytest\n\n"
        "def test_ok():\n    assert 1\n\n"
        "def test_bad():\n    assert 5 == 6\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n"
    ),
    "tests/test_b.py": (
        "import pytest\n\n"
        "class TestK:\n"
        "    @pytest.mark.parametrize('x', [1, 'a.b'])\n"
        "    def test_p(self, x):\n        assert x == 1\n"
    ),
}
COMMAND = f"{sys.executable} -m pytest -p no:cacheprovider -p no:randomly"


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _verify(root: Path, addopts: str, command: str = COMMAND) -> VerificationResult:
    # This venv's pytest plugins (hypothesis, xdist, ...) are not the project's: loading them
    # cost 1 s of each run's 1.2 s.
    env = {
        **default_environment(),
        "PYTEST_ADDOPTS": addopts,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    return run_commands([("test", command)], cwd=root, timeout=120, env=env)


#: The text pytest prints, from none to all of it: no terminal at all; as little as the options
#: allow (no summary, no traceback, no short report); everything (every report character, the
#: skips of `-rs` among them, very verbose, one-line tracebacks). `-r` keeps only its last value
#: and `-v`/`-q` cancel out, so each run holds options that pull the same way.
HARMLESS = ["-p no:terminal", "-qq --no-summary --tb=no -rN", "-rA -vv --tb=line"]
#: Every option that would choose or stop the run, in one run: each alone changes the verdict
#: (`-x` and `--maxfail=1` stop after test_bad, `-k bad` runs only it, `--deselect` drops it, a
#: path runs only test_b.py), so the verdict stays the plain one only if all are left out.
SELECTING = ["-x --maxfail=1 -k bad --deselect tests/test_a.py::test_bad tests/test_b.py"]


@pytest.fixture(scope="module")
def plain_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project of the `plain` verdict (pytest runs in it write nothing the next run reads:
    no cache provider, bytecode in the judge's own folder)."""
    return _project(tmp_path_factory.mktemp("plain"), TESTS)


@pytest.fixture(scope="module")
def plain(plain_project: Path) -> VerificationResult:
    """The verdict without any PYTEST_ADDOPTS: the one every other must equal."""
    verdict = _verify(plain_project, "")
    assert not verdict.passed
    assert verdict.failing == (
        "tests/test_a.py::test_bad",
        "tests/test_b.py::TestK::test_p[a.b]",
    )
    assert verdict.reason == "tests/test_a.py::test_bad: assert 5 == 6"
    assert verdict.counts is not None and verdict.counts.shown() == "2 passed, 2 failed, 1 skipped"
    return verdict


@pytest.mark.parametrize("addopts", HARMLESS + SELECTING)
def test_the_verdict_is_the_same_whatever_pytest_addopts_says(
    plain: VerificationResult, tmp_path: Path, addopts: str
) -> None:
    verdict = _verify(_project(tmp_path, TESTS), addopts)

    assert (verdict.passed, verdict.failing, verdict.reason) == (
        plain.passed,
        plain.failing,
        plain.reason,
    )
    assert verdict.counts is not None and plain.counts is not None
    assert verdict.counts.shown() == plain.counts.shown()
    assert not list(tmp_path.rglob("*.xml"))  # the report is ours, outside the project
    assert "generated xml file" not in verdict.failure_output  # its random path: not shown


def test_two_runs_of_one_failure_have_one_signature(
    plain: VerificationResult, plain_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's report path (random, and not under /tmp with another TMPDIR) never reaches
    the output, so the same failure twice is seen as the same: the plain run's report was
    under the default temporary folder, this one's is under another."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()

    second = _verify(plain_project, "")

    assert plain.signature == second.signature != ""


def test_a_collection_error_names_the_module_and_its_error(tmp_path: Path) -> None:
    root = _project(tmp_path, {"tests/test_mul.py": "from calc import mul\n"})

    verdict = _verify(root, "-rs -q")

    assert not verdict.passed
    assert verdict.failing == ("tests/test_mul.py",)
    assert verdict.reason.startswith("tests/test_mul.py: ModuleNotFoundError: No module named")


def test_the_commands_own_junit_report_still_gets_a_verdict(tmp_path: Path) -> None:
    """`--junitxml` on the command line overrides ours: the text is read, as before."""
    root = _project(tmp_path, TESTS)

    verdict = _verify(root, "", f"{COMMAND} --junitxml=mine.xml")

    assert verdict.reason == "tests/test_a.py::test_bad: assert 5 == 6"
    assert verdict.failing == ()  # the judge reads them from the output then
    assert (root / "mine.xml").is_file()


def test_a_passing_suite_passes_with_the_users_options(tmp_path: Path) -> None:
    root = _project(tmp_path, {"tests/test_ok.py": "def test_ok():\n    assert 1\n"})

    verdict = _verify(root, "-p no:terminal -x --lf")

    assert verdict.passed and verdict.failing == ()
    assert verdict.counts is not None and verdict.counts.shown() == "1 passed, 0 failed, 0 skipped"
