"""`verify.freshness` on a real git work tree: the files a change touched end up newer than
every git-ignored build output, however far in the future an agent set those; the story's
environment (`.venv/`, `node_modules/`) and deleted files are left alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ai_sdlc.verify.freshness import newer_than_outputs
from tests.support.git_support import git, git_env

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")

FUTURE = 4_000_000_000 * 10**9  # 2096
PAST = 1_000_000_000 * 10**9  # 2001


def test_touched_files_are_made_newer_than_every_build_output(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "src").mkdir(parents=True)
    (root / ".gitignore").write_text("target/\n.venv/\n")
    (root / "src" / "lib.rs").write_text("pub fn add() {}\n")
    (root / "src" / "gone.rs").write_text("\n")
    (root / "README").write_text("x\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "target" / "debug").mkdir(parents=True)
    dep_info = root / "target" / "debug" / "calc.d"
    dep_info.write_text("")
    os.utime(dep_info, ns=(FUTURE, FUTURE))  # the agent's, set far ahead
    (root / ".venv").mkdir()
    os.utime(root / ".venv", ns=(FUTURE * 2, FUTURE * 2))  # the environment: not an output
    lib = root / "src" / "lib.rs"
    lib.write_text("pub fn add() {}\npub fn mul() {}\n")
    os.utime(lib, ns=(PAST, PAST))  # a right build's old time on wrong code
    (root / "src" / "new.rs").write_text("\n")
    os.utime(root / "src" / "new.rs", ns=(PAST, PAST))
    (root / "src" / "gone.rs").unlink()

    touched = newer_than_outputs(root, base)

    assert sorted(touched) == ["src/lib.rs", "src/new.rs"]
    for rel in touched:
        assert os.stat(root / rel).st_mtime_ns > FUTURE
    assert os.stat(root / "README").st_mtime_ns < FUTURE  # untouched by the change: as it was
