"""`ai-sdlc run <story>` read without typer (`cli/fastrun.py`) means exactly what typer reads.

A story run used to spend about 45 ms of CPU importing typer, a fifth of the tool's own cost
per story (issue 10). The hand parser accepts only a narrow form; these tests check that every
line it accepts is parsed by typer itself to the same global options and `run` arguments (cases
written out, then generated ones), that whatever it refuses still gets typer's answer, and,
through the real entry point, that a story run then never imports typer.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_sdlc.cli import app as cli_app
from ai_sdlc.cli import fastrun
from ai_sdlc.cli.run_command import execute
from tests.conftest import cli_environment, run_cli

#: `execute`'s keyword arguments with their defaults: what typer passes for unset options.
DEFAULTS = {
    name: param.default
    for name, param in inspect.signature(execute).parameters.items()
    if param.default is not inspect.Parameter.empty
}


def typer_reading(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(root options, `run` arguments) as typer's own parser reads `argv`."""
    import typer.main

    cli_app.register_commands(["run"])
    group = typer.main.get_command(cli_app.get_app())
    ctx = group.make_context("ai-sdlc", list(argv))
    # typer 0.28 (pinned <0.29) keeps the command name and its words here, as click does.
    words = [*ctx._protected_args, *ctx.args]
    name, command, args = group.resolve_command(ctx, words)
    assert name == "run" and command is not None
    sub = command.make_context(name, args, parent=ctx)
    params = dict(sub.params)
    if params["story_refs"] is not None:  # typer hands the function a list
        params["story_refs"] = list(params["story_refs"])
    root = dict(ctx.params)
    if root["project"] is not None:  # typer hands the callback a Path
        root["project"] = Path(root["project"])
    return root, params


def fast_reading(line: fastrun.FastRun) -> tuple[dict[str, Any], dict[str, Any]]:
    root = {"project": line.project, "verbose": line.verbose, "quiet": line.quiet}
    return root, {**DEFAULTS, "story_refs": line.story_refs, **line.options}


def assert_same_reading(argv: list[str], env: dict[str, str]) -> None:
    hoisted = cli_app.hoist_global_options(argv)
    line = fastrun.parse(hoisted, env)
    if line is None:
        return
    root, params = typer_reading(hoisted)
    fast_root, fast_params = fast_reading(line)
    assert {k: root[k] for k in fast_root} == fast_root, argv
    assert params == fast_params, argv


ACCEPTED = [
    ["run", "S-0001"],
    ["-C", "/tmp/p", "run", "S-0001"],
    ["--project", "/tmp/p", "run", "S-0001", "--json"],
    ["--project=/tmp/p", "-v", "run", "add-login"],
    ["-C/tmp/p", "-q", "run", "--no-worktree", "S-0001"],
    ["run", "S-0001", "--provider", "claude"],
    ["run", "--provider=scripted", "S-0001", "--json", "--json"],
    ["run", "S-0001", "-C", "/tmp/other"],  # hoisted in front of `run`
    ["-C", "/tmp/a", "run", "S-0001", "-C", "/tmp/b"],  # the later one wins
    ["--verbose", "--verbose", "run", "S-0001"],
]

REFUSED = [
    ["run"],
    ["run", "S-0001", "S-0002"],
    ["run", "--batch", "S-0001"],
    ["run", "S-0001", "--step", "plan"],
    ["run", "S-0001", "--help"],
    ["run", "--", "S-0001"],
    ["-vq", "run", "S-0001"],
    ["-v", "-q", "run", "S-0001"],
    ["run", "S-0001", "--provider"],
    ["run", "S-0001", "--provider", "--json"],
    ["run", "S-0001", "--provider="],
    ["run", "--provider=", "claude", "S-0001"],  # typer: provider "" and two stories
    ["-C", "", "run", "S-0001"],
    ["status"],
    ["run", "-"],
    ["run", "S-0001", "--jso"],
]


@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_accepted_lines_read_as_typer_reads_them(argv: list[str]) -> None:
    line = fastrun.parse(cli_app.hoist_global_options(argv), {})
    assert line is not None, argv
    assert_same_reading(argv, {})


@pytest.mark.parametrize("argv", REFUSED, ids=" ".join)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert fastrun.parse(cli_app.hoist_global_options(argv), {}) is None


def test_project_comes_from_the_environment_as_typer_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for value, argv in [
        ("/from/env", ["run", "S-0001"]),
        ("/from/env", ["-C", "/given", "run", "S-0001"]),
        ("", ["run", "S-0001"]),
    ]:
        monkeypatch.setenv(fastrun.PROJECT_ENV, value)
        env = {fastrun.PROJECT_ENV: value}
        line = fastrun.parse(argv, env)
        assert line is not None
        assert_same_reading(argv, env)
    assert fastrun.parse(["run", "S-0001"], {"_AI_SDLC_COMPLETE": "bash_complete"}) is None


#: Options of a `run` line the hand parser knows (global ones before `run`, and ones after it,
#: where global options are also accepted), and words it must leave to typer; a generated
#: line has up to two of the latter, anywhere.
GLOBAL_OPTIONS = [["-C", "/tmp/p"], ["--project", "/tmp/q"], ["--project=/q"], ["-C/r"], ["-v"]]
RUN_OPTIONS = [["--json"], ["--no-worktree"], ["--provider", "claude"], ["--provider=codex"]]
AFTER_RUN = [*RUN_OPTIONS, ["-C", "/tmp/x"], ["-q"], ["--verbose"]]
ODD_WORDS = [
    "--", "-vq", "--version", "", "-", "--help", "--provider=", "S-0002", "--step", "plan",
    "--dry-run", "--quiet", "-C", "/tmp/p",
]  # fmt: skip


@st.composite
def run_lines(draw: st.DrawFn) -> list[str]:
    before = draw(st.lists(st.sampled_from(GLOBAL_OPTIONS), max_size=2))
    after = draw(st.lists(st.sampled_from(AFTER_RUN), max_size=3))
    after.insert(draw(st.integers(0, len(after))), ["S-0001"])
    line = [word for option in [*before, ["run"], *after] for word in option]
    for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1, 1, 2]))):
        line.insert(draw(st.integers(0, len(line))), draw(st.sampled_from(ODD_WORDS)))
    return line


@given(run_lines())
def test_generated_lines_read_as_typer_reads_them(argv: list[str]) -> None:
    assert_same_reading(argv, {})


def test_the_common_run_line_never_imports_typer(tmp_path: Path) -> None:
    """Through the real entry point in a fresh process: the story runs to done, and neither
    typer nor the click it vendors was imported."""
    project = tmp_path / "proj"
    project.mkdir()
    assert run_cli(project, "init").returncode == 0
    sid = run_cli(project, "add", "Fast line").stdout.strip()
    probe = (
        "import json, sys\n"
        "from ai_sdlc.cli.app import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    names = sorted({m.split('.')[0] for m in sys.modules})\n"
        "    sys.__stderr__.write('\\nMODULES ' + json.dumps(names) + '\\n')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, "-C", str(project), "run", sid, "--json"],
        capture_output=True,
        text=True,
        env=cli_environment(),
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stderr.rsplit("MODULES ", 1)[1]))
    assert "ai_sdlc" in modules
    assert not modules & {"typer", "click", "platformdirs"}, sorted(modules)
    final = json.loads(proc.stdout.splitlines()[-1])
    assert final["event"] == "run_finished"
    assert [o["result"] for o in final["outcomes"]] == ["done"]


def test_a_refused_line_still_gets_typers_answer(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert run_cli(project, "init").returncode == 0
    both = run_cli(project, "-v", "-q", "run", "S-0001")
    assert both.returncode == 2 and "use one of --verbose and --quiet" in both.stderr
    two = run_cli(project, "run", "S-0001", "S-0002")
    assert two.returncode == 2 and "give one story, or several with --batch" in two.stderr
    missing = run_cli(project, "run", "S-0404")
    assert missing.returncode != 0 and "S-0404" in missing.stderr
