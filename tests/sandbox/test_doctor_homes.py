"""`doctor` names where the agent CLIs' private homes and the shared caches are, and says the
user's own tool folders are not writable (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import run_cli
from tests.support.git_support import git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock"),
]


def test_doctor_shows_the_private_homes_and_caches(tmp_path: Path) -> None:
    root = make_repo(tmp_path, remote=False).root
    state = tmp_path / "state"
    env = {"AI_SDLC_STATE_HOME": str(state)}
    data = json.loads(run_cli(root, "doctor", "--json", env=env).stdout)["sandbox"]
    assert data["private_homes"] == str(state / "homes")
    assert data["private_caches"] == str(state / "caches")
    assert data["writable"][:4] == [
        "<worktree>",
        "<private temp folder>",
        "<private home>",
        str(state / "caches"),
    ]
    home = str(Path.home())
    assert not any(w.startswith(home + "/.") for w in data["writable"])
    text = run_cli(root, "doctor", env=env).stdout
    assert f"agent CLIs' private homes: {state / 'homes'}/<workspace>" in text
    assert "~/.cache and ~/.npm are not writable" in text
