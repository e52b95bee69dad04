"""Shared fixtures: temp projects and the real `ai-sdlc` entry point run as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


CliRunner = Callable[..., CliResult]


def run_cli(
    project: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> CliResult:
    """Run `python -m ai_sdlc --project <project> <args>` exactly as a user would."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        full_env.pop(key, None)
    full_env["NO_COLOR"] = "1"
    full_env["AI_SDLC_PROVIDER"] = "scripted"
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An initialised ai-sdlc project in a temp folder."""
    root = tmp_path / "proj"
    root.mkdir()
    result = run_cli(root, "init")
    assert result.returncode == 0, result.output
    return root


@pytest.fixture
def cli(project: Path) -> CliRunner:
    def call(*args: str, **kw: object) -> CliResult:
        return run_cli(project, *args, **kw)  # type: ignore[arg-type]

    return call
