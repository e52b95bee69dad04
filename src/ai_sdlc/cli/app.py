"""The `ai-sdlc` typer app: global options, command registration, error → exit code mapping.

Each command lives in its own module under `ai_sdlc.cli` and exposes `register(app)`.
Commands are thin: parse, call the core, render through `Terminal`.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc import __version__
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.errors import AiSdlcError, ExitCode

#: Modules under ai_sdlc.cli that each define `register(app: typer.Typer) -> None`.
COMMAND_MODULES: tuple[str, ...] = (
    "init",
    "add",
    "status",
    "show",
    "unblock",
    "config_cmd",
    "run",
    "runs",
    "approve",
    "metrics",
    "doctor",
)

app = typer.Typer(
    name="ai-sdlc",
    help="Take markdown stories through refine → research → plan → implement → review with AI "
    "agents, with guardrails that stop runaway recovery loops.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


class AppState:
    """Options shared by every command (set by the root callback)."""

    project: Path = Path.cwd()


STATE = AppState()


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"ai-sdlc {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            "-C",
            help="Project folder holding .ai-sdlc (default: the current folder, or "
            "AI_SDLC_PROJECT).",
            envvar="AI_SDLC_PROJECT",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    STATE.project = (project or Path.cwd()).resolve()


def project_root() -> Path:
    return STATE.project


#: Command name → the module that defines it (for loading only the command being run).
COMMAND_OF: dict[str, str] = {"config": "config_cmd", "details": "show"}

#: Global options that take a value (skipped when looking for the command name).
_VALUE_OPTIONS = ("--project", "-C")

_registered: set[str] = set()


def register_commands(argv: list[str] | None = None) -> None:
    """Register the command modules: only the one `argv` names, so `ai-sdlc status` does not
    import the runner, resilience or provider code; every module for help or an unknown name."""
    wanted = _command_module(argv) if argv is not None else None
    for name in (wanted,) if wanted else COMMAND_MODULES:
        if name in _registered:
            continue
        importlib.import_module(f"ai_sdlc.cli.{name}").register(app)
        _registered.add(name)


def _command_module(argv: list[str]) -> str | None:
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _VALUE_OPTIONS:
            skip = True
            continue
        if arg.startswith("-"):
            if arg in ("--help", "-h", "--version"):
                return None
            continue
        module = COMMAND_OF.get(arg, arg)
        return module if module in COMMAND_MODULES else None
    return None


def main() -> None:
    """Console-script entry point: run the app, map our errors to exit codes."""
    try:
        register_commands(sys.argv[1:])
        rc = app(standalone_mode=False)
    except AiSdlcError as exc:
        Terminal().error(exc.message, hint=exc.hint)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        Terminal().error("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        # Output closed early (e.g. `| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(int(ExitCode.FAILURE))
    except Exception as exc:  # click usage errors and aborts come through here
        _handle_click_exception(exc)
    sys.exit(rc if isinstance(rc, int) else 0)


def _handle_click_exception(exc: Exception) -> None:
    # typer vendors click; its exceptions carry `exit_code` and `show()`.
    show = getattr(exc, "show", None)
    exit_code = getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        show()
        sys.exit(exit_code)
    if type(exc).__name__ == "Abort":
        Terminal().error("aborted")
        sys.exit(int(ExitCode.INTERRUPTED))
    if os.environ.get("AI_SDLC_DEBUG"):
        raise exc
    Terminal().error(
        f"internal error: {type(exc).__name__}: {exc}",
        hint="this is a bug in ai-sdlc; run again with AI_SDLC_DEBUG=1 for the traceback "
        "and report it",
    )
    sys.exit(int(ExitCode.FAILURE))
