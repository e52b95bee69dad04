"""The tiers of docs/testing.md as `make` runs them: `make test-fast` selects by the marker
expression in the Makefile, and every test under `tests/e2e/` must fall out of it (the `e2e`
marker is added by tests/conftest.py at collection, before `-m` deselects)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E2E_FILE = "tests/e2e/test_demo.py"


def fast_expression() -> str:
    """The `-m` expression of the Makefile's test-fast recipe."""
    recipe = (ROOT / "Makefile").read_text().split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    found = re.search(r'-m "([^"]+)"', recipe)
    assert found, "Makefile: test-fast has no -m expression"
    return found.group(1)


def test_make_test_fast_leaves_out_every_test_under_tests_e2e_and_keeps_the_rest() -> None:
    """One collection (a pytest start is the cost): the end-to-end file's tests are all
    deselected, this file's are all kept."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=",
         "-m", fast_expression(), E2E_FILE, "tests/test_tiers.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    kept = [line.split("::")[0] for line in done.stdout.splitlines() if "::" in line]
    assert kept == ["tests/test_tiers.py"]
    deselected = re.search(r"(\d+) deselected", done.stdout)
    assert deselected, f"{E2E_FILE} has no tests: pick another end-to-end file"
