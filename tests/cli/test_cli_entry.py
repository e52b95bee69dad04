"""The entry point: cheap start-up, a static command table that tells the truth, and the
in-process test runner giving exactly what a real process gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main
from typer.core import TyperGroup

from ai_sdlc import __version__
from ai_sdlc.cli import app as cli_app
from ai_sdlc.cli.helptext import humanise
from tests.conftest import run_cli, run_cli_process

pytestmark = pytest.mark.e2e

COMMAND_MODULES = {f"ai_sdlc.cli.{m}" for m in cli_app.COMMAND_MODULES}


def real_group() -> TyperGroup:
    """The click group with every command module registered (what help used to import)."""
    cli_app.register_commands(None)
    group = typer.main.get_command(cli_app.get_app())
    assert isinstance(group, TyperGroup)
    return group


def test_command_table_matches_the_commands_docstrings() -> None:
    group = real_group()
    # (Registration order, hence `group.commands` order, depends on earlier in-process calls;
    # the listing order is the table's, checked by the next test.)
    assert set(group.commands) == set(cli_app.COMMANDS)
    for name, command in group.commands.items():
        assert command.help is not None, name
        first_paragraph = " ".join(command.help.split("\n\n")[0].split())
        assert first_paragraph == cli_app.COMMANDS[name].summary, name


def test_help_from_the_table_equals_help_from_the_real_commands() -> None:
    group = real_group()
    ctx = typer.Context(group, info_name="ai-sdlc")
    static = ctx.make_formatter()
    group.format_commands(ctx, static)  # the table
    real = ctx.make_formatter()
    humanise(group, "", cli_app.examples())  # what `--help` does first
    TyperGroup.format_commands(group, ctx, real)  # click's listing of the imported commands
    assert static.getvalue() == real.getvalue()
    assert "runs" in static.getvalue() and "Did you" not in static.getvalue()


def imported_modules(*args: str) -> set[str]:
    code = (
        "import runpy, sys\n"
        "sys.argv = ['ai-sdlc', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('ai_sdlc', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.__stderr__.write('\\nMODULES ' + ' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    return set(proc.stderr.rsplit("MODULES ", 1)[1].split())


def test_version_and_help_import_no_command_module() -> None:
    version = imported_modules("--version")
    assert not version & COMMAND_MODULES
    assert not {m for m in version if m.split(".")[0] in ("typer", "rich")}
    help_ = imported_modules("--help")
    assert "typer" in help_ and not help_ & COMMAND_MODULES
    status = imported_modules("--project", "/nonexistent", "status")
    assert "ai_sdlc.cli.status" in status and "ai_sdlc.cli.run" not in status


def test_version_fast_path_agrees_with_click(tmp_path: Path) -> None:
    for args in (["--version"], ["-C", str(tmp_path), "--version"], ["--version", "status"]):
        result = run_cli_process(tmp_path, *args)
        assert (result.returncode, result.stdout) == (0, f"ai-sdlc {__version__}\n"), args
    # Not the fast path: click decides (an unknown option is a usage error; help wins first).
    bogus = run_cli_process(tmp_path, "--bogus", "--version")
    assert bogus.returncode == 2 and "No such option: --bogus" in bogus.stderr
    first_help = run_cli_process(tmp_path, "--help", "--version")
    assert first_help.returncode == 0 and "Commands:" in first_help.stdout


def test_unknown_command_is_suggested_from_the_table(tmp_path: Path) -> None:
    result = run_cli_process(tmp_path, "stauts")
    assert result.returncode == 2
    assert "No such command 'stauts'. Did you mean 'status'?" in result.stderr


def test_in_process_runner_gives_what_a_real_process_gives(project: Path) -> None:
    """Exit codes, the stdout/stderr split, --json output and error mapping are the real ones."""
    calls: list[tuple[tuple[str, ...], dict[str, str]]] = [
        (("add", "First story", "--label", "ux"), {}),
        (("status", "--json"), {}),
        (("show", "S-0099"), {}),
        (("add", "x", "--type", "Big Epic"), {}),
        (("status", "--bogus"), {}),
        (("--help",), {}),
        (("doctor", "--json"), {"ANTHROPIC_API_KEY": "sk-ant-api03-SECRETSECRETSECRET"}),
    ]
    for args, env in calls:
        process = run_cli(project, *args, env=env, subprocess=True)
        if args[0] == "add" and process.returncode == 0:
            # Same command again in-process would add S-0002: compare on a fresh id instead.
            in_process = run_cli(project, *args, env=env)
            assert (process.stdout, in_process.stdout) == ("S-0001\n", "S-0002\n")
            assert in_process.stderr == process.stderr.replace("S-0001", "S-0002")
            continue
        in_process = run_cli(project, *args, env=env)
        assert in_process == process, args
    assert json.loads(run_cli(project, "status", "--json").stdout)["counts"]["total"] == 2


def test_in_process_runner_restores_the_process_state(project: Path) -> None:
    before = (dict(os.environ), sys.argv, sys.stdout, sys.stderr, sys.stdin, os.getcwd())
    handler = signal.getsignal(signal.SIGINT)
    result = run_cli(project, "status", env={"AI_SDLC_DEBUG": "1"}, input="ignored\n")
    assert result.returncode == 0, result.output
    after = (dict(os.environ), sys.argv, sys.stdout, sys.stderr, sys.stdin, os.getcwd())
    assert after == before
    assert signal.getsignal(signal.SIGINT) is handler


def test_an_invocation_leaves_nothing_behind_for_the_next(project: Path, tmp_path: Path) -> None:
    """Each call has its own `Application`: the `--json`, `-q` and `-C` of one call do not
    reach the next one made in the same process."""
    other = tmp_path / "other"
    other.mkdir()
    assert run_cli(other, "init").returncode == 0
    assert run_cli(project, "add", "Here").returncode == 0
    assert run_cli(project, "-q", "add", "Quiet").returncode == 0
    failed = run_cli(project, "show", "S-0099", "--json")
    assert failed.returncode != 0 and '"event": "error"' in failed.stdout.replace('":"', '": "')
    assert run_cli(project, "-C", str(other), "add", "Elsewhere").returncode == 0
    for args in (("show", "S-0099"), ("status",), ("add", "Loud")):
        in_process = run_cli(project, *args)
        process = run_cli(project, *args, subprocess=True)
        if args[0] == "add":
            assert (in_process.stdout, process.stdout) == ("S-0003\n", "S-0004\n")
            assert process.stderr == in_process.stderr.replace("S-0003", "S-0004") != ""
            continue
        assert in_process == process, args
    assert "Elsewhere" not in run_cli(project, "status").stdout
