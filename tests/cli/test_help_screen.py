"""Every help screen in a person's words (issue 36): `ai-sdlc --help` and each `<command> --help`
(sub-commands too), read from the CLI's own command table, name no Python type (`<str>`,
`<list[str]>`, `<int range>`), cut no summary with `...`, fit 80 columns and end with one
example — an example the CLI accepts as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from ai_sdlc.cli.app import COMMANDS, get_app, register_commands
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e

#: A value named by its type, the way typer shows an annotation.
PYTHON_TYPE = re.compile(r"<[a-z][a-z ]*(\[[^>]*\])?>|\b(str|int|float|bool|list\[\w+\])\b")


def command_paths() -> list[str]:
    """ "" (the root) and every command and sub-command (`runs show`) at any depth, walked
    from the app itself once every command of `COMMANDS` is registered, so a command added
    any other way is read too."""
    register_commands(None)

    def walk(command: object, path: str) -> list[str]:
        subs = getattr(command, "commands", {})
        return [path, *(p for name, sub in subs.items() for p in walk(sub, f"{path} {name}"))]

    paths = [p.strip() for p in walk(typer.main.get_command(get_app()), "")]
    assert set(COMMANDS) <= set(paths) and "runs show" in paths, paths
    return paths


@pytest.mark.parametrize("path", command_paths())
def test_help_is_plain_whole_and_has_one_example(tmp_path: Path, path: str) -> None:
    result = run_cli(tmp_path, *path.split(), "--help", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.output
    text = result.stdout
    assert not PYTHON_TYPE.search(text), PYTHON_TYPE.findall(text)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert not re.search(r"(?m)\w\.\.\.$", text), text  # a summary cut short
    examples = re.findall(r"(?m)^  Example: (.+)$", text)
    assert len(examples) == 1, text
    # The example runs as written: each command of it is accepted (options and sub-commands
    # exist; `--help` stops it before it does anything).
    for command in examples[0].split(" && "):
        words = shlex.split(command)
        while "=" in words[0]:  # an environment variable set for the command
            words.pop(0)
        assert words[0] == "ai-sdlc" and (not path or words[1] == path.split()[0]), command
        accepted = run_cli(tmp_path, *words[1:], "--help")
        assert accepted.returncode == 0, (command, accepted.output)


def test_provider_values_complete(tmp_path: Path) -> None:
    from tests.cli.test_completion import bash

    assert bash(tmp_path, "ai-sdlc run --provider a") == ["anthropic"]
    assert bash(tmp_path, "ai-sdlc watch --provider c") == ["claude", "command"]
    assert "scripted" in bash(tmp_path, "ai-sdlc run S-0001 --provider ")
