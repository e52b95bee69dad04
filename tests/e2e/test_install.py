"""A user's install: the built wheel (not the source tree) in a fresh virtualenv, then a scripted
story in a new git project, driven from a subfolder, with `git status` showing only the story
files and the config. (A `--here` project in a subfolder of a repository, its story run in a
worktree of the whole repository: tests/git/test_init_in_repository.py, in-process.)

The venv is made `--without-pip` from the interpreter behind our own venv and filled by our pip
(`pip --python`): the wheel plus its real dependencies, from wheels pip downloaded once per
machine from the configured index (`wheel_support.wheelhouse`: no index asked after that).
Nothing of the source tree or of our venv is visible to it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ai_sdlc import DISTRIBUTION, __version__
from tests.support.wheel_support import built_wheel, wheelhouse

#: On the worker of test_uv_installed.py, which installs the same wheel.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("uv-install")]


def sh(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def user_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AI_SDLC_", "PYTHON"))}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VIRTUAL_ENV"):
        env.pop(key, None)
    env.update(
        HOME=str(home),
        NO_COLOR="1",
        AI_SDLC_PROVIDER="scripted",
        GIT_AUTHOR_NAME="u",
        GIT_AUTHOR_EMAIL="u@example.com",
        GIT_COMMITTER_NAME="u",
        GIT_COMMITTER_EMAIL="u@example.com",
    )
    return env


def test_wheel_installs_into_a_fresh_venv_and_runs_a_story(tmp_path: Path) -> None:
    wheel = built_wheel()  # `uv build --wheel` of this checkout, built once per process
    assert wheel.name == f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "ai_sdlc/py.typed" in names  # PEP 561: users' type checkers read our hints
    metadata = zipfile.ZipFile(wheel).read(
        f"{DISTRIBUTION.replace('-', '_')}-{__version__}.dist-info/METADATA"
    )
    assert f"Name: {DISTRIBUTION}\n".encode() in metadata

    venv = tmp_path / "fresh"
    base_python = getattr(sys, "_base_executable", sys.executable)
    sh(base_python, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    sh(
        sys.executable,
        "-m",
        "pip",
        "--python",
        venv / "bin" / "python",
        "install",
        "-q",
        # No .pyc for every module of every dependency (half of the install's CPU): the
        # commands below compile only what they import, as a first run does anyway.
        "--no-compile",
        # Its dependencies from wheels downloaded once per machine: no index asked.
        "--no-index",
        "--find-links",
        wheelhouse(),
        wheel,
        cwd=tmp_path,
    )
    ai_sdlc = venv / "bin" / "ai-sdlc"
    home = tmp_path / "home"
    home.mkdir()
    env = user_env(home)
    where = sh(
        venv / "bin" / "python",
        "-c",
        "import ai_sdlc; print(ai_sdlc.__file__)",
        cwd=tmp_path,
        env=env,
    )
    assert Path(where.strip()).is_relative_to(venv), where  # not the source tree
    assert sh(ai_sdlc, "--version", cwd=tmp_path, env=env) == f"ai-sdlc {__version__}\n"

    repo = home / "app"
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    sh("git", "init", "-q", "-b", "main", cwd=repo, env=env)
    sh("git", "commit", "-q", "--allow-empty", "-m", "start", cwd=repo, env=env)
    sh(ai_sdlc, "init", cwd=repo, env=env)
    # An empty project has nothing to test: the user says so (else the run refuses, exit 3).
    sh(ai_sdlc, "config", "verify.none", "true", cwd=repo, env=env)
    # From a subfolder: the project is found by walking up, as git finds its repository.
    assert sh(ai_sdlc, "add", "Export the board as CSV", cwd=deep, env=env) == "S-0001\n"
    sh(ai_sdlc, "run", "S-0001", cwd=deep, env=env)
    assert '"status": "done"' in sh(ai_sdlc, "show", "S-0001", "--json", cwd=deep, env=env)

    status = sh("git", "status", "--porcelain", "--untracked-files=all", cwd=repo, env=env)
    paths = sorted(line[3:] for line in status.splitlines())
    assert ".ai-sdlc/config.yaml" in paths and ".ai-sdlc/stories/S-0001/story.md" in paths
    unexpected = [
        p
        for p in paths
        if not p.startswith(".ai-sdlc/stories/")
        and p not in (".ai-sdlc/config.yaml", ".ai-sdlc/.gitignore")
    ]
    assert unexpected == [], status
