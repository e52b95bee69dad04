"""`make test-cpu`'s plugin (bench/suite_cpu.py): a test's CPU includes the children it waited
for, and the summary ranks files by it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench import suite_cpu

#: A test whose child burns at least 0.3 s of CPU, and one that does nothing.
TESTS = """
import subprocess, sys

BURN = "import time\\nwhile time.process_time() < 0.3:\\n    pass\\n"

def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", BURN], check=True)

def test_idle():
    pass
"""


def test_a_tests_cpu_counts_its_children_and_the_summary_ranks_files(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(TESTS)
    (tmp_path / "test_quiet.py").write_text("def test_quiet():\n    pass\n")
    folder = tmp_path / "cpu"
    folder.mkdir()
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        suite_cpu.FOLDER_VAR: str(folder),
        "PYTHONPATH": str(root),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "bench.suite_cpu", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    files = suite_cpu.per_file(folder)
    assert set(files) == {"test_burn.py", "test_quiet.py"}
    assert files["test_burn.py"]["tests"] == 2 and files["test_quiet.py"]["tests"] == 1
    assert files["test_burn.py"]["cpu"] >= 0.3 > files["test_quiet.py"]["cpu"]
    summary = subprocess.run(
        [sys.executable, str(root / "bench" / "suite_cpu.py"), str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert lines[0].startswith("3 tests, ")
    assert lines[2].endswith("test_burn.py") and lines[3].endswith("test_quiet.py")
