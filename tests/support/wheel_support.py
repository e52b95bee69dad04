"""This checkout built into a wheel once per test process, for the tests that install it as a
user would (pip in test_install.py, uv in test_uv_installed.py). Built by the pinned uv's
`uv build --wheel` (the same hatchling backend, in an isolated build environment uv fills from
its cache): ~0.5 s of CPU, where `pip wheel` spends ~1.7 s, most of it installing hatchling."""

from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.e2e.realcli.install import once_per_machine, tool_path
from tests.support.folders import process_folder
from tests.support.paths import ROOT


@functools.cache
def built_wheel() -> Path:
    """The wheel `uv build --wheel` builds from this checkout (removed at process exit)."""
    dist = process_folder("ai-sdlc-test-wheel-")
    build = [str(tool_path("uv")), "build", "--wheel", "-q", "-o", str(dist), str(ROOT)]
    # The build backend (hatchling) from uv's cache, where the first build put it: once the
    # tools are cached, `make test` asks no package index; the first build fetches it.
    for extra in (["--offline"], []):
        done = subprocess.run(
            [*build, *extra], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
        if done.returncode == 0:
            break
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("*.whl")
    return wheel


@functools.cache
def wheelhouse() -> Path:
    """A folder of wheels holding the built wheel's dependencies, downloaded once per machine
    (by pip, from the configured index) beside the agent CLIs and kept for as long as the
    wheel's requirements stay the same: installed from it (`--no-index --find-links`), the
    wheel needs no package index, so `make test` asks none once its tools are cached. Skipped,
    with the reason, where the first download cannot reach the index."""
    wheel = built_wheel()
    metadata = next(
        zipfile.ZipFile(wheel).read(name).decode()
        for name in zipfile.ZipFile(wheel).namelist()
        if name.endswith(".dist-info/METADATA")
    )
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    key = hashlib.sha256("\n".join([sys.version, *requires]).encode()).hexdigest()[:12]

    def download(folder: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "-d", str(folder), str(wheel)],
            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"pip cannot reach its package index: {done.stderr.strip()[-300:]}")
        (folder / wheel.name).unlink()  # this checkout's own wheel is built afresh each time

    return once_per_machine(f"wheels-{key}", download)
