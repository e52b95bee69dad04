"""`show` names only what exists (issue 36 item 10): a done story's worktree was removed with
it, so `show` prints no `worktree:` line (and `--json` gives null), while a kept one is
shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.git_support import git_env, make_repo
from tests.support.runs_support import write_config

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")


@pytest.mark.parametrize("keep", [False, True])
def test_show_prints_the_worktree_only_while_it_exists(tmp_path: Path, keep: bool) -> None:
    repo = make_repo(tmp_path, remote=False)
    sid = repo.story("Add a greeting")
    write_config(
        repo.root,
        f"verify:\n  test: {sys.executable} -c pass\ngit:\n  keep_worktrees: {json.dumps(keep)}\n",
    )
    done = run_cli(repo.root, "run", sid)
    assert done.returncode == 0, done.output
    recorded = ".ai-sdlc/worktrees/S-0001-add-a-greeting"
    assert (repo.root / recorded).is_dir() is keep
    shown = run_cli(repo.root, "show", sid)
    assert shown.returncode == 0, shown.output
    assert ("worktree:" in shown.stdout) is keep, shown.stdout
    assert "branch:" in shown.stdout  # the branch stays: its work is there
    detail = json.loads(run_cli(repo.root, "show", sid, "--json").stdout)
    assert detail["worktree"] == (recorded if keep else None)
    assert detail["frontmatter"]["worktree_path"] == recorded  # the record itself is kept
