"""`ai-sdlc doctor` as a pre-flight, through the real CLI: git (a commit), the remote, the base
branch, `gh` and its login, each verify command's program, the sandbox; each item ✓/✗/⚠ with
its fix, exit 1 when a run needs what is missing, `--json` with every item."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, run_cli
from tests.support.fakes.gh_support import gh_calls
from tests.support.git_support import Repo, gh_log, git, git_env, make_repo  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

FIELDS = {"name", "ok", "level", "detail", "fix"}


def doctor(project: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli(project, "doctor", *args, env=env)


def items(result: CliResult) -> dict[str, dict[str, Any]]:
    checks = json.loads(result.stdout)["checks"]
    for item in checks:
        assert set(item) == FIELDS, item
    return {item["name"]: item for item in checks}


def configure(root: Path, key: str, value: str) -> None:
    result = run_cli(root, "config", key, value)
    assert result.returncode == 0, result.output


def passing_verify(repo: Repo) -> None:
    configure(repo.root, "verify.test", f"{sys.executable} -c pass")


def test_a_repository_without_a_commit_fails_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    assert run_cli(root, "init").returncode == 0
    result = doctor(root, "--json")
    assert result.returncode == 1, result.output
    found = items(result)["git"]
    assert found["ok"] is False and found["level"] == "error"
    assert "no commit" in found["detail"] and "commit -m" in found["fix"]
    text = doctor(root)
    assert text.returncode == 1
    assert "✗ git: the repository" in text.stdout and "fix: git -C" in text.stdout  # data
    assert "checklist" not in text.stderr


def test_no_remote_is_advisory_and_gh_is_not_asked(tmp_path: Path, gh_log: Path) -> None:  # noqa: F811
    repo = make_repo(tmp_path, remote=False)
    passing_verify(repo)
    result = doctor(repo.root, "--json")
    assert result.returncode == 0, result.output
    found = items(result)
    assert found["git"]["ok"] and found["base branch"]["ok"]
    remote = found["remote"]
    assert remote["ok"] is False and remote["level"] == "advisory"
    assert "git remote add origin" in remote["fix"]
    assert "gh" not in found and gh_calls(gh_log) == []
    assert "⚠ remote: no git remote 'origin'" in doctor(repo.root).output


def test_a_missing_base_branch_fails(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    passing_verify(repo)
    configure(repo.root, "git.base_branch", "trunk")
    result = doctor(repo.root, "--json")
    assert result.returncode == 1, result.output
    base = items(result)["base branch"]
    assert base["ok"] is False and "'trunk'" in base["detail"]
    assert "git.base_branch" in base["fix"]
    git(repo.root, "branch", "trunk")
    fixed = items(doctor(repo.root, "--json"))["base branch"]
    assert fixed["ok"] and fixed["detail"] == "trunk (git.base_branch; local)"


def test_a_remote_folder_that_is_gone_fails(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=True)
    passing_verify(repo)
    assert repo.origin is not None
    git(repo.root, "remote", "set-url", "origin", str(tmp_path / "moved.git"))
    result = doctor(repo.root, "--json", env={"PATH": os.path.dirname(_git())})
    assert result.returncode == 1, result.output
    remote = items(result)["remote"]
    assert remote["ok"] is False and "does not exist" in remote["detail"]


def test_gh_not_logged_in_fails_and_logged_in_passes(
    tmp_path: Path,
    gh_log: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo(tmp_path, remote=True)
    passing_verify(repo)
    monkeypatch.setenv("FAKE_GH_AUTH", "none")
    result = doctor(repo.root, "--json")
    assert result.returncode == 1, result.output
    gh = items(result)["gh"]
    assert gh["ok"] is False and gh["level"] == "error"
    assert "not logged into any GitHub hosts" in gh["detail"]
    assert gh["fix"].startswith("gh auth login")
    assert ["auth", "status"] in gh_calls(gh_log)
    assert "✗ gh: gh is not logged in" in doctor(repo.root).output
    monkeypatch.delenv("FAKE_GH_AUTH")
    result = doctor(repo.root, "--json")
    assert result.returncode == 0, result.output
    found = items(result)
    assert found["gh"]["ok"] and "Logged in to github.com" in found["gh"]["detail"]
    assert found["remote"]["ok"] and "a local repository" in found["remote"]["detail"]


def test_gh_missing_is_advisory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=True)
    passing_verify(repo)
    git(repo.root, "remote", "set-url", "origin", "https://user:s3cret@github.com/x/y.git")
    result = doctor(repo.root, "--json", env={"PATH": os.path.dirname(_git())})
    assert result.returncode == 0, result.output
    found = items(result)
    assert found["gh"]["ok"] is False and found["gh"]["level"] == "advisory"
    assert "https://cli.github.com" in found["gh"]["fix"]
    assert "not contacted" in found["remote"]["detail"] and "s3cret" not in result.output


def test_a_verify_program_that_does_not_exist_fails(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    configure(repo.root, "verify.test", "no-such-test-runner-xyz -q")
    configure(repo.root, "verify.build", ".venv/bin/no-such-build")
    result = doctor(repo.root, "--json")
    assert result.returncode == 1, result.output
    found = items(result)
    for key, program in (("verify.test", "no-such-test-runner-xyz"), ("verify.build", ".venv")):
        assert found[key]["ok"] is False and found[key]["level"] == "error"
        assert program in found[key]["detail"]
        assert f"ai-sdlc config {key}" in found[key]["fix"]
    text = doctor(repo.root).output
    assert "✗ verify.test: 'no-such-test-runner-xyz -q'" in text
    (repo.root / ".venv" / "bin").mkdir(parents=True)
    build = repo.root / ".venv" / "bin" / "no-such-build"
    build.write_text("#!/bin/sh\n")
    build.chmod(0o755)
    runner = repo.root / ".venv" / "bin" / "no-such-test-runner-xyz"
    runner.write_text("#!/bin/sh\n")
    runner.chmod(0o755)
    venv_fix = items(doctor(repo.root, "--json"))["verify.test"]["fix"]
    assert venv_fix == (
        "name the project's venv copy: ai-sdlc config verify.test "
        "'.venv/bin/no-such-test-runner-xyz -q'"
    )
    configure(repo.root, "verify.test", "python3 -c pass")
    result = doctor(repo.root, "--json")
    assert result.returncode == 0, result.output
    found = items(result)
    assert found["verify.build"]["ok"] and str(build) in found["verify.build"]["detail"]
    assert found["verify.test"]["ok"]


def test_no_verify_command_is_advisory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    result = doctor(repo.root, "--json")
    assert result.returncode == 0, result.output
    verify = items(result)["verify"]
    assert verify["ok"] is False and verify["level"] == "advisory"


def test_the_sandbox_in_force_or_why_not(tmp_path: Path) -> None:
    from ai_sdlc.sandbox.backend import LandlockBackend

    repo = make_repo(tmp_path, remote=False)
    passing_verify(repo)
    sandbox = items(doctor(repo.root, "--json"))["sandbox"]
    usable = LandlockBackend().available().usable
    assert sandbox["ok"] is usable
    if usable:
        assert sandbox["detail"].startswith("landlock (Landlock ABI")
        assert "✓ sandbox: landlock" in doctor(repo.root).output
    configure(repo.root, "sandbox.enabled", "false")
    result = doctor(repo.root, "--json")
    assert result.returncode == 0, result.output  # advisory: a plain run works without one
    off = items(result)["sandbox"]
    assert off["ok"] is False and off["level"] == "advisory"
    assert "turned off by sandbox.enabled: false" in off["detail"]
    assert "⚠ sandbox: not in force" in doctor(repo.root).output


@pytest.mark.usefixtures("gh_log")
def test_all_good_exits_0_in_a_real_process(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=True)
    passing_verify(repo)
    result = run_cli(repo.root, "doctor", "--json", subprocess=True)
    assert result.returncode == 0, result.output
    found = items(result)
    names = list(found)
    assert names[:6] == ["git", "remote", "base branch", "gh", "verify.test", "sandbox"]
    assert "provider" in names and "verification environment" in names
    for item in found.values():
        assert item["ok"] or item["level"] == "advisory", item
        assert item["fix"] == "" if item["ok"] else item["fix"]


def _git() -> str:
    from shutil import which

    found = which("git")
    assert found is not None
    return found
