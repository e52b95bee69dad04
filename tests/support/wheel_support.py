"""This checkout built into a wheel once per test process, for the tests that install it as a
user would (pip in test_install.py, uv in test_uv_installed.py): building costs ~1-2 s of CPU
(an isolated hatchling environment), installing the built wheel a fraction of it."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from tests.support.folders import process_folder
from tests.support.paths import ROOT


@functools.cache
def built_wheel() -> Path:
    """The wheel `pip wheel --no-deps` builds from this checkout (removed at process exit)."""
    dist = process_folder("ai-sdlc-test-wheel-")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("*.whl")
    return wheel
