"""What the digest of a worktree's environment sees, for the setups that are not the layered
venv (whose every file is read: tests/e2e/test_honest_verification.py's `venv-pth-py`): a full venv
(uv sync, pip) and node_modules, read cheaply. Real folders, real `python -m venv`."""

from __future__ import annotations

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


def test_a_full_venv_package_file_is_not_read(tmp_path: Path) -> None:
    """The documented limit (docs/verification.md): only a layered venv is read whole."""
    site = full_venv(tmp_path)
    made = environment_digest(tmp_path)
    (site / "pkg" / "__init__.py").write_text("X = 2\n")
    assert changed(made, environment_digest(tmp_path)) == []


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
        "node_modules/evil",
    ]


def test_no_environment_no_digest(tmp_path: Path) -> None:
    assert environment_digest(tmp_path) == {}
