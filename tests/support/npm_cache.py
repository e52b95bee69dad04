"""The npm packages of a test's Node project: fetched once per machine, then installed offline.

Why: ai-sdlc gives every child one npm cache (`<state>/caches/npm`, `sandbox/homes.py`), and a
test process's state home starts empty, so the first `npm ci` of every test process fetched
its packages from the registry: `make test` needed the network on every run, where the README
promises none once the tools are cached. Here a project's `package-lock.json` and npm's cache
of its packages are made once per machine, beside the real agent CLIs
(`tests/e2e/realcli/install.py`'s cache folder; complete once its `.ready` exists, a file lock
serialising xdist workers). `seed` copies that cache into a state home, and the projects' setup
says `npm ci --offline`: it never asks the registry, and fails rather than fetch what is
missing. Skipped, with the reason, where npm is missing or the first fetch cannot reach the
registry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.realcli.install import once_per_machine

#: The worktree setup of the tests' Node projects: from the seeded cache only.
NPM_CI_OFFLINE = "npm ci --no-audit --no-fund --offline"


def warm(name: str, package: dict[str, object]) -> Path:
    """The folder holding `package`'s lock file and npm's cache of its packages (made by one
    `npm install` the first time, on any machine)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed")
    text = json.dumps(package, indent=2, sort_keys=True) + "\n"

    def fetch(folder: Path) -> None:
        work = folder / "project"
        work.mkdir(parents=True)
        (work / "package.json").write_text(text)
        cache = ["--cache", str(folder / "cache")]
        # `npm install` makes the lock; `npm ci` then fills the cache with what it asks for
        # (the packuments too, where npm leaves `resolved` out of the lock); `npm ci
        # --offline` proves it needs nothing more.
        for command in (["install"], ["ci"], ["ci", "--offline"]):
            shutil.rmtree(work / "node_modules", ignore_errors=True)
            _npm([*command, "--no-audit", "--no-fund", *cache], work)
        os.replace(work / "package-lock.json", folder / "package-lock.json")
        shutil.rmtree(work)
        shutil.rmtree(folder / "cache" / "_logs", ignore_errors=True)

    return once_per_machine(f"npm-{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}", fetch)


def _npm(arguments: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(
            ["npm", *arguments], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm {arguments[0]} timed out: the npm registry is not reachable from here")
    if done.returncode != 0:
        pytest.skip(f"npm {' '.join(arguments[:2])} failed (registry unreachable?): "
                    f"{done.stderr.strip()[-300:]}")  # fmt: skip


def lock(folder: Path) -> str:
    """The `package-lock.json` made with the warm cache."""
    return (folder / "package-lock.json").read_text()


def seed(folder: Path, state: Path) -> None:
    """npm's cache of `folder`'s packages copied into the ai-sdlc state home `state` (merged
    with what is there: npm's cache is content-addressed)."""
    shutil.copytree(folder / "cache", state / "caches" / "npm", dirs_exist_ok=True)
