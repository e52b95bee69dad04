"""`gitmeta.settle` on a real story worktree: whatever a child put in place of the `.git`
pointer (another file, a link, a folder, nothing) is replaced by the pointer `git worktree
add` wrote, and every `.git` below the top (folder, file, link, in a folder made unreadable)
is removed; what was found is said, and a worktree left alone is left untouched. Afterwards
the user's plain git runs nothing the child planted (each planted program writes a marker)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ai_sdlc.git import gitmeta, worktrees
from tests.support.git_support import Repo, git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(os.name == "nt", reason="the planted programs are POSIX shell scripts"),
]


class Tree:
    def __init__(self, tmp_path: Path) -> None:
        self.repo: Repo = make_repo(tmp_path)
        self.top = tmp_path / "proj" / ".ai-sdlc" / "worktrees" / "S-0001-x"
        git(self.repo.root, "worktree", "add", "-q", "-b", "ai-sdlc/S-0001-x", str(self.top))
        admin = worktrees.git_dir_of(self.repo.root / ".git", self.top)
        assert admin is not None
        self.admin = admin
        self.pointer = (self.top / ".git").read_bytes()
        self.markers = tmp_path / "markers"
        self.markers.mkdir()
        self.evil = tmp_path / "evil"
        git(tmp_path, "init", "-q", str(self.evil))
        git(self.evil, "config", "core.fsmonitor", self.payload("fsmonitor"))
        git(self.evil, "config", "diff.external", self.payload("diff-external"))

    def payload(self, name: str) -> str:
        script = self.markers.parent / f"payload-{name}"
        script.write_text(f'#!/bin/sh\necho ran >> "{self.markers / name}"\nexit 0\n')
        script.chmod(0o755)
        return str(script)

    def marks(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def users_git(self, folder: Path) -> None:
        (self.top / "README.md").write_text("# changed by the user\n")
        for args in (("status",), ("diff",), ("log", "-1")):
            subprocess.run(["git", *args], cwd=folder, capture_output=True, check=False)


def test_an_untouched_worktree_is_left_as_it_is(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    before = os.stat(tree.top / ".git")

    assert gitmeta.settle(tree.top, tree.admin) == []

    after = os.stat(tree.top / ".git")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("file", "rewritten (gitdir: "),
        ("link", "replaced by a symbolic link"),
        ("folder", "replaced by a folder"),
        ("nothing", "removed"),
    ],
)
def test_whatever_replaced_the_pointer_is_replaced_by_ours(
    tmp_path: Path, planted: str, said: str
) -> None:
    tree = Tree(tmp_path)
    dot_git = tree.top / ".git"
    dot_git.unlink()
    if planted == "file":
        dot_git.write_text(f"gitdir: {tree.evil / '.git'}\n")
    elif planted == "link":
        dot_git.symlink_to(tree.evil / ".git")
    elif planted == "folder":
        (tree.evil / ".git").rename(dot_git)  # a whole git folder of the child's, in place

    (found,) = gitmeta.settle(tree.top, tree.admin)

    assert said in found and found.startswith("the worktree's .git pointer was"), found
    assert dot_git.is_file() and not dot_git.is_symlink()
    assert dot_git.read_bytes() == tree.pointer
    assert gitmeta.settle(tree.top, tree.admin) == []
    tree.users_git(tree.top)
    assert tree.marks() == []


def test_every_nested_repository_is_removed_at_any_depth(tmp_path: Path) -> None:
    tree = Tree(tmp_path)
    top = tree.top
    git(top, "init", "-q", "sub")  # empty: `git add -A` fails on it
    git(top, "init", "-q", "a/b/nest")
    git(top / "a" / "b" / "nest", "config", "core.fsmonitor", tree.payload("nested"))
    (top / "deep" / "er").mkdir(parents=True)
    (top / "deep" / "er" / ".git").write_text(f"gitdir: {tree.evil / '.git'}\n")
    (top / "linked").mkdir()
    (top / "linked" / ".git").symlink_to(tree.evil / ".git")
    (top / "hidden" / "in").mkdir(parents=True)
    git(top / "hidden" / "in", "init", "-q")
    (top / "hidden").chmod(0)  # unreadable to its owner (not to root) until opened again
    (top / "outside").symlink_to(tree.evil, target_is_directory=True)  # into a repository
    (top / "usr").symlink_to("/usr", target_is_directory=True)  # into none: left alone
    git(top, "init", "-q", "--bare", "bare")  # git finds it going up from `bare/`
    git(top / "bare", "config", "core.pager", tree.payload("bare-pager"))
    for name in ("HEAD", "objects/keep", "refs/keep"):  # a fixture of the project's: kept
        (top / "fixture" / name).parent.mkdir(parents=True, exist_ok=True)
        (top / "fixture" / name).write_text("ref: refs/heads/main\n")
    git(top, "add", "fixture")
    git(top, "commit", "-q", "-m", "a bare repository's shape, as a test fixture")

    found = gitmeta.settle(top, tree.admin)

    assert found == [
        *(
            f"nested git repository {p} (removed)"
            for p in ("a/b/nest/.git", "deep/er/.git", "hidden/in/.git", "linked/.git", "sub/.git")
        ),
        "nested bare git repository bare (HEAD removed)",
        f"link outside into the git repository {tree.evil} (removed)",
    ]
    assert (top / "fixture" / "HEAD").is_file() and (top / "usr").is_symlink()
    assert (tree.evil / ".git" / "config").is_file()  # a link's target is not the worktree's
    assert (top / "a" / "b" / "nest").is_dir()  # the folders stay, as ordinary folders
    for folder in (top / "sub", top / "a" / "b" / "nest", top / "deep" / "er", top / "linked"):
        tree.users_git(folder)
    assert tree.marks() == []
    git(top, "add", "-A")  # an empty nested repository no longer stops it
    # What the planted programs do where they are left: they run.
    (top / "deep" / "er" / ".git").write_text(f"gitdir: {tree.evil / '.git'}\n")
    tree.users_git(top / "deep" / "er")
    assert "fsmonitor" in tree.marks()
