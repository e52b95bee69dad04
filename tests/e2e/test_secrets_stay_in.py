"""Issue 32, case 6, through the real CLI: secrets stay in.

A hostile `command` agent and a hostile `verify.test` (tests/support/fakes/secret_thief.py),
each also from a `setsid` double-forked grandchild, run under a throwaway `HOME` holding fake keys
(`~/.ssh/id_ed25519`, `~/.aws/credentials`, `~/.config/gh/hosts.yml`) while ai-sdlc's own
environment holds `GH_TOKEN`, `AWS_SECRET_ACCESS_KEY` and the agent's `OPENAI_API_KEY`. Each
reads the keys, every `/proc/<pid>/environ` it can open, its own environment, and sends what it
found to a TCP listener the test runs on 127.0.0.1. Nothing secret is read, the agent gets its
provider's key and no other, verification gets none, and the listener receives nothing; the
home (tool folders too) is unchanged, the story is blocked by counted attempts, and no process
of the run is left.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import run_cli
from tests.support.attack_support import (
    Listener,
    assert_counted_honestly,
    home_sums,
    listening,
    make_home,
    processes_naming,
)
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)
from tests.support.paths import FAKES

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI < landlock.NET_ABI, reason="needs Landlock ABI 4 (network rules)"),
]
THIEF = FAKES / "secret_thief.py"
KEYS = {
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY----- fake-ssh-key-7f3a",
    ".aws/credentials": "[default]\naws_secret_access_key = fake-aws-file-key-91c2",
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: fake-gh-file-token-44d0",
}
ENV = {
    "GH_TOKEN": "fake-gh-env-token-5b1e",
    "AWS_SECRET_ACCESS_KEY": "fake-aws-env-key-0c9d",
    "OPENAI_API_KEY": "fake-openai-env-key-a7e4",
}


@pytest.fixture
def listener() -> Iterator[Listener]:
    with listening() as server:
        yield server


def thief_project(tmp_path: Path, port: int) -> tuple[Path, Path, Path]:
    """A git project whose command agent and verify.test are the thief; (root, reports, home)."""
    home, _ = make_home(tmp_path / "home")  # fake keys and tool folders
    for name, text in KEYS.items():
        (home / name).write_text(text)
    root = make_repo(tmp_path, remote=False).root
    reports = tmp_path / "reports"
    reports.mkdir()
    args = [str(reports), str(port), str(home)]
    agent = [sys.executable, str(THIEF), "agent", "{phase}", *args]
    verify = shlex.join([sys.executable, str(THIEF), "verify", "-", *args])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n"
        "limits:\n  implementation_retries: 0\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    return root, reports, home


def records(reports: Path, role: str) -> list[dict[str, Any]]:
    path = reports / f"{role}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_no_child_takes_a_key_file_an_environment_or_the_network(
    tmp_path: Path, listener: Listener
) -> None:
    root, reports, home = thief_project(tmp_path, listener.port)
    env = {
        "HOME": str(home),
        "AI_SDLC_PROVIDER": "command",
        **ENV,
    }
    state = home / ".local" / "state" / "ai-sdlc"
    env["AI_SDLC_STATE_HOME"] = str(state)
    assert run_cli(root, "add", "Add multiply", env=env).returncode == 0
    sums = home_sums(home, state)
    result = run_cli(root, "run", "S-0001", env=env, subprocess=True)
    assert result.returncode == 5, result.output  # blocked: the verify command fails
    assert assert_counted_honestly(root, "S-0001")["status"] == "blocked"  # by counted attempts
    assert home_sums(home, state) == sums
    assert processes_naming(tmp_path) == []
    agents, verifies = records(reports, "agent"), records(reports, "verify")
    roles = {r["role"] for r in agents + verifies}
    assert roles == {"agent", "agent-grandchild", "verify", "verify-grandchild"}, roles
    secrets = [*KEYS.values(), ENV["GH_TOKEN"], ENV["AWS_SECRET_ACCESS_KEY"]]
    for record in agents + verifies:
        assert all(v.startswith("denied") for v in record["files"].values()), record
        loot = "\n".join(record["loot"])
        assert not [s for s in secrets if s.split()[-1] in loot], record
        assert record["tcp"].startswith("denied"), record
    # The agent has its provider's key (and nothing else secret); verification has none.
    assert all(r["own_env"] == ["OPENAI_API_KEY"] for r in agents), agents
    assert all(r["own_env"] == [] for r in verifies), verifies
    assert all(ENV["OPENAI_API_KEY"] not in "\n".join(r["loot"]) for r in verifies), verifies
    assert listener.received == []
