"""Secrets from the environment never reach story files, event logs or error messages."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.secrets import redact, scrubbed_env, secret_values
from tests.conftest import run_cli

TOKEN = "ghp_VerySecretToken1234567890abcd"
OTHER = "hunter2-not-a-shape-but-a-password"


def test_redact_masks_environment_secrets_and_token_shapes() -> None:
    env = {"MY_SERVICE_PASSWORD": OTHER, "HOME": "/home/dev", "SHORT_TOKEN": "abc"}
    text = f"login {OTHER} at /home/dev with sk-ant-abcdefgh12345 and {TOKEN} abc"
    out = redact(text, environ=env)
    assert OTHER not in out and "sk-ant-abcdefgh12345" not in out and TOKEN not in out
    assert "/home/dev" in out and out.endswith(" abc")  # not secrets: kept
    assert secret_values(env) == [OTHER]
    assert "MY_SERVICE_PASSWORD" not in scrubbed_env(env)


def test_the_process_environment_is_read_again_whenever_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`secret_values()` keeps its answer for an unchanged environment: a secret set, changed
    or removed afterwards is seen by the very next call."""
    monkeypatch.delenv("AI_SDLC_TEST_TOKEN", raising=False)
    before = secret_values()
    assert OTHER not in before and redact(f"x {OTHER}") == f"x {OTHER}"
    monkeypatch.setenv("AI_SDLC_TEST_TOKEN", OTHER)
    assert OTHER in secret_values() and OTHER not in redact(f"x {OTHER}")
    monkeypatch.setenv("AI_SDLC_TEST_TOKEN", OTHER + "-rotated")
    assert OTHER + "-rotated" in secret_values() and OTHER not in secret_values()
    secret_values().clear()  # a caller changing the list it got changes nothing
    assert OTHER + "-rotated" in secret_values()
    monkeypatch.delenv("AI_SDLC_TEST_TOKEN")
    assert secret_values() == before


def test_a_token_printed_by_verification_is_never_written(project: Path) -> None:
    printing = shlex.join(
        [
            sys.executable,
            "-c",
            "import os, sys; print('tok=' + os.environ['GITHUB_TOKEN'] + ' pw=' + "
            "os.environ['DB_PASSWORD']); sys.exit(1)",
        ]
    )
    assert run_cli(project, "config", "verify.test", printing).returncode == 0
    assert run_cli(project, "config", "limits.implementation_retries", "0").returncode == 0
    # Verification gets no credential unless named (sandbox.pass_env): these two are.
    passed = '["GITHUB_TOKEN", "DB_PASSWORD"]'
    assert run_cli(project, "config", "sandbox.pass_env", passed).returncode == 0
    run_cli(project, "add", "Leaky tests")
    env = {"GITHUB_TOKEN": TOKEN, "DB_PASSWORD": OTHER}
    result = run_cli(project, "run", "S-0001", env=env)
    assert result.returncode == 5, result.output
    assert "tok=***" in result.stderr
    assert TOKEN not in result.output and OTHER not in result.output
    written = "\n".join(
        p.read_text(errors="replace") for p in (project / ".ai-sdlc").rglob("*") if p.is_file()
    )
    assert "tok=***" in written  # the failure itself is recorded
    assert TOKEN not in written and OTHER not in written


def test_the_environment_copy_is_made_again_after_any_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ai_sdlc import environ

    first = environ.current()
    assert environ.current() is first and dict(first) == dict(os.environ)
    with pytest.raises(TypeError):
        first["X"] = "y"  # type: ignore[index]  # read-only
    monkeypatch.setenv("AI_SDLC_TEST_VALUE", "one")
    second = environ.current()
    assert second is not first and second["AI_SDLC_TEST_VALUE"] == "one"
    monkeypatch.setenv("AI_SDLC_TEST_VALUE", "two")
    assert environ.current()["AI_SDLC_TEST_VALUE"] == "two"
    monkeypatch.delenv("AI_SDLC_TEST_VALUE")
    assert "AI_SDLC_TEST_VALUE" not in environ.current()
