"""`fsutil.remove_tree`: a temp folder ai-sdlc made goes whatever a child left in it, read-only
folders included (a test suite's fixture folder in the verification's `TMPDIR`, a Go module
cache). Root ignores mode bits, so as root the folder is made and removed by a forked child
that has become `nobody`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ai_sdlc.fsutil import remove_tree

NOBODY = 65534


def leave_and_remove(parent: str) -> bool:
    """A temp folder as a child leaves it (a folder with no rights at all, below it one
    read-only with a file and a link to `/`), removed: whether it is gone."""
    top = tempfile.mkdtemp(prefix="ai-sdlc-tmp-", dir=parent)
    fixture = os.path.join(top, "pytest-of-me", "pytest-0", "fixture")
    os.makedirs(os.path.join(fixture, "read-only"))
    Path(fixture, "read-only", "data").write_text("kept by a test suite\n")
    os.symlink("/", os.path.join(fixture, "read-only", "root"))
    os.chmod(os.path.join(fixture, "read-only"), 0o500)
    os.chmod(fixture, 0)
    remove_tree(top)
    return not os.path.lexists(top)


def as_nobody(parent: Path) -> bool:
    os.chown(parent, NOBODY, NOBODY)
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = 0 if leave_and_remove(str(parent)) else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) in (0, 3), status
    return os.WEXITSTATUS(status) == 0


def test_read_only_folders_a_child_left_do_not_keep_its_temp_folder(tmp_path: Path) -> None:
    # As root, a folder `nobody` can reach (pytest's own are the owner's alone).
    parent = Path(tempfile.mkdtemp(dir="/tmp")) if os.geteuid() == 0 else tmp_path
    try:
        gone = as_nobody(parent) if os.geteuid() == 0 else leave_and_remove(str(parent))
        assert gone
        assert os.listdir(parent) == []
    finally:
        shutil.rmtree(parent, ignore_errors=True)
