"""`make demo` runs `python -m ai_sdlc.demo`: it must keep working end to end."""

from __future__ import annotations

import os
import subprocess
import sys


def test_demo_runs_the_main_job_and_ends_blocked_with_breakdown() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    env["NO_COLOR"] = "1"
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
