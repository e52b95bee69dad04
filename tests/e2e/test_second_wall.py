"""Issue 32's second wall, cases 1-4, 6 and 7 at once, through the real CLI in a real process:
a hostile `command` agent or a hostile `verify.test` (tests/support/fakes/second_wall.py),
itself and then from a detached (`setsid` double-forked) grandchild in the same run (the
records say who tried what), under a throwaway HOME holding
fake keys and real-looking tool folders, with secrets in ai-sdlc's environment and a TCP
listener on 127.0.0.1.

Every attack fails: ai-sdlc's code and its uv-cached copy stay unwritten (1), the git metadata
the child took over is counted and put back (2), the user's tool folders, caches and logins
are unwritten (3), the launcher and ai-sdlc cannot be signalled and nothing the child leaves
behind outlives the run (4), no key, environment or byte goes out (6), and no control
sequence is stored (7). Afterwards the user's plain `git status`/`git diff`/`git log` in the
main checkout and in every worktree run nothing planted, the home folder outside ai-sdlc's
state is byte for byte what it was, the count is never lowered and the story reaches done.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import ai_sdlc
from ai_sdlc.sandbox import landlock
from tests.conftest import CliResult, run_cli
from tests.support.attack_support import (
    SECRET_ENV,
    STOLEN_MARKS,
    assert_counted_honestly,
    control_characters,
    failed_phases,
    home_sums,
    kill_all,
    listening,
    make_home,
    plain_git_everywhere,
    processes_naming,
    worktrees,
)
from tests.support.git_support import git, git_env, make_repo
from tests.support.paths import FAKES

__all__ = ["git_env"]

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI < 6, reason="needs Landlock ABI 6 (network rules, signal scoping)"),
]
SID = "S-0001"
SCRIPT = FAKES / "second_wall.py"
LIMIT = 6
LANDLOCK_PY = Path(ai_sdlc.__file__).parent / "sandbox" / "landlock.py"


class Attacked:
    """A git project whose agent and verify.test are the hostile script, and the run of it."""

    def __init__(self, tmp_path: Path, attacker: str, where: str, port: int) -> None:
        self.home, self.home_state = make_home(tmp_path / "home")
        self.root = make_repo(tmp_path, remote=False).root
        self.state = tmp_path / "state"
        self.state.mkdir()
        for name, value in (
            ("attacker", attacker),
            ("where", where),
            ("port", str(port)),
            ("site", str(LANDLOCK_PY)),
        ):
            (self.state / name).write_text(value)
        agent = [sys.executable, str(SCRIPT), "agent", "{phase}", str(self.state)]
        verify = shlex.join([sys.executable, str(SCRIPT), "verify", str(self.state)])
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
            f"verify:\n  test: {json.dumps(verify)}\n"
            f"limits:\n  global_recovery: {LIMIT}\n  implementation_retries: {LIMIT}\n"
            "git:\n  keep_worktrees: true\n"
            f"sandbox:\n  writable: [{json.dumps(str(self.state))}]\n"
        )
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "config")
        self.env = {
            "HOME": str(self.home),
            "AI_SDLC_STATE_HOME": str(self.home_state),
            "AI_SDLC_PROVIDER": "command",
            **SECRET_ENV,
            **{f"XDG_{n}_HOME": "" for n in ("CONFIG", "CACHE", "DATA", "STATE")},
        }
        assert self.cli("config", "--accept").returncode == 0
        assert self.cli("add", "Add multiply").returncode == 0

    def cli(self, *args: str, process: bool = False) -> CliResult:
        return run_cli(self.root, *args, env=self.env, timeout=600, subprocess=process)

    def records(self, case: int) -> list[dict[str, Any]]:
        path = self.state / "records.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return [r for r in lines if r["case"] == case]

    def markers(self) -> list[str]:
        folder = self.state / "markers"
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("attacker", ["agent", "verify"])
def test_every_attack_of_a_hostile_child_fails_and_leaves_nothing_that_runs_later(
    tmp_path: Path, attacker: str
) -> None:
    """The child attacks, then a detached grandchild of it attacks again (`both`): one run
    proves every case for each of them, each judged on its own records."""
    with listening() as listener:
        project = Attacked(tmp_path, attacker, "both", listener.port)
        before = home_sums(project.home, project.home_state)
        try:
            result = project.cli("run", SID, process=True)
            left = processes_naming(tmp_path)
        finally:
            kill_all(processes_naming(tmp_path))
    assert result.returncode == 0, result.output
    assert "Traceback" not in result.output
    everyone = (attacker, f"{attacker}-grandchild")
    tried = [r for case in (1, 3, 4, 6) for r in project.records(case)]
    assert {r["who"] for r in tried} == set(everyone), tried
    for who in everyone:
        assert_every_attack_failed(project, who, attacker)
    assert left == [], left
    assert listener.received == []
    # 2: the takeover happened (in the child and in its grandchild), was counted, is undone.
    case2 = project.records(2)
    for who in everyone:
        pointer = [r for r in case2 if r["who"] == who and r["attack"].startswith("pointer")]
        assert [r["outcome"] for r in pointer] == ["done"] * 2, (who, case2)
    lowered = [r for r in case2 if r["attack"].startswith("lower the count")]
    assert len(lowered) == 8 and all(r["outcome"].startswith("denied") for r in lowered), lowered
    counted = failed_phases(project.root, SID)
    assert any(f["outcome"] == "git_metadata_changed" for f in counted), counted
    trees = worktrees(project.root)
    assert trees, "the story's worktree is kept (git.keep_worktrees)"
    for tree in trees:
        admin = (project.root / ".git" / "worktrees" / tree.name).resolve()
        assert (tree / ".git").read_text() == f"gitdir: {admin}\n"
        assert not os.path.lexists(tree / "sub" / ".git")
        assert not os.path.lexists(tree / "nest" / ".git")
    # 7: no terminal control sequence in what is stored.
    stored = project.root / ".ai-sdlc" / "stories" / SID
    for path in (p for p in stored.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        assert control_characters(text) == [], (path.name, control_characters(text))
        assert "\\u001b" not in text and "\\u009b" not in text and "52;c;" not in text, path.name
    log = git(project.root, "log", "--all", "-p")
    assert control_characters(log) == [] and "52;c;" not in log

    # Afterwards: the user's own git runs nothing planted, the home is what it was, the count
    # is honest and the story is done.
    plain_git_everywhere(project.root)
    assert project.markers() == []
    assert home_sums(project.home, project.home_state) == before
    fm = assert_counted_honestly(project.root, SID)
    assert fm["status"] == "done", fm
    assert fm["total_recovery_attempts"] == len(counted) >= 1, (fm, counted)


def assert_every_attack_failed(project: Attacked, who: str, attacker: str) -> None:
    """Cases 1, 3, 4 and 6 as `who` (the child or its grandchild) tried them: all denied."""

    def mine(case: int) -> list[dict[str, Any]]:
        return [r for r in project.records(case) if r["who"] == who]

    # 1: ai-sdlc's installed code and its uv-cached copy are not writable.
    case1 = mine(1)
    assert len({r["attack"] for r in case1}) == 2, case1
    assert all(r["outcome"].startswith("denied") for r in case1), case1
    # 3: the user's tool folders, caches, logins and shell start-up are not writable.
    case3 = mine(3)
    tools = {r["attack"] for r in case3 if not r["attack"].startswith("state: ")}
    assert len(tools) == 12, tools
    state = {r["attack"] for r in case3 if r["attack"].startswith("state: ")}
    assert {"state: another workspace's home", "state: a new file"} < state, state
    assert len(state) > 3, state  # files of ai-sdlc's own state were tried too
    assert [r for r in case3 if not r["outcome"].startswith("denied")] == []
    # 4: no signal reaches the launcher or ai-sdlc; what it leaves behind is checked by the
    # caller (no process of the run outlives it).
    signals = [r for r in mine(4) if r["attack"] != "left behind"]
    assert signals and all(r["outcome"] != "done" for r in signals), signals
    assert any(r["attack"] == "left behind" for r in mine(4))
    # 6: no key file, no other process's environment, no secret of ai-sdlc's, no TCP.
    case6 = mine(6)
    reads = [r for r in case6 if r["attack"].startswith("read ")]
    assert reads and all(r["outcome"].startswith("denied") for r in reads), reads
    loot = "\n".join(x for r in case6 if r["attack"] == "loot" for x in r["outcome"])
    assert [m for m in STOLEN_MARKS if m in loot] == []
    own = [r["outcome"] for r in case6 if r["attack"] == "secrets in its environment"]
    assert own and all(o == (["OPENAI_API_KEY"] if attacker == "agent" else []) for o in own)
    tcp = [r for r in case6 if r["attack"] == "tcp to 127.0.0.1"]
    assert tcp and all(r["outcome"].startswith("denied") for r in tcp), tcp
