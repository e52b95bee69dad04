"""A done story's worktree is parked and reused by the next story (issue 35, `git/pool`): the
next story starts from its exact base with nothing of the earlier story's files (tracked,
untracked or ignored), a switch interrupted mid-way recovers, and `git.keep_worktrees` still
keeps. Through the real CLI in a real repository with a bare `origin`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.git import attempts, worktrees
from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.git_support import Repo, git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]


def configure(root: Path, *, keep: bool, setup: str = "", records: Path | None = None) -> None:
    """The scripted agent's implementation writes a new file; done worktrees kept or not;
    `setup`: a `worktree.setup` command; `records`: a folder it may write (sandbox.writable)."""
    text = f"git:\n  keep_worktrees: {json.dumps(keep)}\nverify:\n  none: true\n"
    if setup:
        text += f"worktree:\n  setup: {json.dumps([setup])}\n"
    if records is not None:
        records.mkdir(exist_ok=True)
        text += f"sandbox:\n  writable: [{json.dumps(str(records))}]\n"
    (root / ".ai-sdlc" / "config.yaml").write_text(text)
    (root / ".ai-sdlc" / "scripted.yaml").write_text(
        "rules:\n  - phase: implement\n"
        '    files: {src/feature.py: "def feature() -> int:\\n    return 1\\n"}\n'
    )


def setup(tmp_path: Path) -> tuple[Repo, list[str], str]:
    """A project with two stories; (it, their ids, the base commit)."""
    project = make_repo(tmp_path)
    root = project.root
    (root / "lib.py").write_text("LIB = 1\n")
    configure(root, keep=False)
    ids = [run_cli(root, "add", f"Story {n}").stdout.strip() for n in (1, 2)]
    project.commit_all("a library and the backlog")
    return project, ids, git(root, "rev-parse", "main").strip()


def location(root: Path, sid: str) -> tuple[str, Path]:
    slug = StoryStore(root).get(sid).frontmatter.get("slug")
    name = worktrees.story_name(sid, slug)
    return worktrees.BRANCH_PREFIX + name, root / ".ai-sdlc" / "worktrees" / name


def run_done(root: Path, sid: str) -> str:
    result = run_cli(root, "run", sid)
    assert result.returncode == 0, result.output
    assert StoryStore(root).get(sid).frontmatter.get("status") == "done"
    return result.stderr


def pooled(root: Path) -> list[Path]:
    pool = root / ".ai-sdlc" / "worktrees" / ".pool"
    return sorted(pool.iterdir()) if pool.is_dir() else []


def files_of(top: Path) -> set[str]:
    """Every file under `top` but its `.git` pointer."""
    return {
        p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file() and p.name != ".git"
    }


def leave_leftovers(slot: Path) -> None:
    """What an earlier story can leave in its worktree beside its committed work."""
    (slot / "build").mkdir(exist_ok=True)
    (slot / "build" / "artifact.bin").write_text("ignored output\n")
    (slot / "debug.log").write_text("ignored log\n")
    (slot / "stray.txt").write_text("untracked\n")
    (slot / "lib.py").write_text("LIB = 2  # changed, never committed\n")


def assert_starts_from_base(root: Path, folder: Path, branch: str, base: str) -> None:
    """The story's worktree holds its base's files plus its own work, nothing else."""
    assert git(root, "rev-parse", f"{branch}~1").strip() == base
    assert git(root, "diff", "--name-only", base, branch).split() == ["src/feature.py"]
    assert files_of(folder) == {".gitignore", "README.md", "lib.py", "src/feature.py"}
    assert (folder / "lib.py").read_text() == "LIB = 1\n"
    assert git(folder, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""


def test_the_next_story_reuses_a_parked_worktree_from_its_exact_base(tmp_path: Path) -> None:
    project, (first, second), base = setup(tmp_path)
    root = project.root
    first_branch, first_folder = location(root, first)

    stderr = run_done(root, first)

    assert not first_folder.exists() and "parked for the next story" in stderr
    [slot] = pooled(root)
    assert (slot / "src" / "feature.py").is_file()  # the first story's committed work
    leave_leftovers(slot)
    untouched = (slot / "README.md").stat().st_ino
    configure(root, keep=True)  # to look at the second story's worktree once it is done

    run_done(root, second)

    branch, folder = location(root, second)
    assert pooled(root) == []
    # The same folder, switched: a file both commits share was not written again.
    assert (folder / "README.md").stat().st_ino == untouched
    assert_starts_from_base(root, folder, branch, base)
    assert git(root, "diff", "--name-only", base, first_branch).split() == ["src/feature.py"]


def test_a_switch_interrupted_before_its_move_recovers(tmp_path: Path) -> None:
    project, (first, second), base = setup(tmp_path)
    root = project.root
    run_done(root, first)
    [parked] = pooled(root)
    # Killed mid-switch: the second story's branch and checkpoint made, a pooled worktree
    # checked out on that branch, not yet cleaned nor moved to the story's folder.
    branch, folder = location(root, second)
    git(root, "update-ref", f"refs/heads/{branch}", base)
    git(root, "update-ref", attempts.checkpoint_ref(second), base)
    switching = parked.parent / "switching"
    git(root, "worktree", "add", "-q", "--detach", str(switching), first_commit(root, first))
    git(switching, "checkout", "-q", "--force", branch)
    leave_leftovers(switching)
    configure(root, keep=True)

    run_done(root, second)

    assert_starts_from_base(root, folder, branch, base)
    # One of the two pooled worktrees was taken; the interrupted one holds no branch now.
    assert len(pooled(root)) == 1
    listed = git(root, "worktree", "list", "--porcelain").split("\n\n")
    [left] = [block for block in listed if "/.pool/" in block]
    assert "\ndetached" in left and "\nbranch " not in left, left
    [story] = [block for block in listed if f"branch refs/heads/{branch}" in block]
    assert story.startswith(f"worktree {folder}\n"), story


def first_commit(root: Path, sid: str) -> str:
    """The tip of story `sid`'s branch (its committed work)."""
    return git(root, "rev-parse", location(root, sid)[0]).strip()


def test_keep_worktrees_keeps_each_done_worktree_and_parks_none(tmp_path: Path) -> None:
    project, (first, second), base = setup(tmp_path)
    root = project.root
    configure(root, keep=True)

    for sid in (first, second):
        run_done(root, sid)
        branch, folder = location(root, sid)
        assert_starts_from_base(root, folder, branch, base)
    assert pooled(root) == []
    listed = run_cli(root, "worktrees", "--json")
    assert listed.returncode == 0, listed.output
    assert {row["story"] for row in json.loads(listed.stdout)["worktrees"]} == {first, second}


def test_prune_removes_the_parked_worktrees(tmp_path: Path) -> None:
    project, (first, _), _ = setup(tmp_path)
    root = project.root
    run_done(root, first)
    [slot] = pooled(root)

    pruned = run_cli(root, "worktrees", "prune", "--json")

    assert pruned.returncode == 0, pruned.output
    assert json.loads(pruned.stdout)["removed"] == [slot.relative_to(root).as_posix()]
    assert pooled(root) == [] and not slot.exists()
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1


#: A `worktree.setup` that counts its runs and makes an environment the `.gitignore` ignores.
MAKE_ENV = (
    "import os, sys; open(sys.argv[1], 'a').write('x'); os.makedirs('build', exist_ok=True); "
    "open('build/env.txt', 'w').write('made by setup')"
)


def test_a_reused_worktree_gets_its_environment_made_again(tmp_path: Path) -> None:
    project, (first, second), base = setup(tmp_path)
    root = project.root
    records = tmp_path / "records"  # the setup's counter, beside the project
    counter = records / "setups.log"
    command = shlex.join([sys.executable, "-c", MAKE_ENV, str(counter)])
    configure(root, keep=False, setup=command, records=records)
    run_done(root, first)
    [slot] = pooled(root)
    assert (slot / "build" / "env.txt").read_text() == "made by setup"
    (slot / "build" / "env.txt").write_text("the first story's environment")
    untouched = (slot / "README.md").stat().st_ino
    configure(root, keep=True, setup=command, records=records)

    run_done(root, second)

    branch, folder = location(root, second)
    assert (folder / "README.md").stat().st_ino == untouched  # reused
    assert counter.read_text() == "xx"  # made again in the reused worktree
    assert (folder / "build" / "env.txt").read_text() == "made by setup"
    assert git(root, "diff", "--name-only", base, branch).split() == ["src/feature.py"]
