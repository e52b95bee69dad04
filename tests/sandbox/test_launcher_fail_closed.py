"""The launcher still fails closed now that only its forked child applies Landlock: when the
restriction cannot be applied (here: the caller is already 16 Landlock domains deep, the
kernel's limit, so one more is refused with E2BIG), the command does not run, the launcher
exits 126 and says why on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0

#: Restricts itself to the kernel's limit of nested domains, then starts `argv` through
#: `start_session` with a sandbox policy (the launcher would add the 17th domain).
DEEP = r"""
import subprocess, sys
from ai_sdlc.sandbox import landlock
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.spawn import start_session
folder = sys.argv[1]
for _ in range(16):
    landlock.restrict([folder, "/dev/null"])
policy = SandboxPolicy(LandlockBackend(), (folder,))
marker = folder + "/ran"
proc = start_session(
    [sys.executable, "-c", f"open({marker!r}, 'w').close()"],
    sandbox=policy,
    stderr=subprocess.PIPE,
)
err = proc.communicate()[1].decode()
print(proc.returncode)
print(err.strip())
"""


@pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock")
def test_a_restriction_the_kernel_refuses_means_the_command_does_not_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DEEP, str(tmp_path)],
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the launch's private temp folder
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    code, message = done.stdout.split("\n", 1)
    assert code == "126", done.stdout + done.stderr
    assert "[ai-sdlc] sandbox: cannot apply" in message
    assert "the command did not run" in message
    assert not (tmp_path / "ran").exists()
