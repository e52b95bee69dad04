"""The JavaScript test runners whose output the failure readers are checked against (uvu,
mocha, jest, vitest), installed once from the npm registry, pinned, into the cache folder the
real agent CLIs use (`tests/e2e/realcli/install.py`): `<cache>/js-runners-<versions>/`, complete
once its `.ready` exists, a file lock serialising xdist workers. Only an unreachable registry
(or no npm) makes a test skip, with the reason; any other failure fails it."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.realcli.install import once_per_machine

#: package → version; change them together with what the tests expect of their output.
RUNNERS = {"uvu": "0.5.6", "mocha": "10.8.2", "jest": "29.7.0", "vitest": "1.6.0"}
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "network")


def runners() -> Path:
    """The folder whose `node_modules` holds every runner (installing them first if needed)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed, so the JavaScript test runners cannot be installed")
    pins = [f"{name}@{version}" for name, version in sorted(RUNNERS.items())]
    digest = hashlib.sha256(" ".join(pins).encode()).hexdigest()[:12]

    def install(folder: Path) -> None:
        folder.mkdir()
        (folder / "package.json").write_text('{"private": true}\n')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *pins],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            if any(sign in output for sign in _OFFLINE):
                pytest.skip(f"the npm registry cannot be reached: {output[-300:]}")
            pytest.fail(f"installing {' '.join(pins)} failed:\n{output[-2000:]}")

    return once_per_machine(f"js-runners-{digest}", install)
