"""Issue 32, case 8, through the real CLI: every folder the `command` provider hands its CLI
(`{prompt_file}`'s folder, `{output_dir}`: Aider's chat and input history, its LLM history,
analytics log and model settings) is inside the default sandbox's writable set. They were
made under the system temp folder, outside it, so the real Aider preset failed every phase
("Unable to write to chat history file … Permission denied"); the suite, which widened the
sandbox to the whole temp root, did not see it. Here the sandbox is exactly the default."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ai_sdlc.providers.command_presets import PRESETS
from ai_sdlc.sandbox import landlock
from tests.conftest import run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock"),
]
SID = "S-0001"

#: A CLI agent that writes its history files as Aider does, beside its prompt too, and fails
#: (exit 1, Aider's words) when it cannot.
AGENT = r"""
import os, sys
output_dir, prompt_file, phase = sys.argv[1:4]
try:
    for name in ("chat-history.md", "input-history.txt", "llm-history.txt"):
        with open(os.path.join(output_dir, name), "a") as fh:
            fh.write(phase + "\n")
    with open(prompt_file + ".seen", "w") as fh:
        fh.write("seen\n")
except OSError as exc:
    print(f"Warning: Unable to write to chat history file {exc.filename}. {exc}")
    sys.exit(1)
if phase in ("implement", "rework"):
    with open("work.txt", "a") as fh:
        fh.write(phase + "\n")
print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
"""


def test_the_folders_a_preset_hands_its_cli_are_writable_by_default(tmp_path: Path) -> None:
    root = make_repo(tmp_path, remote=False).root
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    template = [sys.executable, str(script), "{output_dir}", "{prompt_file}", "{phase}"]
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        '    prompt_via: file\nverify:\n  test: "python -c pass"\n'
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    env = {
        "AI_SDLC_PROVIDER": "command",
        "AI_SDLC_STATE_HOME": str(tmp_path / "state"),
    }
    assert run_cli(root, "add", "Add multiply", env=env).returncode == 0

    result = run_cli(root, "run", SID, env=env)

    assert result.returncode == 0, result.output
    assert "Unable to write" not in result.output
    shown = json.loads(run_cli(root, "show", SID, "--json", env=env).stdout)
    assert shown["frontmatter"]["status"] == "done"
    assert shown["frontmatter"].get("total_recovery_attempts", 0) == 0
    # The folders were the private home's, and are gone with each call.
    assert list((tmp_path / "state" / "homes").glob("*/runs/*")) == []


def test_every_path_a_preset_hands_its_cli_is_one_of_those_folders() -> None:
    """The e2e test above writes into `{output_dir}` and beside `{prompt_file}`; every file or
    folder a preset's command lines name (Aider's five history and settings files) is in one
    of them or in the worktree, never a place of the user's (`~/.aider…`) or the system temp
    folder."""
    private = ("{output_dir}/", "{prompt_file}", "{workspace}")
    named: list[str] = []
    for name, preset in PRESETS.items():
        for template in (preset.template, preset.read_only_template, preset.confined_template):
            for token in template or ():
                value = token.partition("=")[2] if token.startswith("-") else token
                if "/" in value or value.startswith(("~", "{prompt_file}", "{output_dir}")):
                    assert value.startswith(private), (name, token)
                    named.append(value)
    assert "{output_dir}/chat-history.md" in named and "{prompt_file}" in named
