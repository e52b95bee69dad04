"""`make demo` runs `python -m ai_sdlc.demo`: it must keep working end to end."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_runs_the_main_job_and_ends_blocked_with_breakdown() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    env["NO_COLOR"] = "1"
    # The demo's verification runs real pytest on its tiny project, which needs none of the
    # plugins of this venv (hypothesis, xdist, ...): as in a venv with only the `demo` extra,
    # each run takes 0.2 s instead of 0.6 s.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "ai_sdlc.demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "S-0001: done" in output
    assert (
        "Global recovery limit exceeded (10/10) for S-0002. Breakdown: 5 implementation "
        "retries, 5 API retries." in output
    )
    assert "Where to look:" in output
    # the done story's work is in git: its own worktree, branch and commit, pushed to origin
    worktree = ".ai-sdlc/worktrees/S-0001-add-a-multiply-function"
    branch = "ai-sdlc/S-0001-add-a-multiply-function"
    assert f"created worktree {worktree} on new branch {branch} from main" in output
    assert f"  worktree:  {worktree}\n" in output
    assert f"  branch:    {branch} (pushed to origin)\n" in output
    assert re.search(r"  commit:    [0-9a-f]{7,} feat\(S-0001\): Add a multiply function\n", output)
    assert "  files:     calc/__init__.py, tests/test_calc.py\n" in output
    if shutil.which("gh") is None:
        assert (
            "[S-0001] pull request skipped: gh (GitHub CLI) not found on PATH: branch "
            f"{branch} is pushed to origin; install gh and run `ai-sdlc pr S-0001`" in output
        )
