"""Issue 32, case 1's general rule, through the real CLI: before a workspace's first child, a
writable root holding a hard link to a file outside the writable set is refused (Landlock checks
the path opened, not the inode: writing the link writes the other file). A link whose every name
lies inside the writable set (in the worktree, or in ai-sdlc's own caches) is no such way out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import CliResult, run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock"),
]
SID = "S-0001"


def setup(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A project whose story ran its refine step (so its worktree exists); (root, env,
    worktree)."""
    root = make_repo(tmp_path, remote=False).root
    (root / ".ai-sdlc" / "config.yaml").write_text('verify:\n  test: "python -c pass"\n')
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    env = {
        "AI_SDLC_STATE_HOME": str(tmp_path / "state"),
    }
    assert run_cli(root, "add", "Add multiply", env=env).returncode == 0
    first = run_cli(root, "run", SID, "--step", "refine", env=env)
    assert first.returncode == 0, first.output
    worktree = next(p for p in (root / ".ai-sdlc" / "worktrees").iterdir() if p.is_dir())
    return root, env, worktree


def run(root: Path, env: dict[str, str]) -> CliResult:
    return run_cli(root, "run", SID, "--step", "research", env=env)


def story(root: Path, env: dict[str, str]) -> dict[str, object]:
    shown = run_cli(root, "show", SID, "--json", env=env)
    return dict(json.loads(shown.stdout)["frontmatter"])


def test_a_hard_link_to_a_file_outside_is_refused_before_any_child(tmp_path: Path) -> None:
    root, env, worktree = setup(tmp_path)
    outside = tmp_path / "uv-cache" / "archive-v0" / "pkg.py"
    outside.parent.mkdir(parents=True)
    outside.write_text("X = 1\n")
    linked = worktree / ".venv-lib" / "pkg.py"
    linked.parent.mkdir()
    os.link(outside, linked)
    before = story(root, env)

    result = run(root, env)

    assert result.returncode == 3, result.output
    message = " ".join(result.stderr.split())
    assert f"{linked}: a hard link to a file outside the sandbox's writable set" in message
    assert f"inside the writable folder {os.path.realpath(worktree)}" in message
    assert "hint: replace it with a copy" in message
    assert "Traceback" not in result.output
    after = story(root, env)
    assert after["status"] == before["status"]
    assert after.get("total_recovery_attempts", 0) == before.get("total_recovery_attempts", 0)
    assert outside.read_text() == "X = 1\n"


def test_links_whose_names_are_all_writable_are_no_way_out(tmp_path: Path) -> None:
    """Two names in the worktree, or one in ai-sdlc's own shared caches (a package store that
    links into node_modules, say): the run goes on."""
    root, env, worktree = setup(tmp_path)
    (worktree / "a.txt").write_text("a\n")
    os.link(worktree / "a.txt", worktree / "b.txt")
    store = tmp_path / "state" / "caches" / "xdg" / "store" / "pkg.js"
    assert store.parent.parent.parent.is_dir()  # the caches made by the first run
    store.parent.mkdir()
    store.write_text("module.exports = 1\n")
    (worktree / "node_modules").mkdir()
    os.link(store, worktree / "node_modules" / "pkg.js")

    result = run(root, env)

    assert result.returncode == 0, result.output
    assert story(root, env)["status"] != "blocked"
