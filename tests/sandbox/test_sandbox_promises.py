"""Two second lines of the sandbox, each on its own: a command whose restriction cannot be
applied does not run at all (exit 126, fail closed), and a child cannot shorten a file outside
its writable roots by path (`truncate(2)` needs no open for writing: Landlock's TRUNCATE right)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.spawn import start_session

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
needs_landlock = pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock")

#: Uses up the kernel's 16 stacked Landlock layers (each allows every write), then asks for a
#: sandboxed child: its own restriction fails with E2BIG. Prints the child's exit code.
STACKED = r"""
import subprocess, sys
from ai_sdlc.sandbox import landlock
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.spawn import start_session
marker, scratch = sys.argv[1:3]
for _ in range(16):
    landlock.restrict(["/"])
policy = SandboxPolicy(LandlockBackend(), (scratch,))
code = "import sys; open(sys.argv[1], 'w').write('ran')"
child = start_session([sys.executable, "-c", code, marker], stderr=subprocess.PIPE, sandbox=policy)
err = child.communicate()[1].decode()
print(child.returncode)
print(err)
"""


@needs_landlock
def test_a_restriction_that_cannot_be_applied_runs_nothing(tmp_path: Path) -> None:
    marker, scratch = tmp_path / "ran", tmp_path / "scratch"
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", STACKED, str(marker), str(scratch)],
        capture_output=True,
        text=True,
        check=True,
    )
    code, _, err = done.stdout.partition("\n")
    assert int(code) == 126, done.stdout
    assert "sandbox: cannot apply" in err
    assert not marker.exists()


#: Truncates each path given by path (no open), printing what happened.
TRUNCATE = r"""
import os, sys
for path in sys.argv[1:]:
    try:
        os.truncate(path, 0)
        print("truncated")
    except OSError as exc:
        print(exc.strerror)
"""


@needs_landlock
@pytest.mark.skipif(ABI < 3, reason="Landlock handles truncate from ABI 3")
def test_truncating_by_path_outside_the_writable_roots_is_denied(tmp_path: Path) -> None:
    inside, outside = tmp_path / "rw", tmp_path / "ro"
    inside.mkdir()
    outside.mkdir()
    for folder in (inside, outside):
        (folder / "ledger.jsonl").write_text("entry 1\nentry 2\n")
    policy = SandboxPolicy(LandlockBackend(), (str(inside),))
    child = start_session(
        [
            sys.executable,
            "-c",
            TRUNCATE,
            str(outside / "ledger.jsonl"),
            str(inside / "ledger.jsonl"),
        ],
        stdout=subprocess.PIPE,
        sandbox=policy,
    )
    printed = child.communicate()[0].decode().split("\n")
    assert printed[:2] == [os.strerror(13), "truncated"]
    assert (outside / "ledger.jsonl").read_text() == "entry 1\nentry 2\n"
    assert (inside / "ledger.jsonl").read_text() == ""
