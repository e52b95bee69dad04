"""Secrets from the environment never reach story files, event logs or error messages."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

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
