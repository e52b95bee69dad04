"""Issue 22 on the integrated main: a hostile agent, verify command and worktree setup."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, run_cli
from tests.git_support import git, git_env, gh_log  # noqa: F401 (fixtures)
from tests.test_sandbox import outside_worktree
from tests.worktree_env_support import calc_project

pytestmark = pytest.mark.usefixtures("git_env")
SID = "S-0001"
HOSTILE = Path(__file__).parent / "fakes" / "hostile_integrated.py"


def hostile_project(tmp_path: Path) -> tuple[Path, Path]:
    repo = calc_project(tmp_path)
    root = repo.root
    reports = tmp_path / "reports"
    reports.mkdir()
    (tmp_path / "home" / ".cache").mkdir(parents=True)
    py = sys.executable
    agent = [py, str(HOSTILE), "agent", "{phase}", str(root), str(reports)]
    verify = shlex.join([".venv/bin/python", str(HOSTILE), "verify", "-", str(root), str(reports)])
    setup = ["ai-sdlc worktrees venv", shlex.join([py, str(HOSTILE), "setup", "-", str(root), str(reports)])]
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n"
        "limits:\n  implementation_retries: 10\n"
        f"worktree:\n  setup: {json.dumps(setup)}\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    git(root, "push", "-q", "origin", "main") if repo.origin else None
    assert run(root, "config", "--accept").returncode == 0
    assert run(root, "add", "Add multiply").returncode == 0
    return root, reports


def run(root: Path, *args: str, **env: str) -> CliResult:
    tmp = root.parent
    narrow = {
        "AI_SDLC_SANDBOX__WRITABLE": json.dumps([str(tmp / "reports")]),
        "AI_SDLC_STATE_HOME": str(tmp / "home" / ".local" / "state" / "ai-sdlc"),
        "HOME": str(tmp / "home"),
        "AI_SDLC_PROVIDER": "command",
    }
    return run_cli(root, *args, env={**narrow, **env})


def records(reports: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(reports.glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


@pytest.mark.parametrize("mode", ["dot-git-main", "cheat"])
def test_explore(tmp_path: Path, mode: str) -> None:
    root, reports = hostile_project(tmp_path)
    (reports / "mode").write_text(mode)
    if mode == "cheat":
        text = (root / ".ai-sdlc" / "config.yaml").read_text()
        import re
        text = re.sub(r"  test: .*", "  test: .venv/bin/python -m pytest -q -p no:cacheprovider", text)
        (root / ".ai-sdlc" / "config.yaml").write_text(text)
        git(root, "commit", "-qam", "real tests")
        assert run(root, "config", "--accept").returncode == 0
    before = outside_worktree(root)
    result = run(root, "run", SID)
    print(result.returncode, result.output[-6000:])
    seen = {}
    for r in records(reports):
        seen.setdefault((r["role"], r["attack"], r["outcome"]), 0)
        seen[(r["role"], r["attack"], r["outcome"])] += 1
    for k, v in seen.items():
        print(v, k)
    ran = tmp_path / "reports" / "pth-ran"
    print("PTH", ran.read_text() if ran.exists() else None)
    print(sorted(p.name for p in reports.iterdir()))
    print(sorted(p.name for p in root.iterdir()))
    after = outside_worktree(root)
    print({k for k in set(before) | set(after) if before.get(k) != after.get(k)})
    print(run(root, "show", SID, "--json").stdout[:600])
    assert 0
