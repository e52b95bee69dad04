"""A second line of the sandbox on its own: a child cannot shorten a file outside its writable
roots by path (`truncate(2)` needs no open for writing: Landlock's TRUNCATE right). (Fail-closed
when the restriction cannot be applied: tests/sandbox/test_launcher_fail_closed.py.)"""

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
