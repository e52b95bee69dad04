"""`make demo` runs `python -m ai_sdlc.demo`: it must keep working end to end."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.demo import command_to_type
from tests.support.paths import ROOT

#: The folder of this venv's console scripts, which `make demo` does not put on PATH.
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))


def _path_without_venv() -> str:
    return os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and d != VENV_BIN
    )


@pytest.mark.slow
def test_demo_runs_the_main_job_and_ends_blocked_with_breakdown(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    env["NO_COLOR"] = "1"
    # The demo keeps its project in the temp folder for the user to look at: the test's own.
    env["TMPDIR"] = str(tmp_path)
    # The demo's verification runs real pytest on its tiny project, which needs none of the
    # plugins of this venv (hypothesis, xdist, ...): as in a venv with only the `demo` extra,
    # each run takes 0.2 s instead of 0.6 s.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # As after `make demo` in a fresh clone: the venv's `ai-sdlc` is not on PATH.
    env["PATH"] = _path_without_venv()
    proc = subprocess.run(
        [sys.executable, "-m", "ai_sdlc.demo"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
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
    # Its worktree was removed when it finished (stderr says so): no line points at it.
    assert f"removed worktree {worktree}" in output
    assert f"  worktree:  {worktree}" not in output  # (the blocked S-0002's is still there)
    assert f"  branch:    {branch} (pushed to origin)\n" in output
    assert re.search(r"  commit:    [0-9a-f]{7,} feat\(S-0001\): Add a multiply function\n", output)
    assert "  files:     calc/__init__.py, tests/test_calc.py\n" in output
    if shutil.which("gh") is None:
        assert (
            "[S-0001] pull request skipped: gh (GitHub CLI) not found on PATH: branch "
            f"{branch} is pushed to origin; install gh and run `ai-sdlc pr S-0001`" in output
        )
    # The closing "Try:" lines name a command that runs as typed, from where `make demo` ran.
    try_line = re.search(r"^Try:  (.+) --project (\S+) worktrees$", output, re.M)
    assert try_line is not None, output
    command = shlex.split(try_line.group(1))
    assert command != ["ai-sdlc"]  # not on this PATH: it would be "command not found"
    version = subprocess.run(
        [*command, "--version"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert version.returncode == 0 and version.stdout.startswith("ai-sdlc "), version
    assert "`ai-sdlc` is not on your PATH" in output
    assert f'export PATH="{VENV_BIN}:$PATH"' in output


def test_the_demo_says_plain_ai_sdlc_when_this_one_is_on_path() -> None:
    if not os.path.isfile(os.path.join(VENV_BIN, "ai-sdlc")):
        pytest.skip("no console script next to this Python (not installed with pip)")
    assert command_to_type(os.pathsep.join([VENV_BIN, _path_without_venv()])) == ("ai-sdlc", None)
    command, hint = command_to_type(_path_without_venv())
    assert command != "ai-sdlc" and hint is not None
    assert os.path.samefile(os.path.join(os.getcwd(), command), os.path.join(VENV_BIN, "ai-sdlc"))
