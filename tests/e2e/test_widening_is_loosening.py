"""Widening is loosening: the folders the project's `sandbox.writable` adds to the writable set
are named by `doctor` (text and JSON) and on the first line of every run, so a wider (looser)
sandbox is never silent. Run as real processes with the user's environment: no suite-wide
widening of the writable set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_environment, run_cli


def _user_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ai-sdlc` as a user's shell starts it: the suite's own widening left out."""
    env = cli_environment()
    env.pop("AI_SDLC_SANDBOX__WRITABLE", None)
    return subprocess.run(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert run_cli(root, "init").returncode == 0
    assert run_cli(root, "config", "verify.none", "true").returncode == 0
    assert run_cli(root, "add", "Widen me").returncode == 0
    return root


@pytest.mark.e2e
def test_the_project_config_widens_it_and_every_root_is_named(tmp_path: Path) -> None:
    root = _project(tmp_path)
    extra = tmp_path / "cache"
    extra.mkdir()
    assert run_cli(root, "config", "sandbox.writable", json.dumps([str(extra)])).returncode == 0
    doctor = _user_cli(root, "doctor")
    assert f"  widened by sandbox.writable: {extra}" in doctor.stdout, doctor.stdout
    report = json.loads(_user_cli(root, "doctor", "--json").stdout)
    assert report["sandbox"]["widened"] == [str(extra)]
    ran = _user_cli(root, "run", "S-0001")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    first = ran.stderr.splitlines()[0]
    assert first == f"warning: sandbox widened by sandbox.writable: {extra}", ran.stderr


@pytest.mark.e2e
def test_the_default_sandbox_names_no_widening(tmp_path: Path) -> None:
    root = _project(tmp_path)
    doctor = _user_cli(root, "doctor", "--json")
    assert json.loads(doctor.stdout)["sandbox"]["widened"] == []
    ran = _user_cli(root, "run", "S-0001")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "widened" not in ran.stderr
