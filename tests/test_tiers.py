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


def collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: nothing selected
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_make_test_fast_leaves_out_every_test_under_tests_e2e() -> None:
    assert collected(E2E_FILE), f"{E2E_FILE} has no tests: pick another end-to-end file"
    assert collected("-m", fast_expression(), E2E_FILE) == []


def test_make_test_fast_keeps_an_unmarked_test_outside_tests_e2e() -> None:
    here = "tests/test_tiers.py"
    assert collected("-m", fast_expression(), here) == collected(here) != []
