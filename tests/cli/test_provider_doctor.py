"""`ai-sdlc doctor`: usable providers and why not, the effective config, never a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ai_sdlc.cli.app  # noqa: F401  (the app registers every command module first)
from ai_sdlc.cli.doctor import build_report, redact_config
from tests.conftest import run_cli

KEY = "sk-ant-api03-SECRETSECRETSECRET"


#: Tests here drive the openai or anthropic SDK in this process (2.5 s of CPU to import
#: both, once per process): one xdist worker for all such tests pays it once.
pytestmark = pytest.mark.xdist_group("provider-sdks")


def test_doctor_reports_providers_without_printing_keys(project: Path) -> None:
    (project / ".ai-sdlc" / "config.yaml").write_text(
        "ai:\n  provider: anthropic\n"
        "  openai:\n    base_url: http://user:hunter2@localhost:8080/v1\n"
    )
    result = run_cli(
        project,
        "doctor",
        "--json",
        env={
            "AI_SDLC_PROVIDER": "",
            "ANTHROPIC_API_KEY": KEY,
            "OPENAI_API_KEY": "sk-proj-ALSOSECRET123456",
        },
    )
    assert result.returncode == 0, result.output
    assert KEY not in result.output and "ALSOSECRET" not in result.output
    assert "hunter2" not in result.output and "oops-a-key" not in result.output
    report = json.loads(result.stdout)
    assert report["selected"]["provider"] == "anthropic"
    assert report["selected"]["source"] == "config"
    assert report["selected"]["usable"] is True
    assert report["environment"]["ANTHROPIC_API_KEY"] == "set"
    rows = {row["name"]: row for row in report["providers"]}
    assert set(rows) == {"scripted", "dry-run", "openai", "anthropic", "claude", "command"}
    assert rows["openai"]["usable"] and rows["anthropic"]["usable"]
    assert not rows["command"]["usable"] and "ai.command" in rows["command"]["reason"]


def test_doctor_fails_when_the_selected_provider_is_unusable(project: Path) -> None:
    result = run_cli(project, "doctor", env={"AI_SDLC_PROVIDER": "anthropic"})
    assert result.returncode == 4
    assert "ANTHROPIC_API_KEY is not set" in result.stderr
    assert "Traceback" not in result.output


def test_report_auto_detects_and_explains(tmp_path: Path) -> None:
    report = build_report(tmp_path, environ={}, which=lambda _name: None)
    assert report["selected"]["provider"] == "none"  # never a stand-in
    assert report["selected"]["source"] == "auto"
    assert report["selected"]["usable"] is False
    assert "no AI provider is configured" in report["selected"]["reason"]
    assert "--provider scripted" in report["selected"]["fix"]
    found = build_report(
        tmp_path, environ={}, which=lambda n: "/bin/claude" if n == "claude" else None
    )
    assert found["selected"]["provider"] == "claude"
    assert found["selected"]["usable"] is True


def test_broken_config_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / ".ai-sdlc").mkdir()
    (tmp_path / ".ai-sdlc" / "config.yaml").write_text("ai: [unclosed\n")
    report = build_report(tmp_path, environ={}, which=lambda _name: None)
    assert report["problems"] and "config" in report["problems"][0]


def test_redact_config_masks_secret_looking_values() -> None:
    masked = redact_config(
        {
            "openai": {
                "api_key_env": "MY_KEY",
                "token": "abc",
                "base_url": "https://u:p@h/v1",
                "model": "sk-abcdefghijkl",
            }
        }
    )
    assert masked == {
        "openai": {
            "api_key_env": "MY_KEY",
            "token": "***",
            "base_url": "https://***@h/v1",
            "model": "***",
        }
    }
