"""Issue 32, case 2's second wall: the worktree's `.git` pointer is read-only to the children
of that worktree (bound read-only in the mount namespace the launcher gives each child with
its PID namespace). A write is refused (EROFS), a rename over it and its removal too (EBUSY),
while every other file of the worktree stays writable; the mount stays in the child's
namespace (the host's mount table never has it). ai-sdlc's check after every child remains
the guarantee where no mount namespace can be had."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy, git_pointer
from ai_sdlc.spawn import start_session
from tests.support.attack_support import mount_namespace_here
from tests.support.git_support import git, git_env, make_repo

__all__ = ["git_env"]

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0

pytestmark = pytest.mark.usefixtures("git_env")

#: Tries to change the pointer three ways and another file once; prints what happened.
TRY = r"""
import json, os
out = {}
def attempt(name, action):
    try:
        action()
        out[name] = "done"
    except OSError as exc:
        out[name] = exc.errno
attempt("write", lambda: open(".git", "w").write("gitdir: /tmp/evil\n"))
open(".git-swap", "w").write("gitdir: /tmp/evil\n")
attempt("rename", lambda: os.replace(".git-swap", ".git"))
attempt("unlink", lambda: os.unlink(".git"))
attempt("other", lambda: open("notes.txt", "w").write("mine\n"))
print(json.dumps(out))
"""


def worktree(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path)
    tree = tmp_path / "tree"
    git(repo.root, "worktree", "add", "-q", "--detach", str(tree))
    return repo.root, tree


def test_the_pointer_is_the_worktrees_dot_git_file_only(tmp_path: Path) -> None:
    root, tree = worktree(tmp_path)
    (tree / "pkg" / "sub").mkdir(parents=True)
    assert git_pointer(tree) == (str(tree.resolve() / ".git"),)
    assert git_pointer(tree / "pkg" / "sub") == (str(tree.resolve() / ".git"),)
    assert git_pointer(root) == ()  # a main checkout's .git is a folder outside the sandbox
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_pointer(outside) == ()


@pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock")
def test_a_child_cannot_change_the_pointer_but_can_write_the_rest(tmp_path: Path) -> None:
    _root, tree = worktree(tmp_path)
    before = (tree / ".git").read_text()
    policy = SandboxPolicy(LandlockBackend(), (str(tree),), read_only=git_pointer(tree))
    if not mount_namespace_here():
        pytest.skip("no PID (and mount) namespace for a child here: the check after it stays")
    proc = start_session(
        [sys.executable, "-c", TRY], sandbox=policy, cwd=str(tree), stdout=subprocess.PIPE
    )
    out = json.loads(proc.communicate(timeout=60)[0])
    assert out == {"write": errno.EROFS, "rename": errno.EBUSY, "unlink": errno.EBUSY,
                   "other": "done"}, out  # fmt: skip
    assert (tree / ".git").read_text() == before
    assert (tree / "notes.txt").read_text() == "mine\n"
    # The bind was the child's alone: here the pointer is an ordinary file, writable.
    assert str(tree / ".git") not in Path("/proc/self/mountinfo").read_text()
    (tree / ".git").write_text(before)


@pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock")
def test_without_read_only_paths_the_pointer_is_a_file_like_any_other(tmp_path: Path) -> None:
    """The check can fail: the same child without the launcher's read-only paths changes it."""
    _root, tree = worktree(tmp_path)
    policy = SandboxPolicy(LandlockBackend(), (str(tree),))
    proc = start_session(
        [sys.executable, "-c", TRY], sandbox=policy, cwd=str(tree), stdout=subprocess.PIPE
    )
    out = json.loads(proc.communicate(timeout=60)[0])
    assert out["write"] == "done" and out["other"] == "done", out
