"""This checkout built into a wheel once per test process, for the tests that install it as a
user would (pip in test_install.py, uv in test_uv_installed.py). Built by the pinned uv's
`uv build --wheel` (the same hatchling backend, in an isolated build environment uv fills from
its cache): ~0.5 s of CPU, where `pip wheel` spends ~1.7 s, most of it installing hatchling."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from tests.e2e.realcli.install import tool_path
from tests.support.folders import process_folder
from tests.support.paths import ROOT


@functools.cache
def built_wheel() -> Path:
    """The wheel `uv build --wheel` builds from this checkout (removed at process exit)."""
    dist = process_folder("ai-sdlc-test-wheel-")
    done = subprocess.run(
        [str(tool_path("uv")), "build", "--wheel", "-q", "-o", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("*.whl")
    return wheel
