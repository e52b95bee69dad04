"""Issue 26 (siblings that collide after merging): a story branch that no longer merges cleanly
into its base because a sibling merged first shows as `conflicts` in `status`, `list` and
`show` (text and `--json`), and no longer once `ai-sdlc run` has resolved it. Through the real
CLI on a real repository with a bare `origin` (`tests/test_stacked_branches.Project`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.git.test_stacked_branches import ONE, TWO, Project, _files
from tests.support.fakes.gh_support import gh_calls
from tests.support.git_support import git, git_env

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]


def _line(output: str, sid: str) -> str:
    return next(ln for ln in output.splitlines() if ln.lstrip().startswith(sid))


def _two_siblings_one_merged(tmp_path: Path) -> tuple[Project, str, str]:
    p = Project(tmp_path)
    one, two = p.add("Say one"), p.add("Say two")
    p.rules(
        f"rules:\n  - phase: implement\n    story: {one}\n{_files('shared.txt', ONE)}"
        f"  - phase: implement\n    story: {two}\n{_files('shared.txt', TWO)}"
        f"  - phase: rework\n    story: {two}\n{_files('shared.txt', ONE + TWO)}"
    )
    assert p.cli("run", one).returncode == 0
    assert p.cli("run", two).returncode == 0
    p.merge_into_main(one)
    return p, one, two


def _logging_git(bin_dir: Path, log: Path) -> dict[str, str]:
    """A `git` first on PATH that records each call, then runs the real one."""
    real = next(
        Path(d) / "git"
        for d in os.environ["PATH"].split(os.pathsep)
        if (Path(d) / "git").is_file() and Path(d) != bin_dir
    )
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "git"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_sibling_merged_first_shows_conflicts_everywhere_until_run_resolves_them(
    tmp_path: Path,
) -> None:
    """`status`, `list`, `show` and `worktrees` (text and `--json`) name the conflict, at the
    cost of one `merge-tree` per unmerged story branch; `run` sends the story back as a
    counted rework that resolves it, and then nothing shows."""
    p, one, two = _two_siblings_one_merged(tmp_path)
    assert p.fm(two).get("total_recovery_attempts", 0) == 0

    board = p.cli("status")
    assert board.returncode == 0, board.output
    card = board.stdout.split(f"  {two}  ", 1)[1].split("\n  S-", 1)[0]
    assert "conflicts: shared.txt" in card and f"ai-sdlc run {two}" in card, board.stdout
    assert "conflicts" not in board.stdout.split(f"  {one}  ", 1)[1].split("\n  S-", 1)[0]
    stories = {s["id"]: s for s in json.loads(p.cli("status", "--json").stdout)["stories"]}
    assert stories[two]["conflicts"] == ["shared.txt"]
    assert stories[one]["conflicts"] == []

    listed = p.cli("list")
    assert listed.returncode == 0, listed.output
    assert "done+conflicts" in _line(listed.stdout, two), listed.stdout
    assert "conflicts" not in _line(listed.stdout, one)
    rows = {r["id"]: r for r in json.loads(p.cli("list", "--json").stdout)}
    assert rows[two]["conflicts"] == ["shared.txt"] and rows[one]["conflicts"] == []
    only = json.loads(p.cli("list", "--status", "conflicts", "--json").stdout)
    assert [r["id"] for r in only] == [two]

    shown = p.cli("show", two)
    assert "conflicts: shared.txt" in shown.stdout and "into main" in shown.stdout, shown.stdout
    detail = json.loads(p.cli("show", two, "--json").stdout)
    assert (detail["conflicts"], detail["conflicts_with"]) == (["shared.txt"], "main")

    trees = p.cli("worktrees")
    line = next(ln for ln in trees.output.splitlines() if ln.startswith(two))
    assert "conflicts" in line and "shared.txt" in line, trees.output
    data = {w["story"]: w for w in json.loads(p.cli("worktrees", "--json").stdout)["worktrees"]}
    assert data[two]["conflicts"] == ["shared.txt"]
    assert data[one]["conflicts"] == []

    # The check costs one merge-tree per unmerged story branch (a fresh process's git calls).
    log = tmp_path / "git.log"
    env = {**p.env, **_logging_git(tmp_path / "logbin", log)}
    counted = run_cli(p.root, "status", "--json", env=env, subprocess=True)
    stories = {s["id"]: s for s in json.loads(counted.stdout)["stories"]}
    assert (stories[one]["conflicts"], stories[two]["conflicts"]) == ([], ["shared.txt"])
    calls = log.read_text().splitlines()
    # one's branch is merged into main: only two's branch is asked about
    assert len([c for c in calls if "merge-tree" in c]) == 1, calls
    # the rest is fixed, whatever the number of stories: where the repository is, its base
    # branch (no `origin/HEAD` here: asked of git), and the story branches not merged into it
    assert len(calls) <= 5, calls

    # git cannot tell (the base branch does not exist): nothing shown, the board still works
    broken = run_cli(p.root, "list", "--json", env={**p.env, "AI_SDLC_GIT__BASE_BRANCH": "nope"})
    assert broken.returncode == 0, broken.output
    assert all(r["conflicts"] == [] for r in json.loads(broken.stdout))

    result = p.cli("run", two)

    assert result.returncode == 0, result.output
    fm = p.fm(two)
    assert fm["status"] == "done"
    assert fm["total_recovery_attempts"] == 1
    assert dict(fm["recovery_breakdown"])["rework"] == 1  # type: ignore[arg-type]
    branch = p.branch(two)
    assert git(p.root, "show", f"{branch}:shared.txt") == "one\ntwo\n"
    # the branch merges cleanly into main now, and was pushed without a force-push
    assert git(p.root, "merge-tree", "--write-tree", "main", branch).strip()
    assert git(p.origin, "rev-parse", f"refs/heads/{branch}").strip() == (
        git(p.root, "rev-parse", branch).strip()
    )
    # the agent was told what conflicted and what its side was
    events = (p.root / ".ai-sdlc" / "stories" / two / "events.jsonl").read_text()
    assert '"outcome": "conflicts"' in events or '"outcome":"conflicts"' in events
    assert len([c for c in p.creates() if c[c.index("--head") + 1] == branch]) == 1

    assert "conflicts" not in p.cli("status").stdout
    board_data = json.loads(p.cli("status", "--json").stdout)
    assert all(s["conflicts"] == [] for s in board_data["stories"])
    assert "conflicts" not in p.cli("list").stdout
    assert all(r["conflicts"] == [] for r in json.loads(p.cli("list", "--json").stdout))
    assert json.loads(p.cli("list", "--status", "conflicts", "--json").stdout) == []
    assert json.loads(p.cli("show", two, "--json").stdout)["conflicts"] == []
    data = {w["story"]: w for w in json.loads(p.cli("worktrees", "--json").stdout)["worktrees"]}
    assert data[two]["conflicts"] == []

    # Its PR merged (e.g. squash-merged), then `main` moved on: the branch conflicts again,
    # but a done story whose PR is no longer open is not reopened, and nothing is counted.
    (p.root / "shared.txt").write_text("main moved on\n")
    git(p.root, "add", "shared.txt")
    git(p.root, "commit", "-q", "-m", "main moves on")
    conflict = ["git", "merge-tree", "--write-tree", "main", branch]
    assert subprocess.run(conflict, cwd=p.root, capture_output=True, check=False).returncode == 1
    state = Path(str(p.gh_log) + ".state.json")
    gh_state = json.loads(state.read_text())
    for pr in gh_state["prs"]:
        if pr["head"] == branch:
            pr["state"] = "MERGED"
    state.write_text(json.dumps(gh_state))

    again = p.cli("run", two)

    assert again.returncode == 0, again.output
    fm = p.fm(two)
    assert fm["status"] == "done"
    assert fm["total_recovery_attempts"] == 1  # as before
    lists = [c for c in gh_calls(p.gh_log) if c[:2] == ["pr", "list"]]
    assert lists and lists[-1][lists[-1].index("--head") + 1] == branch


def test_without_git_or_story_branches_status_runs_no_git_and_a_git_failure_shows_nothing(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    log = tmp_path / "git.log"
    env = _logging_git(tmp_path / "logbin", log)
    assert run_cli(plain, "init", env=env).returncode == 0
    assert run_cli(plain, "add", "A story", env=env).returncode == 0
    log.unlink(missing_ok=True)
    board = run_cli(plain, "status", env=env)
    assert board.returncode == 0 and "A story" in board.stdout
    assert not log.exists(), log.read_text()

    # a story recorded with a branch, outside git: the board is shown, nothing conflicts
    path = next((plain / ".ai-sdlc" / "stories").rglob("*.md"))
    recorded = "status: in-progress\nbranch: ai-sdlc/S-0001-a"
    path.write_text(path.read_text().replace("status: backlog", recorded))
    listed = run_cli(plain, "list", "--json", env=env)
    assert listed.returncode == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert (row["status"], row["conflicts"]) == ("in-progress", [])
    detail = json.loads(run_cli(plain, "show", "S-0001", "--json", env=env).stdout)
    assert (detail["branch"], detail["conflicts"]) == ("ai-sdlc/S-0001-a", [])
