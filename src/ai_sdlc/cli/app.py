"""The `ai-sdlc` entry point: global options, command registration, error → exit code mapping.

Each command lives in its own module under `ai_sdlc.cli` and exposes `register(app)`.
Commands are thin: parse, call the core, render through `Terminal`.

Start-up is kept cheap: `ai-sdlc --version` imports neither typer nor rich, and `--help` (or an
unknown command) imports no command module — the command list comes from `COMMANDS`, a static
table that a test checks against the commands' real docstrings. A command's module is imported
only when that command runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ai_sdlc import __version__

if TYPE_CHECKING:
    import typer
    from typer.core import TyperGroup

PROG_NAME = "ai-sdlc"

HELP = (
    "Take markdown stories through refine → research → plan → implement → review with AI "
    "agents, with guardrails that stop runaway recovery loops."
)


class CommandInfo(NamedTuple):
    #: Module under `ai_sdlc.cli` whose `register(app)` defines the command.
    module: str
    #: The command's one-line help, exactly as its docstring / help= says.
    summary: str


#: Every top-level command in the order `--help` lists it (typer lists sub-apps such as `runs`
#: after plain commands). Help and start-up read this table instead of importing the modules.
COMMANDS: dict[str, CommandInfo] = {
    "init": CommandInfo("init", "Create .ai-sdlc/ in the project folder (safe to run again)."),
    "add": CommandInfo("add", "Add a story to the backlog and print its id on stdout."),
    "status": CommandInfo(
        "status", "Show the board: every story by status, blocked ones with their reason."
    ),
    "show": CommandInfo("show", "Show one story in full."),
    "details": CommandInfo("show", "Alias of 'show'."),
    "unblock": CommandInfo(
        "unblock", "Clear a story's block; it returns to the first phase it has not passed."
    ),
    "config": CommandInfo("config_cmd", "Show the effective config, one key, or set a key."),
    "run": CommandInfo(
        "run", "Take a story through refine → research → plan → implement → review → done."
    ),
    "approve": CommandInfo(
        "approve", "Approve the gate the story is waiting at, so `run` continues."
    ),
    "metrics": CommandInfo(
        "metrics",
        "Show retry and circuit-breaker figures per policy (llm, github, tool, verification).",
    ),
    "doctor": CommandInfo(
        "doctor", "Show which agent providers are usable here, and the effective AI config."
    ),
    "pr": CommandInfo("pr", "Push a story's branch and open (or reuse) its pull request."),
    "runs": CommandInfo("runs", "List multi-story runs (oldest first), or show one."),
    "worktrees": CommandInfo(
        "worktrees", "List the story worktrees (status, branch, dirty, ahead/behind), or prune."
    ),
}

#: Modules under ai_sdlc.cli that each define `register(app: typer.Typer) -> None`.
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(c.module for c in COMMANDS.values()))

#: Global options that take a value (skipped when looking for the command name).
_VALUE_OPTIONS = ("--project", "-C")


class AppState:
    """Options shared by every command (set by the root callback)."""

    project: Path = Path.cwd()


STATE = AppState()


def project_root() -> Path:
    return STATE.project


_app: typer.Typer | None = None
_registered: set[str] = set()


def get_app() -> typer.Typer:
    """The typer app (built on first use, so `--version` never imports typer)."""
    global _app
    if _app is None:
        _app = _build_app()
    return _app


def __getattr__(name: str) -> Any:
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_app() -> typer.Typer:
    import typer

    app = typer.Typer(
        name=PROG_NAME,
        cls=_lazy_group_class(),
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        suggest_commands=False,  # suggested from COMMANDS instead (see the group class)
        pretty_exceptions_enable=False,
        pretty_exceptions_show_locals=False,
        rich_markup_mode=None,
    )

    def version_option(value: bool) -> None:
        if value:
            sys.stdout.write(f"{PROG_NAME} {__version__}\n")
            raise typer.Exit(0)

    # Defaults instead of `Annotated[...]`: annotations are strings here and `typer` is not a
    # module global, so the option objects must live in the defaults.
    @app.callback()
    def _root(
        project: Path | None = typer.Option(  # noqa: B008 (see above)
            None,
            "--project",
            "-C",
            help="Project folder holding .ai-sdlc (default: the current folder, or "
            "AI_SDLC_PROJECT).",
            envvar="AI_SDLC_PROJECT",
        ),
        version: bool = typer.Option(
            False, "--version", callback=version_option, is_eager=True, help="Print the version."
        ),
    ) -> None:
        STATE.project = (project or Path.cwd()).resolve()

    return app


def _lazy_group_class() -> type[TyperGroup]:
    from typer.core import TyperCommand, TyperGroup

    class LazyHelpGroup(TyperGroup):
        """Lists and suggests commands from `COMMANDS`, so help needs no command module."""

        def list_commands(self, ctx: Any) -> list[str]:
            return list(COMMANDS)

        def format_commands(self, ctx: Any, formatter: Any) -> None:
            limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
            rows = [
                (name, TyperCommand(name=name, help=info.summary).get_short_help_str(limit))
                for name, info in COMMANDS.items()
            ]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

        def resolve_command(self, ctx: Any, args: list[str]) -> Any:
            try:
                return super().resolve_command(ctx, args)
            except Exception as exc:  # click's UsageError (typer vendors click)
                _suggest_commands(exc, args[0] if args else "")
                raise

    return LazyHelpGroup


def _suggest_commands(exc: Any, typo: str) -> None:
    """Add "Did you mean …?" from `COMMANDS` (typer's own suggestions only know the commands
    registered so far, which for an unknown name is none)."""
    from difflib import get_close_matches

    message = getattr(exc, "message", None)
    matches = get_close_matches(typo, list(COMMANDS)) if typo else []
    if isinstance(message, str) and matches:
        suggestions = ", ".join(f"{m!r}" for m in matches)
        exc.message = f"{message.rstrip('.')}. Did you mean {suggestions}?"


def register_commands(argv: list[str] | None = None) -> None:
    """Register the command module that `argv` names (so `ai-sdlc status` does not import the
    runner, resilience or provider code), none for help/version/an unknown name, or every
    module when `argv` is None."""
    if argv is None:
        wanted: tuple[str, ...] = COMMAND_MODULES
    else:
        name = _command_name(argv)
        wanted = (COMMANDS[name].module,) if name in COMMANDS else ()
    for module in wanted:
        if module in _registered:
            continue
        importlib.import_module(f"ai_sdlc.cli.{module}").register(get_app())
        _registered.add(module)


def _command_name(argv: list[str]) -> str | None:
    """The first word after the global options (None when help or version comes first)."""
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
        return arg
    return None


def _asks_for_version_only(argv: list[str]) -> bool:
    """True when click would print the version and exit for `argv`: `--version` among plain
    global options (anything unusual goes the full way, which gives the same answer)."""
    seen = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--version":
            seen = True
        elif arg in _VALUE_OPTIONS:
            if i + 1 >= len(argv):
                return False
            i += 1
        elif arg.startswith("-"):
            return False  # --help, --project=…, unknown options: let click decide
        else:
            break  # the command name: the eager --version wins before it is resolved
        i += 1
    return seen


def main() -> None:
    """Console-script entry point: run the app, map our errors to exit codes."""
    argv = sys.argv[1:]
    if _asks_for_version_only(argv):
        sys.stdout.write(f"{PROG_NAME} {__version__}\n")
        sys.exit(0)
    from ai_sdlc.errors import AiSdlcError, ExitCode

    try:
        register_commands(argv)
        rc = get_app()(args=argv, prog_name=PROG_NAME, standalone_mode=False)
    except AiSdlcError as exc:
        _terminal().error(exc.message, hint=exc.hint)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        _terminal().error("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        # Output closed early (e.g. `| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(int(ExitCode.FAILURE))
    except Exception as exc:  # click usage errors and aborts come through here
        _handle_click_exception(exc)
    sys.exit(rc if isinstance(rc, int) else 0)


def _terminal() -> Any:
    from ai_sdlc.cli.terminal import Terminal

    return Terminal()


def _handle_click_exception(exc: Exception) -> None:
    from ai_sdlc.errors import ExitCode

    # typer vendors click; its exceptions carry `exit_code` and `show()`.
    show = getattr(exc, "show", None)
    exit_code = getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        show()
        sys.exit(exit_code)
    if type(exc).__name__ == "Abort":
        _terminal().error("aborted")
        sys.exit(int(ExitCode.INTERRUPTED))
    if os.environ.get("AI_SDLC_DEBUG"):
        raise exc
    _terminal().error(
        f"internal error: {type(exc).__name__}: {exc}",
        hint="this is a bug in ai-sdlc; run again with AI_SDLC_DEBUG=1 for the traceback "
        "and report it",
    )
    sys.exit(int(ExitCode.FAILURE))
