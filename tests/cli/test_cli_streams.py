"""Every command puts what was asked on stdout and everything else on stderr, and `-q` leaves
only errors and the result (issue 25, items 1 and 8).

The commands are read from the CLI itself (`COMMANDS` and the click tree's sub-commands): a
new command fails `test_every_command_has_a_case` until it is given a case here. Each case runs
the command twice, plain and with `-q`, on one real git project (module-scoped) that a batch
run has filled with a done story, its kept worktree, its events, a run and metrics.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, cli_environment, run_cli
from tests.support.fakes.gh_support import install_gh
from tests.support.git_support import make_repo


@dataclass
class World:
    root: Path
    tmp: Path
    run_id: str
    made: list[int] = field(default_factory=list)

    def story(self, title: str, *, status: str = "backlog") -> str:
        """A new story of this world's own (each case makes what it changes)."""
        return StoryStore(self.root).add(title, status=status).id

    def cli(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        return run_cli(self.root, *args, env=env)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("streams")
    with pytest.MonkeyPatch.context() as mp:
        config = tmp / "gitconfig"
        config.write_text("[user]\n\tname = Test\n\temail = t@example.com\n")
        mp.setenv("GIT_CONFIG_GLOBAL", str(config))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        repo = make_repo(tmp, remote=False)
        root = repo.root
        assert run_cli(root, "config", "git.keep_worktrees", "true").returncode == 0
        assert run_cli(root, "add", "Power button").stdout == "S-0001\n"
        ran = run_cli(root, "run", "--batch", "S-0001", "--no-sandbox")
        assert ran.returncode == 0, ran.output
        run_id = json.loads(run_cli(root, "runs", "--json").stdout)["runs"][0]["run_id"]
        yield World(root, tmp, run_id)


# --- the cases ----------------------------------------------------------------------------------

Runner = Callable[[World, list[str]], CliResult]


@dataclass(frozen=True)
class Case:
    #: Runs the command with the global flags given ([] or ["-q"]).
    run: Runner
    #: A pattern the data on stdout matches (None: the command prints no data).
    data: str | None
    #: Texts only stderr carries without -q (notes, progress, warnings).
    notes: tuple[str, ...] = ()
    exit: int = 0
    #: The error the command ends with (on stderr, kept by -q).
    error: str | None = None


def _plain(*args: str) -> Runner:
    return lambda w, flags: w.cli(*flags, *args)


def _init(w: World, flags: list[str]) -> CliResult:
    fresh = w.tmp / f"fresh-{len(w.made)}"
    w.made.append(1)
    fresh.mkdir()
    return run_cli(fresh, *flags, "init")


def _import(w: World, flags: list[str]) -> CliResult:
    number = 100 + len(w.made)
    w.made.append(1)
    bin_dir = w.tmp / "bin"
    install_gh(bin_dir)
    issues = w.tmp / f"issues-{number}.json"
    issue = {
        "number": number,
        "title": f"Issue {number}",
        "body": "",
        "url": f"https://github.com/example/project/issues/{number}",
        "state": "OPEN",
        "labels": ["bug"],
    }
    issues.write_text(json.dumps([issue]))
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_GH_ISSUES": str(issues)}
    return w.cli(*flags, "import", "github", env=env)


def _run(w: World, flags: list[str]) -> CliResult:
    return w.cli(*flags, "run", w.story("Run me"))


def _approve(w: World, flags: list[str]) -> CliResult:
    sid = w.story("Gated")
    assert w.cli("config", "gates.before_implementation", "true").returncode == 0
    try:
        waiting = w.cli("run", sid)
        assert waiting.returncode == 0 and "waiting" in waiting.stdout, waiting.output
        return w.cli(*flags, "approve", sid)
    finally:
        assert w.cli("config", "gates.before_implementation", "false").returncode == 0


def _unblock(w: World, flags: list[str]) -> CliResult:
    sid = w.story("Stuck")
    path = StoryStore(w.root).story_path(sid)
    text = path.read_text()
    path.write_text(text.replace("status: backlog", "status: blocked\nblocked_reason: by hand", 1))
    return w.cli(*flags, "unblock", sid)


def _watch(w: World, flags: list[str]) -> CliResult:
    w.story("Watched", status="ready")
    return w.cli(*flags, "watch", "--once", "--no-sandbox")


def _report_html(w: World, flags: list[str]) -> CliResult:
    return w.cli(*flags, "report", w.run_id, "--html", str(w.tmp / "report.html"))


def _prune(w: World, flags: list[str]) -> CliResult:
    empty = make_repo(w.tmp / f"prune-{len(w.made)}", remote=False)
    w.made.append(1)
    return run_cli(empty.root, *flags, "worktrees", "prune")


S = r"S-\d{4}"
#: Every command and sub-command: how to run it, and what goes where.
CASES: dict[str, Case] = {
    "init": Case(
        _init, r"^Initialised ai-sdlc in .*\n$", notes=("Next: say how the project is tested",)
    ),
    "add": Case(_plain("add", "New title"), rf"^{S}\n$", notes=("Added S-",)),
    "import": Case(_import, rf"^{S}\n$", notes=("Added S-",)),
    "import github": Case(_import, rf"^{S}\n$", notes=("Added S-",)),
    "status": Case(_plain("status"), r"Power button"),
    "list": Case(_plain("list"), r"(?m)^S-0001\b.*Power button$"),
    "set": Case(
        lambda w, flags: w.cli(*flags, "set", w.story("Settable"), "priority=3"),
        rf"^{S} priority: .*→ 3\n$",
    ),
    "archive": Case(
        lambda w, flags: w.cli(*flags, "archive", w.story("Old")),
        rf"^Archived {S}: ",
        notes=("still shows it",),
    ),
    "show": Case(_plain("show", "S-0001"), r"^S-0001  Power button\n  status:    done"),
    "details": Case(_plain("details", "S-0001"), r"^S-0001  Power button\n"),
    "unblock": Case(_unblock, rf"^Unblocked {S} \(now \w+\)\.\n$"),
    "config": Case(_plain("config", "limits.global_recovery"), r"^10\n$"),
    "run": Case(_run, rf"^{S}: done\n$", notes=("starting", "no verification configured")),
    "approve": Case(_approve, rf"^Approved {S} at gate before_implementation\. Continue"),
    "metrics": Case(_plain("metrics"), r"(?m)^Retry policies$"),
    "doctor": Case(_plain("doctor"), r"(?m)^providers:$"),
    "pr": Case(_plain("pr", "S-0001"), None, exit=1, error="no pull request: no git remote"),
    "runs": Case(_plain("runs"), r"^\d{8}T\d{6}Z-[0-9a-f]{6}  completed"),
    "runs show": Case(
        lambda w, flags: w.cli(*flags, "runs", "show", w.run_id), r"^Run \S+ · batch · completed"
    ),
    "report": Case(
        lambda w, flags: w.cli(*flags, "report", w.run_id),
        r"^Run \S+ · batch · completed",
        notes=("--html",),
    ),
    "report --html": Case(_report_html, r"^/.*report\.html\n$", notes=("Wrote the report",)),
    "worktrees": Case(
        _plain("worktrees"), r"^STORY +STATUS +STATE +\+AHEAD/-BEHIND +BRANCH +PATH\nS-0001 +done"
    ),
    "worktrees prune": Case(_prune, None, notes=("Nothing to prune",)),
    "worktrees venv": Case(
        _plain("worktrees", "venv"), None, exit=2, error="AI_SDLC_PROJECT is not set"
    ),
    "log": Case(_plain("log", "S-0001"), r"(?m)^\d{4}-\d\d-\d\d [\d:.]+ +phase_started +refine"),
    "watch": Case(_watch, rf"(?m)^{S}: done$", notes=("Running S-",)),
}


def _registered() -> set[str]:
    """Every command and sub-command name the CLI has (`COMMANDS`, then the click tree)."""
    import typer.main

    from ai_sdlc.cli.app import COMMANDS, get_app, register_commands

    register_commands(None)
    group = typer.main.get_command(get_app())
    names = set(COMMANDS)
    for name in COMMANDS:
        command = group.commands.get(name)  # type: ignore[attr-defined]
        for sub in getattr(command, "commands", {}):
            names.add(f"{name} {sub}")
    return names


def test_every_command_has_a_case() -> None:
    missing = _registered() - set(CASES)
    assert not missing, f"give these commands a case in CASES: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_data_on_stdout_diagnostics_on_stderr(world: World, name: str) -> None:
    case = CASES[name]
    result = case.run(world, [])
    assert result.returncode == case.exit, (name, result.output)
    assert "Traceback" not in result.output
    if case.data is None:
        assert result.stdout == "", (name, result.stdout)
    else:
        assert re.search(case.data, result.stdout), (name, result.stdout, result.stderr)
        assert not re.search(case.data, result.stderr), (name, result.stderr)
    for note in case.notes:
        assert note in result.stderr and note not in result.stdout, (name, note, result.output)
    if case.error is not None:
        assert f"error: {case.error}" in result.stderr, (name, result.stderr)
    else:
        assert "error:" not in result.stderr, (name, result.stderr)


@pytest.mark.parametrize("name", sorted(CASES))
def test_quiet_leaves_only_errors_and_the_result(world: World, name: str) -> None:
    case = CASES[name]
    result = case.run(world, ["-q"])
    assert result.returncode == case.exit, (name, result.output)
    if case.data is None:
        assert result.stdout == "", (name, result.stdout)
    else:
        assert re.search(case.data, result.stdout), (name, result.stdout, result.stderr)
    if case.error is None:
        assert result.stderr == "", (name, result.stderr)
    else:  # the error and its hint, nothing else
        lines = result.stderr.splitlines()
        assert lines and all(ln.startswith(("error: ", "  hint: ")) for ln in lines), lines
        assert case.error in result.stderr


# --- as a shell sees them: pipes, files, terminals ----------------------------------------------


def test_a_pipe_gets_the_board_and_a_file_gets_the_story(world: World) -> None:
    board = run_cli(world.root, "status", subprocess=True)  # stdout is a pipe
    assert board.returncode == 0, board.output
    assert [ln for ln in board.stdout.splitlines() if "Power" in ln] == ["  S-0001  Power button"]
    target = world.tmp / "story.txt"
    with target.open("w") as fh:
        done = subprocess.run(
            [sys.executable, "-m", "ai_sdlc", "--project", str(world.root), "show", "S-0001"],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_environment(),
            check=False,
        )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert target.read_text().startswith("S-0001  Power button\n  status:    done (unverified")


def test_quiet_run_in_a_real_process_prints_its_result_line(world: World) -> None:
    sid = world.story("Quiet one")
    result = run_cli(world.root, "-q", "run", sid, subprocess=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{sid}: done\n", "")


def _on_a_terminal(root: Path, env: dict[str, str], *args: str) -> tuple[str, str]:
    """(what a terminal on stdout shows, stderr) for `ai-sdlc <args>` with stdout on a pty."""
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ai_sdlc", "--project", str(root), *args],
            stdout=child,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=cli_environment({"COLUMNS": "100", **env}),
            text=True,
        )
        os.close(child)
        child = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            chunks.append(chunk)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        os.close(main)
        if child >= 0:
            os.close(child)
    return b"".join(chunks).decode("utf-8", "replace"), err


#: An SGR sequence that sets a colour (30-38, 90-97; bold and the like are not colour).
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])(?:;[0-9;]*)?m")


def test_a_terminal_gets_the_table_and_term_dumb_plain_lines(world: World) -> None:
    drawn, err = _on_a_terminal(world.root, {"TERM": "xterm"}, "status")
    assert err == ""
    assert "│" in drawn or "┃" in drawn, drawn  # rich's table on a terminal
    assert not COLOUR.search(drawn)  # NO_COLOR=1 (the test environment's)
    blocked = world.story("Red")
    path = StoryStore(world.root).story_path(blocked)
    path.write_text(path.read_text().replace("status: backlog", "status: blocked", 1))
    coloured, _ = _on_a_terminal(world.root, {"TERM": "xterm", "NO_COLOR": ""}, "show", blocked)
    assert COLOUR.search(coloured), coloured  # the block in red when NO_COLOR is not set
    dumb, _ = _on_a_terminal(world.root, {"TERM": "dumb"}, "status")
    assert "│" not in dumb and "  S-0001  Power button" in dumb.replace("\r\n", "\n")
    assert "\x1b[" not in dumb


def test_redaction_holds_on_stdout(world: World) -> None:
    sid = world.story("Uses sk-ant-api03-" + "A" * 40)
    shown = world.cli("show", sid)
    assert shown.returncode == 0 and "Uses " in shown.stdout
    assert "A" * 40 not in shown.output
