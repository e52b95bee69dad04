"""Issue 32, case 8, through the real CLI: every folder the `command` provider hands its CLI
(`{prompt_file}`'s folder, `{output_dir}`: Aider's chat and input history, its LLM history,
analytics log and model settings) is inside the default sandbox's writable set. They were
made under the system temp folder, outside it, so the real Aider preset failed every phase
("Unable to write to chat history file … Permission denied"); the suite, which widened the
sandbox to the whole temp root, did not see it. Here the sandbox is exactly the default, the
CLI writes its files itself or from a detached grandchild, the verify command may write its
private temp folder and not the system's, and the throwaway HOME (fake keys, tool folders) is
unchanged afterwards."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ai_sdlc.providers.command_presets import PRESETS
from ai_sdlc.sandbox import landlock
from tests.conftest import run_cli
from tests.support.attack_support import (
    assert_counted_honestly,
    home_sums,
    make_home,
    plain_git_everywhere,
)
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

#: A CLI agent that writes its history files as Aider does, beside its prompt too (itself, then
#: again from a detached `setsid` double-forked grandchild that reports on a pipe), and fails
#: (exit 1, Aider's words) when either cannot.
AGENT = r"""
import os, sys
output_dir, prompt_file, phase = sys.argv[1:4]

def history():
    try:
        for name in ("chat-history.md", "input-history.txt", "llm-history.txt"):
            with open(os.path.join(output_dir, name), "a") as fh:
                fh.write(phase + "\n")
        with open(prompt_file + ".seen", "w") as fh:
            fh.write("seen\n")
    except OSError as exc:
        return f"Warning: Unable to write to chat history file {exc.filename}. {exc}"
    return ""

def from_a_grandchild():
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, ("done:" + history()).encode())
            os._exit(0)
        os._exit(0)
    os.close(write_end)
    os.wait()
    with os.fdopen(read_end) as pipe:
        said = pipe.read()
    return said[len("done:"):] if said.startswith("done:") else "the grandchild said nothing"

problem = history() or from_a_grandchild()
if problem:
    print(problem)
    sys.exit(1)
if phase in ("implement", "rework"):
    with open("work.txt", "a") as fh:
        fh.write(phase + "\n")
print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
"""
#: The verify command (itself, then from a detached grandchild reporting on a pipe): its private
#: temp folder is writable, the system temp folder is not (the suite used to widen the sandbox
#: to it); it fails if either is otherwise, for either.
VERIFY = r"""
import os, sys, tempfile

def tmp_folders():
    try:
        with tempfile.NamedTemporaryFile(dir=os.environ["TMPDIR"]) as fh:
            fh.write(b"x")
        with open(os.path.join("/tmp", f"verify-was-here-{os.getpid()}"), "w") as fh:
            fh.write("x")
        os.remove(fh.name)
    except OSError:
        return "as they should be"
    return "the system temp folder was writable"

def from_a_grandchild():
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, tmp_folders().encode())
            os._exit(0)
        os._exit(0)
    os.close(write_end)
    os.wait()
    with os.fdopen(read_end) as pipe:
        return pipe.read()

said = tmp_folders()
if said == "as they should be":
    said = from_a_grandchild()
if said == "as they should be":
    print("1 passed")
else:
    print(f"FAILED test_sandbox - {said or 'the grandchild said nothing'}")
    sys.exit(1)
"""


def test_the_folders_a_preset_hands_its_cli_are_writable_by_default(tmp_path: Path) -> None:
    """One run: the agent and the verify command each check by themselves and then from a
    detached grandchild (the two were one run each, on the same path)."""
    home, state = make_home(tmp_path / "home")
    root = make_repo(tmp_path, remote=False).root
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    verify = tmp_path / "verify.py"
    verify.write_text(VERIFY)
    template = [sys.executable, str(script), "{output_dir}", "{prompt_file}", "{phase}"]
    check = f"{sys.executable} {verify}"
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        f"    prompt_via: file\nverify:\n  test: {json.dumps(check)}\n"
        "git:\n  keep_worktrees: true\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    env = {
        "AI_SDLC_PROVIDER": "command",
        "HOME": str(home),
        "AI_SDLC_STATE_HOME": str(state),
    }
    assert run_cli(root, "add", "Add multiply", env=env).returncode == 0
    sums = home_sums(home, state)

    result = run_cli(root, "run", SID, env=env)

    assert result.returncode == 0, result.output
    assert "Unable to write" not in result.output
    fm = assert_counted_honestly(root, SID)
    assert (fm["status"], fm.get("total_recovery_attempts", 0)) == ("done", 0), fm
    # The folders were the private home's, and are gone with each call.
    assert list((state / "homes").glob("*/runs/*")) == []
    assert list(state.glob("homes/*/runs/*/*.seen")) == []
    # Nothing landed in the user's home, and the user's git is as it was.
    assert home_sums(home, state) == sums
    assert len(plain_git_everywhere(root)) == 2


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
