"""What the digest of a worktree's environment sees, for the setups that are not the layered
venv (whose every file is read: tests/e2e/test_honest_verification.py's `venv-pth-py`): a full venv
(uv sync, pip) and node_modules, read cheaply. Real folders, real `python -m venv`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ai_sdlc.worktree_env.envdigest import changed, environment_digest


def full_venv(work: Path) -> Path:
    venv = work / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "pkg").mkdir()
    (site / "pkg" / "__init__.py").write_text("X = 1\n")
    (site / "_pkg.pth").write_text("/somewhere\n")
    return site


def test_a_full_venv_start_up_files_and_entries_are_seen_caches_are_not(tmp_path: Path) -> None:
    site = full_venv(tmp_path)
    made = environment_digest(tmp_path)
    rel = site.relative_to(tmp_path).as_posix()

    (site / "__pycache__").mkdir()  # what running the tests writes
    (site / "pkg" / "__pycache__").mkdir()
    assert changed(made, environment_digest(tmp_path)) == []

    (site / "_pkg.pth").write_text("import forge\n")  # same name, new content
    (site / "sitecustomize.py").write_text("import forge\n")
    (tmp_path / ".venv" / "bin" / "pytest").write_text("#!/bin/sh\nexit 0\n")
    assert changed(made, environment_digest(tmp_path)) == [
        ".venv/bin/pytest",
        f"{rel}/_pkg.pth",
        f"{rel}/sitecustomize.py",
    ]


def test_a_full_venv_package_file_edited_in_place_is_seen(tmp_path: Path) -> None:
    """Issue 33: the runner's installed code (`_pytest/…`) is held: an edit inside a package
    folder changes its record (`pkg/**`), even with the modification time set back (the
    change time cannot be); Python's bytecode caches are not read (verification never
    reads them)."""
    site = full_venv(tmp_path)
    rel = site.relative_to(tmp_path).as_posix()
    made = environment_digest(tmp_path)
    (site / "pkg" / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"cache")
    assert changed(made, environment_digest(tmp_path)) == []

    target = site / "pkg" / "__init__.py"
    before = target.stat()
    target.write_text("X = 2\n")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert changed(made, environment_digest(tmp_path)) == [f"{rel}/pkg/**"]


def test_a_hard_linked_package_file_linked_again_elsewhere_is_not_a_change(
    tmp_path: Path,
) -> None:
    """uv hard-links installed files from its cache: another worktree's install links the same
    file again (its change time moves); that is not this worktree's environment changing."""
    site = full_venv(tmp_path)
    cache = tmp_path / "cache-copy.py"
    os.link(site / "pkg" / "__init__.py", cache)
    made = environment_digest(tmp_path)
    os.link(cache, tmp_path / "another-worktree.py")
    assert changed(made, environment_digest(tmp_path)) == []


def test_a_digest_recorded_before_package_records_is_compared_as_it_was(tmp_path: Path) -> None:
    """A worktree set up by an earlier ai-sdlc has no `name/**` records: not a change."""
    full_venv(tmp_path)
    now = environment_digest(tmp_path)
    old = {k: v for k, v in now.items() if not k.endswith("/**")}
    assert old != now
    assert changed(old, now) == []


def test_node_modules_packages_and_bin_are_seen_caches_are_not(tmp_path: Path) -> None:
    modules = tmp_path / "node_modules"
    (modules / ".bin").mkdir(parents=True)
    (modules / "jest").mkdir()
    (modules / "@scope" / "tool").mkdir(parents=True)
    (modules / ".bin" / "jest").symlink_to("../jest/bin.js")
    made = environment_digest(tmp_path)

    (modules / ".cache" / "babel").mkdir(parents=True)  # what running the tests writes
    (modules / ".vite").mkdir()
    assert changed(made, environment_digest(tmp_path)) == []

    (modules / "evil").mkdir()
    (modules / "@scope" / "other").mkdir()
    (modules / ".bin" / "jest").unlink()
    (modules / ".bin" / "jest").symlink_to("../evil/bin.js")
    assert changed(made, environment_digest(tmp_path)) == [
        "node_modules/.bin/jest",
        "node_modules/@scope/other",
        "node_modules/@scope/other/**",
        "node_modules/evil",
        "node_modules/evil/**",
    ]
    made = environment_digest(tmp_path)
    (modules / "jest" / "index.js").write_text("module.exports = 1;\n")  # inside a package
    assert changed(made, environment_digest(tmp_path)) == ["node_modules/jest/**"]


def test_no_environment_no_digest(tmp_path: Path) -> None:
    assert environment_digest(tmp_path) == {}
