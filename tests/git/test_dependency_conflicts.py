"""A story whose unmerged dependencies' branches conflict with each other is a state of its
own (issue 36 item 1): the board, `list`, `show`, `worktrees` and `run --auto --dry-run` say
so with the way out (merge them first); `run` refuses it before touching anything (exit 1,
said once, no branch, nothing counted); `run --auto` skips it instead of crashing, retrying
and escalating it; and once the dependencies are merged, the story runs to done."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.git.test_stacked_branches import ONE, TWO, Project, _files
from tests.support.git_support import git, git_env

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]


def _line(text: str, sid: str) -> str:
    return next(line for line in text.splitlines() if sid in line)


def test_dependencies_that_conflict_are_a_state_named_everywhere_with_its_way_out(
    tmp_path: Path,
) -> None:
    """S-0003 depends on both from the start. S-0004 got its branch (stacked on its one
    dependency) before a second dependency, which conflicts with the first, was added: it is
    held the same way, no merge attempted, nothing counted."""
    p = Project(tmp_path)
    one = p.add("Write one")
    two = p.add("Write two")
    three = p.add("Build on both", one, two)
    four = p.add("Build on it", one)
    p.rules(
        f"rules:\n  - phase: implement\n    story: {one}\n{_files('shared.txt', ONE)}"
        f"  - phase: implement\n    story: {two}\n{_files('shared.txt', TWO)}"
    )
    assert p.cli("run", one).returncode == 0
    assert p.cli("run", four, "--step", "refine").returncode == 0
    branch = p.branch(four)
    tip = git(p.root, "rev-parse", branch)
    assert p.cli("run", two).returncode == 0
    assert p.cli("set", four, f"dependencies={one},{two}").returncode == 0
    held = p.fm(four)
    note = f"dependencies {one} and {two} conflict in shared.txt: merge them first"

    board = p.cli("status")
    assert note in board.stdout, board.stdout
    listed = p.cli("list")
    assert "+conflicts" in _line(listed.stdout, three), listed.stdout
    rows = {r["id"]: r for r in json.loads(p.cli("list", "--json").stdout)}
    assert rows[three]["conflicts_between"] == [one, two]
    assert rows[three]["conflicts"] == ["shared.txt"]
    assert rows[four]["conflicts_between"] == [one, two]  # the branch made before, too
    assert board.stdout.count(note) == 2, board.stdout
    shown = p.cli("show", three)
    assert f"its unmerged dependencies {one} and {two} conflict" in shown.stdout, shown.stdout
    trees = p.cli("worktrees")
    assert f"{three} has no worktree: {note}" in trees.stderr, trees.output
    plan = p.cli("run", "--auto", "--dry-run")
    assert plan.returncode == 0, plan.output
    assert f"{three} cannot start: {note}" in plan.stderr, plan.output

    refused = p.cli("run", three)
    assert refused.returncode == 1, refused.output
    assert refused.output.count("cannot start") == 1, refused.output
    assert f"{three} cannot start: its unmerged dependencies {one} and {two} conflict" in (
        refused.stderr
    )
    assert f"git merge {p.branch(one)} && git merge {p.branch(two)}" in refused.stderr
    assert "crashed" not in refused.output and "rolled back" not in refused.output
    fm = p.fm(three)
    assert fm["status"] == "backlog" and "branch" not in fm, fm
    assert fm.get("total_recovery_attempts", 0) == 0, fm
    assert f"ai-sdlc/{three}" not in git(p.root, "branch", "--list", "ai-sdlc/*")

    # The story with a branch made before: refused the same way, its branch untouched.
    refused = p.cli("run", four)
    assert refused.returncode == 1, refused.output
    assert refused.output.count("cannot start") == 1, refused.output
    assert "crashed" not in refused.output and "rolled back" not in refused.output
    assert git(p.root, "rev-parse", branch) == tip  # nothing merged
    after = p.fm(four)
    assert after.get("total_recovery_attempts", 0) == held.get("total_recovery_attempts", 0)
    assert after["status"] == held["status"]

    for jobs in ("1", "2"):  # one at a time, and the parallel scheduler's workers
        auto = p.cli("run", "--auto", "--jobs", jobs)
        assert auto.returncode not in (5, 6), auto.output
        assert "escalated" not in auto.output and "crashed" not in auto.output, auto.output
        assert f"[{three}] skipped: {three} cannot start" in auto.stderr, auto.output
        assert "merge them into main first" in auto.output, auto.output
        assert p.fm(three).get("total_recovery_attempts", 0) == 0
        assert git(p.root, "rev-parse", branch) == tip
        assert p.fm(four).get("total_recovery_attempts", 0) == held.get(
            "total_recovery_attempts", 0
        )

    # The way out, as named: merge the dependencies (resolving their conflict once), run again.
    p.merge_into_main(one)
    merged = subprocess.run(
        ["git", "merge", "--no-ff", "-m", f"Merge {two}", p.branch(two)],
        cwd=p.root,
        capture_output=True,
        check=False,
    )
    assert merged.returncode != 0  # the conflict, resolved by a person
    (p.root / "shared.txt").write_text("one\ntwo\n")
    git(p.root, "add", "shared.txt")
    git(p.root, "commit", "-q", "--no-edit")
    assert note not in p.cli("status").stdout
    done = p.cli("run", three)
    assert done.returncode == 0, done.output
    assert p.fm(three)["status"] == "done"
