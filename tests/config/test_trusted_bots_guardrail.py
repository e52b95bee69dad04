"""`pr.trusted_bots` is a guardrail (issue 34): a bot named there steers the agent, so one more
name is a looser trust rule. The environment and the user's file may drop a bot, never add one;
a bot added to the project's file behind the tool's back stops the run until `config --accept`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CliResult, run_cli


def cli(root: Path, *args: str, **env: str) -> CliResult:
    return run_cli(root, *args, env={"AI_SDLC_CONFIG_HOME": str(root.parent / "user"), **env})


def trusted(root: Path, **env: str) -> object:
    shown = cli(root, "config", "--json", **env)
    assert shown.returncode == 0, shown.output
    return json.loads(shown.stdout)["settings"]["pr.trusted_bots"]["value"]


def test_the_environment_may_drop_a_trusted_bot_but_not_add_one(project: Path) -> None:
    set_ = cli(project, "config", "pr.trusted_bots", '["coderabbitai", "gemini-code-assist"]')
    assert set_.returncode == 0, set_.output

    added = cli(project, "status", AI_SDLC_PR__TRUSTED_BOTS='["coderabbitai", "evilbot"]')
    assert added.returncode == 3, added.output
    assert "would loosen the guardrail pr.trusted_bots" in added.stderr
    # fewer voices, or the same one spelt as gh shows it: stricter or equal, so allowed
    assert trusted(project, AI_SDLC_PR__TRUSTED_BOTS='["coderabbitai[bot]"]') == [
        "coderabbitai[bot]"
    ]
    assert trusted(project, AI_SDLC_PR__TRUSTED_BOTS="[]") == []


def test_the_users_file_may_not_add_a_trusted_bot(project: Path) -> None:
    user = project.parent / "user"
    user.mkdir()
    (user / "config.yaml").write_text('pr:\n  trusted_bots: ["evilbot"]\n')
    refused = cli(project, "status")
    assert refused.returncode == 3, refused.output
    assert f"{user / 'config.yaml'}:2" in refused.stderr
    assert "pr.trusted_bots" in refused.stderr and "loosen" in refused.stderr


def test_a_bot_added_behind_the_tools_back_needs_config_accept(project: Path) -> None:
    assert cli(project, "add", "Story").returncode == 0
    set_ = cli(project, "config", "pr.trusted_bots", '["coderabbitai"]')  # recorded as accepted
    assert set_.returncode == 0, set_.output
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text().replace("[coderabbitai]", "[coderabbitai, evil]"))
    assert "evil" in config.read_text()

    refused = cli(project, "run", "S-0001", "--no-sandbox")
    assert refused.returncode == 3, refused.output
    assert 'pr.trusted_bots: ["coderabbitai"] -> ["coderabbitai", "evil"]' in " ".join(
        refused.stderr.split()
    )
    accepted = cli(project, "config", "--accept", "--json")
    assert accepted.returncode == 0, accepted.output
    assert json.loads(accepted.stdout)["accepted"] == {
        "pr.trusted_bots": [json.dumps(["coderabbitai"]), json.dumps(["coderabbitai", "evil"])]
    }
