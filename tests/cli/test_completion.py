"""Shell completion of story ids, config keys and `log --kind` values, through typer's
completion protocol (what `ai-sdlc --install-completion` installs): bash's
`_AI_SDLC_COMPLETE=complete_bash` with COMP_WORDS/COMP_CWORD (also through the installed script
in a real bash), zsh's `complete_zsh` with `_TYPER_COMPLETE_ARGS`. A broken story file must not
break completion, and outside a project it completes no story id.

Each shell's protocol is spoken to a real `ai-sdlc` process at least once (`process=True`); the
rows that differ only in the words completed call the same entry point in this process (the
same `main()`, environment and working folder), which costs no interpreter start."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_environment, run_cli

pytestmark = pytest.mark.e2e

AI_SDLC = str(Path(sys.executable).parent / "ai-sdlc")
TITLES = ("Add a greeting", "Fix the: colon title", "Third one")


@pytest.fixture(scope="module")
def stories(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with three stories, shared by the tests that only complete in it."""
    root = tmp_path_factory.mktemp("completion") / "proj"
    root.mkdir()
    assert run_cli(root, "init").returncode == 0
    for title in TITLES:
        assert run_cli(root, "add", title).returncode == 0
    return root


def complete(cwd: Path, env: dict[str, str], process: bool) -> str:
    """What `ai-sdlc` prints for the completion request in `env`, typed in `cwd`."""
    full = cli_environment({"HOME": str(cwd), **env})
    if process:
        done = subprocess.run(
            [AI_SDLC], cwd=cwd, env=full, capture_output=True, text=True, timeout=60, check=False
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        with contextlib.chdir(cwd):
            # The request is in the environment; click reads no argument when completing.
            result = run_cli(cwd, env=full)
        code, out, err = result.returncode, result.stdout, result.stderr
    assert code == 0, err
    assert "Traceback" not in err
    return out


def bash(cwd: Path, line: str, *, process: bool = False) -> list[str]:
    """The candidates for the last word of `line` (`COMP_WORDS`, cursor on its last word)."""
    words = line.split(" ")
    env = {"_AI_SDLC_COMPLETE": "complete_bash", "COMP_WORDS": line}
    env["COMP_CWORD"] = str(len(words) - 1)
    return [word for word in complete(cwd, env, process).splitlines() if word]


def zsh(cwd: Path, line: str, *, process: bool = False) -> str:
    """What the zsh script evals for `line` (`_TYPER_COMPLETE_ARGS`: the words so far)."""
    env = {"_AI_SDLC_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line}
    return complete(cwd, env, process).strip()


def test_a_real_process_completes_story_ids_for_bash_and_zsh(stories: Path) -> None:
    assert bash(stories, "ai-sdlc run ", process=True) == ["S-0001", "S-0002", "S-0003"]
    out = zsh(stories, "ai-sdlc show S-000", process=True)
    assert out.startswith("_arguments '*: :((")
    assert '"S-0002":"Fix the\\\\: colon title"' in out  # zsh's escape of ':'


@pytest.mark.parametrize(
    "command", ["run", "show", "log", "unblock", "approve", "set", "archive", "pr", "report"]
)
def test_bash_completes_story_ids(stories: Path, command: str) -> None:
    assert bash(stories, f"ai-sdlc {command} ") == ["S-0001", "S-0002", "S-0003"]
    assert bash(stories, f"ai-sdlc {command} S-0002") == ["S-0002"]


def test_zsh_completes_story_ids_with_their_titles(stories: Path) -> None:
    out = zsh(stories, "ai-sdlc show S-000")
    assert out.startswith("_arguments '*: :((")
    assert '"S-0001":"Add a greeting"' in out
    assert '"S-0002":"Fix the\\\\: colon title"' in out  # zsh's escape of ':'
    assert zsh(stories, "ai-sdlc unblock S-0009") == "_files"  # nothing matches


def test_config_keys_and_log_kinds(stories: Path) -> None:
    keys = bash(stories, "ai-sdlc config limits.")
    assert "limits.global_recovery" in keys and all(k.startswith("limits.") for k in keys)
    assert '"git.base_branch":' in zsh(stories, "ai-sdlc config git.base")
    kinds = bash(stories, "ai-sdlc log S-0001 --kind r")
    assert kinds == ["recovery", "rollback", "rollback_initiated"]
    assert "integrity" in bash(stories, "ai-sdlc log S-0001 -k ")


def test_a_broken_story_does_not_break_completion(stories: Path, tmp_path: Path) -> None:
    stories = Path(shutil.copytree(stories, tmp_path / "proj", symlinks=True))
    folder = stories / ".ai-sdlc" / "stories"
    (folder / "S-0002" / "story.md").write_bytes(b"---\n\xff\xfe title: [unclosed\n")
    (folder / "S-0003" / "story.md").unlink()
    (folder / "S-0003" / "story.md").mkdir()  # unreadable as a file
    (folder / "S-0004").mkdir()  # no story file at all
    (folder / "notes.txt").write_text("not a story")
    assert bash(stories, "ai-sdlc show ") == ["S-0001", "S-0002", "S-0003", "S-0004"]
    assert '"S-0001":"Add a greeting"' in zsh(stories, "ai-sdlc show ")


def test_command_names_still_complete(stories: Path) -> None:
    assert bash(stories, "ai-sdlc sh") == ["show"]
    assert "unblock" in bash(stories, "ai-sdlc -C . u")


def test_outside_a_project_nothing_is_completed(tmp_path: Path) -> None:
    assert bash(tmp_path, "ai-sdlc show ", process=True) == []
    assert zsh(tmp_path, "ai-sdlc show ", process=True) == "_files"
    assert bash(tmp_path, "ai-sdlc -C /no/such/folder run ") == []


def test_project_option_names_the_project(stories: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert bash(elsewhere, f"ai-sdlc -C {stories} show S-0003") == ["S-0003"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_installed_bash_script_completes_in_a_real_bash(stories: Path) -> None:
    env = cli_environment({"HOME": str(stories)})
    env["PATH"] = f"{Path(AI_SDLC).parent}:{env['PATH']}"
    script = (
        'eval "$(ai-sdlc --show-completion bash)"\n'
        "COMP_WORDS=(ai-sdlc approve S-000); COMP_CWORD=2\n"
        "_ai_sdlc_completion ai-sdlc\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        cwd=stories,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["S-0001", "S-0002", "S-0003"]


def test_the_zsh_script_speaks_the_protocol_driven_here() -> None:
    from typer._completion_shared import get_completion_script

    script = get_completion_script(
        prog_name="ai-sdlc", complete_var="_AI_SDLC_COMPLETE", shell="zsh"
    )
    assert "_AI_SDLC_COMPLETE=complete_zsh" in script
    assert '_TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}"' in script
