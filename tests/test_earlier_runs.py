"""tests/support/earlier_runs.py: the temp trees pytest would remove after a session's last
test are gone while its tests run, a tree another session holds stays, and pytest's own
clean-up at the end finds nothing left to do."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

INNER_TEST = """
from pathlib import Path


def test_the_earlier_trees_are_going_while_this_runs(tmp_path: Path) -> None:
    runs = tmp_path.parents[2]  # <runs>/pytest-6/popen-gw0/test_the_earlier...0
    assert tmp_path.parents[1].name == "pytest-6"
    names = {path.name for path in runs.iterdir()}
    assert not {"pytest-1", "pytest-3"} & names, names  # renamed at once, then removed
    assert {"pytest-2", "pytest-4", "pytest-5"} <= names, names
"""


def test_a_session_removes_the_trees_beyond_the_kept_ones_while_it_runs(tmp_path: Path) -> None:
    temp = tmp_path / "t"
    runs = temp / f"pytest-of-{getpass.getuser()}"  # as pytest names it
    for number in range(1, 6):
        tree = runs / f"pytest-{number}" / "test_x0" / "deep"
        tree.mkdir(parents=True)
        for index in range(50):
            (tree / f"f{index}").write_text("x")
    (runs / "pytest-2" / ".lock").write_text("")  # held by a session still running
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1",
         "-p", "tests.support.earlier_runs",
         "-c", str(tmp_path / "pytest.ini"),
         "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    left = sorted(path.name for path in runs.iterdir() if not path.is_symlink())
    assert left == ["pytest-2", "pytest-4", "pytest-5", "pytest-6"]
    assert len(list((runs / "pytest-2").rglob("f*"))) == 50  # the locked tree is whole
