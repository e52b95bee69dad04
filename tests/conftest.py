"""Shared fixtures: temp projects and the real `ai-sdlc` entry point.

`run_cli` calls `ai_sdlc.cli.app.main()` in this process, exactly as the console script does
(same argv, environment, exit codes, stdout/stderr split, error mapping), with the process-wide
state it touches saved and restored around the call (`run_cli_in` makes the same call typed in
a folder, without `--project`). `run_cli(..., subprocess=True)` (or
`run_cli_process`) starts a real `python -m ai_sdlc` instead: for tests where a real process
matters (concurrent invocations, locks held by another process, signals, crashes, start-up).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess as _subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest

# The earlier runs' temp trees are removed while this one runs (tests/support/earlier_runs.py).
from tests.support.earlier_runs import pytest_sessionfinish as pytest_sessionfinish
from tests.support.earlier_runs import pytest_sessionstart as pytest_sessionstart
from tests.support.folders import process_folder


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


CliRunner = Callable[..., CliResult]

#: Credentials the CLI must never see from the developer's shell.
_SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")
#: Signals whose handlers a command might change; restored after every in-process call.
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGCHLD)


_EMPTY_CONFIG_HOME = str(process_folder("ai-sdlc-test-config-"))
#: The user's state folder (copies of ledger heads, accepted guardrail settings): one of the
#: session's own, never the developer's ~/.local/state. Set here too for tests that call the
#: state owner directly.
STATE_HOME = str(process_folder("ai-sdlc-test-state-"))
os.environ["AI_SDLC_STATE_HOME"] = STATE_HOME
#: A child given this process's environment without AI_SDLC_* falls back to the XDG folder.
os.environ["XDG_STATE_HOME"] = STATE_HOME


def _git_template() -> str:
    """git's standard repository template without its 13 sample hooks (`*.sample`, never run):
    the suite makes hundreds of repositories and copies, and the samples were a tenth of the
    files each `make test` wrote and deleted. Every `git init` and `git clone` of the suite
    and of the processes it starts takes it (`GIT_TEMPLATE_DIR`)."""
    template = process_folder("ai-sdlc-test-git-template-")
    for folder in ("hooks", "info", "branches"):
        (template / folder).mkdir()
    (template / "description").write_text(
        "Unnamed repository; edit this file 'description' to name the repository.\n"
    )
    (template / "info" / "exclude").write_text(
        "# git ls-files --others --exclude-from=.git/info/exclude\n"
        "# Lines that start with '#' are comments.\n"
        "# For a project mostly in C, the following would be a good set of\n"
        "# exclude patterns (uncomment them if you want to use them):\n"
        "# *.[oa]\n"
        "# *~\n"
    )
    return str(template)


os.environ["GIT_TEMPLATE_DIR"] = _git_template()


def cli_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """What a user's shell would pass: ours minus AI_SDLC_* and API keys, offline provider."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    for key in _SCRUBBED:
        full_env.pop(key, None)
    # A real process started by a test reuses the bytecode caches (some machines disable them).
    full_env.pop("PYTHONDONTWRITEBYTECODE", None)
    full_env["NO_COLOR"] = "1"
    full_env["AI_SDLC_PROVIDER"] = "scripted"
    # Never the developer's own user config (~/.config/ai-sdlc): an empty folder of our own.
    full_env["AI_SDLC_CONFIG_HOME"] = _EMPTY_CONFIG_HOME
    full_env["AI_SDLC_STATE_HOME"] = STATE_HOME
    if env:
        full_env.update(env)
    return full_env


def run_cli(
    project: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
    subprocess: bool = False,
) -> CliResult:
    """`ai-sdlc --project <project> <args>` as a user would run it (in-process by default)."""
    if subprocess:
        return run_cli_process(project, *args, env=env, timeout=timeout, input=input)
    return _run_in_process(
        ["--project", str(project), *args], cli_environment(env), input or "", timeout
    )


def run_cli_process(
    project: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> CliResult:
    """`python -m ai_sdlc --project <project> <args>` in a fresh process."""
    proc = _subprocess.run(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=cli_environment(env),
        timeout=timeout,
        input=input,
        stdin=None if input is not None else _subprocess.DEVNULL,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def run_cli_in(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> CliResult:
    """`ai-sdlc <args>` typed in the folder `cwd` (no `--project`: the project is found from
    there, as in a user's shell), in-process; `cli_environment(env)` is the whole environment."""
    with contextlib.chdir(cwd):
        return _run_in_process(list(args), cli_environment(env), "", timeout)


def _reuse_built_commands() -> None:
    """Build typer's click command tree once per set of registered commands, not per call.

    A real process calls `typer.main.get_command(app)` once; this process makes hundreds of
    in-process calls on the same app, and each rebuild introspects every registered command
    (about 25 ms). The tree holds no per-invocation state (click makes a fresh context per
    call), so reusing it changes nothing the command sees. A newly registered command module
    makes a new tree, and so does a change in typer's own variables (the completion options
    are built differently under _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION)."""
    import typer.main

    build = typer.main.get_command
    if getattr(build, "_ai_sdlc_memo", False):
        return
    built: dict[int, tuple[object, tuple[object, ...], object]] = {}

    def get_command(typer_instance: typer.Typer) -> object:
        shape = (
            len(typer_instance.registered_commands),
            len(typer_instance.registered_groups),
            typer_instance.registered_callback,
            sorted((k, v) for k, v in os.environ.items() if "TYPER" in k),
        )
        kept = built.get(id(typer_instance))
        if kept is not None and kept[0] is typer_instance and kept[1] == shape:
            return kept[2]
        command = build(typer_instance)
        built[id(typer_instance)] = (typer_instance, shape, command)
        return command

    get_command._ai_sdlc_memo = True  # type: ignore[attr-defined]
    typer.main.get_command = get_command  # type: ignore[assignment]


_reuse_built_commands()


class InProcessTimeout(BaseException):
    """Raised into a hung in-process call (a BaseException, so `except Exception` in the code
    under test cannot swallow it)."""


def _run_in_process(argv: list[str], env: dict[str, str], stdin: str, timeout: float) -> CliResult:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "in-process run_cli swaps process-wide state (argv, environ, std streams): "
            "call it from the main thread, or pass subprocess=True for concurrent invocations"
        )
    from ai_sdlc.cli import app as cli_app

    # Python's own choices for a pipe: strict stdout, backslash-escaping stderr.
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(
        io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    # A subprocess has no terminal on fds 0-2; here they may be the developer's tty, which rich
    # and click would measure. COLUMNS gives both the width a pipe gets.
    env = {"COLUMNS": "80", **env}
    returncode = 0
    with _isolated(env, ["ai-sdlc", *argv], stdin, out, err), _deadline(timeout):
        try:
            cli_app.main()
        except SystemExit as exc:
            returncode = _exit_status(exc.code, err)
        except InProcessTimeout:
            raise
        except BaseException:  # an exception main() lets through ends the process: rc 1
            traceback.print_exc(file=err)
            returncode = 1
        else:
            returncode = 0
    return CliResult(returncode, _text(out), _text(err))


def _exit_status(code: object, err: io.TextIOWrapper) -> int:
    """What the process's exit status would be for `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    err.write(f"{code}\n")
    return 1


def _text(stream: io.TextIOWrapper) -> str:
    """Decoded the way `subprocess.run(text=True)` decodes a pipe (universal newlines)."""
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    data = buffer.getvalue().decode("utf-8")
    return data.replace("\r\n", "\n").replace("\r", "\n")


@contextmanager
def _isolated(
    env: dict[str, str],
    argv: list[str],
    stdin: str,
    out: io.TextIOWrapper,
    err: io.TextIOWrapper,
) -> Iterator[None]:
    """Give the call its own argv, environment and std streams; put ours back. (The app's
    state is the call's own `Application`, so there is none to save.)"""
    saved_env = dict(os.environ)
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_argv = sys.argv
    saved_cwd = os.getcwd()
    saved_handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    os.environ.clear()
    os.environ.update(env)
    sys.argv = argv
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(ValueError):  # closed by the command
                stream.flush()
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for sig, handler in saved_handlers.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail a hung in-process call after `seconds` instead of hanging the worker."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise InProcessTimeout(f"in-process ai-sdlc call still running after {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An initialised ai-sdlc project in a temp folder."""
    root = tmp_path / "proj"
    root.mkdir()
    result = run_cli(root, "init")
    assert result.returncode == 0, result.output
    allow_unverified(root)
    return root


VERIFY_NONE = "verify:\n  none: true\n"


def allow_unverified(root: Path) -> None:
    """Most tests run stories with no verify command: say so in the project's config
    (`verify.none: true`), as a user must (a run refuses otherwise)."""
    config = root / ".ai-sdlc" / "config.yaml"
    text = config.read_text() if config.exists() else ""
    if "  none: false" in text:
        config.write_text(text.replace("  none: false", "  none: true", 1))
    elif "verify:" not in text:  # appended: the lines a test's own config names stay put
        config.write_text(text + ("\n" if text and not text.endswith("\n") else "") + VERIFY_NONE)


@pytest.fixture
def cli(project: Path) -> CliRunner:
    def call(*args: str, **kw: object) -> CliResult:
        return run_cli(project, *args, **kw)  # type: ignore[arg-type]

    return call


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests start, however the suite was launched.

    A shell starts a background job (`make test &`, a CI step run that way) with SIGINT ignored,
    and an ignored signal stays ignored across fork and exec: every `ai-sdlc` a test starts would
    then ignore the Ctrl-C the test sends, as POSIX wants of a background job. A handled signal
    is reset to its default on exec, so handling it here gives each child a normal Ctrl-C."""
    del config
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What `-n auto` (`make test`) means: two workers per core, at most cores + 4.

    About half the wall time of the end-to-end tests is spent waiting on real processes (agents,
    verification commands, interrupted runs, worker processes), so one worker per core leaves
    the cores idle that long. PYTEST_XDIST_AUTO_NUM_WORKERS still overrides this."""
    del config
    forced = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if forced:
        return int(forced)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    return min(2 * cores, cores + 4)


#: The markers of the slow tiers (`make test-fast` leaves them out; docs/testing.md).
SLOW_TIERS = ("e2e", "slow", "realcli", "ray", "browser")
E2E_FOLDER = Path(__file__).parent / "e2e"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under `tests/e2e/` is marked `e2e`, before `-m` deselects (a later
    implementation of this hook: a marker added after it would leave e2e tests in `make
    test-fast`). The slow tiers run first: `--dist loadgroup` hands tests out in collection
    order, so a long test collected last would leave one worker running alone at the end
    (deselection keeps the order)."""
    del config
    for item in items:
        if E2E_FOLDER in item.path.parents:
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in SLOW_TIERS))
