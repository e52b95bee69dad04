"""The `ai-sdlc` entry point: global options, command registration, error → exit code mapping.

Each command lives in its own module under `ai_sdlc.cli` and exposes `register(app)`.
Commands are thin: parse, call the core, render through `Terminal`.

Start-up is kept cheap: `ai-sdlc --version` imports neither typer nor rich, and `--help` (or an
unknown command) imports no command module — the command list comes from `COMMANDS`, a static
table that a test checks against the commands' real docstrings. A command's module is imported
only when that command runs (shell completion, which needs every command's options, imports all).

Global options (`-C/--project`, `-v/--verbose`, `-q/--quiet`) are accepted after the command
too, as in `ai-sdlc status -C ../other`: `main()` moves them in front of the command name before
click parses. Without `-C`, the project is found like git finds its repository: the nearest
folder holding `.ai-sdlc/stories`, walking up from the current folder (stopping at `$HOME` or the
filesystem root); `init` alone creates in the current folder.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from ai_sdlc import __version__
from ai_sdlc.cli.application import NORMAL, QUIET, VERBOSE, Application

if TYPE_CHECKING:
    import typer
    from typer.core import TyperGroup

PROG_NAME = "ai-sdlc"
#: The example at the end of `ai-sdlc --help`.
EXAMPLE = 'ai-sdlc add "Fix the login redirect" && ai-sdlc run --auto'

HELP = (
    "Take markdown stories through refine → research → plan → implement → review with AI "
    "agents, with guardrails that stop runaway recovery loops."
)


class CommandInfo(NamedTuple):
    #: Module under `ai_sdlc.cli` whose `register(app)` defines the command.
    module: str
    #: The command's one-line help, exactly as its docstring / help= says.
    summary: str
    #: One command line showing it in use: the last line of its `--help`.
    example: str


#: Every top-level command in the order `--help` lists it (typer lists sub-apps such as `runs`
#: after plain commands). Help and start-up read this table instead of importing the modules.
COMMANDS: dict[str, CommandInfo] = {
    "init": CommandInfo(
        "init", "Create .ai-sdlc/ in the project folder (safe to run again).", "ai-sdlc init"
    ),
    "add": CommandInfo(
        "add",
        "Add a story to the backlog and print its id on stdout.",
        'ai-sdlc add "Fix the login redirect" --type bug --priority 1',
    ),
    "import": CommandInfo(
        "import_cmd",
        "Create stories from another tracker's issues (GitHub, through gh).",
        "ai-sdlc import github --label bug",
    ),
    "status": CommandInfo(
        "status",
        "Show the board: every story by status, blocked ones with their reason.",
        "ai-sdlc status --hide-done",
    ),
    "list": CommandInfo(
        "list_cmd",
        "List stories one per line (status, priority, type, epic, deps, recoveries), filtered.",
        "ai-sdlc list --status blocked --sort priority",
    ),
    "show": CommandInfo("show", "Show one story in full.", "ai-sdlc show S-0001"),
    "details": CommandInfo("show", "Alias of 'show'.", "ai-sdlc details S-0001 --json"),
    "set": CommandInfo(
        "set_cmd",
        "Set a story's dependencies, epic, priority, labels, title, type or status.",
        "ai-sdlc set S-0003 dependencies=S-0001 priority=2",
    ),
    "archive": CommandInfo(
        "archive",
        "Move a story out of the backlog into .ai-sdlc/archive/ (show still finds it).",
        "ai-sdlc archive S-0004",
    ),
    "unblock": CommandInfo(
        "unblock",
        "Clear a story's block; it returns to the first phase it has not passed.",
        "ai-sdlc unblock S-0002 --reset-retries",
    ),
    "config": CommandInfo(
        "config_cmd",
        "Show the effective config with each key's source, one key, or set a key.",
        "ai-sdlc config limits.global_recovery 8",
    ),
    "run": CommandInfo(
        "run",
        "Take a story through refine → research → plan → implement → review → done.",
        "ai-sdlc run S-0001",
    ),
    "approve": CommandInfo(
        "approve",
        "Approve the gate the story is waiting at, so `run` continues.",
        "ai-sdlc approve S-0001",
    ),
    "metrics": CommandInfo(
        "metrics",
        "Show retry and circuit-breaker figures per policy (llm, github, tool, verification).",
        "ai-sdlc metrics --json",
    ),
    "doctor": CommandInfo(
        "doctor",
        "Check what a run needs here (git, gh, verify, sandbox, providers), with fixes.",
        "AI_SDLC_PROVIDER=anthropic ai-sdlc doctor",
    ),
    "pr": CommandInfo(
        "pr", "Push a story's branch and open (or reuse) its pull request.", "ai-sdlc pr S-0001"
    ),
    "runs": CommandInfo(
        "runs", "List multi-story runs (oldest first), or show one.", "ai-sdlc runs show R-0001"
    ),
    "report": CommandInfo(
        "report",
        "Report a run (any kind): timeline, recovery budgets, stop conditions, cost (HTML, JSON).",
        "ai-sdlc report --html report.html",
    ),
    "worktrees": CommandInfo(
        "worktrees",
        "List the story worktrees (status, branch, dirty, ahead/behind), or prune.",
        "ai-sdlc worktrees --json",
    ),
    "log": CommandInfo(
        "log",
        "Show a story's event log as a timeline (recoveries highlighted), or follow it.",
        "ai-sdlc log S-0001 --kind recovery",
    ),
    "watch": CommandInfo(
        "watch",
        "Run stories as they become ready: a foreground daemon, or once with --once.",
        "ai-sdlc watch --once",
    ),
}

#: Modules under ai_sdlc.cli that each define `register(app: typer.Typer) -> None`.
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(c.module for c in COMMANDS.values()))

#: Global options that take a value (skipped when looking for the command name).
_VALUE_OPTIONS = ("--project", "-C")
#: Global flags that may also follow the command name.
_GLOBAL_FLAGS = ("--verbose", "-v", "--quiet", "-q")
#: Where a project's stories live; a folder holding this is an ai-sdlc project (the store's
#: `is_initialized`, without importing the store for every start-up).
PROJECT_MARKER = (".ai-sdlc", "stories")
#: The commands that create a project where they are asked to instead of looking for one.
_CREATES_PROJECT = frozenset({"init"})
#: The environment variable of typer's shell completion for PROG_NAME.
COMPLETE_VAR = "_AI_SDLC_COMPLETE"


def examples() -> dict[str, str]:
    """The example each help ends with, by command path ("" for `ai-sdlc --help` itself,
    `runs show` for a sub-command)."""
    from ai_sdlc.cli.helptext import SUB_EXAMPLES

    return {"": EXAMPLE, **{name: info.example for name, info in COMMANDS.items()}, **SUB_EXAMPLES}


def find_project(start: Path, home: Path | None = None) -> Path | None:
    """The nearest folder from `start` upwards holding `.ai-sdlc/stories`, like git looks for
    `.git`: it stops after `home` (a project above the home folder is someone else's) and at
    the filesystem root."""
    start = start.resolve()
    home = home.resolve() if home is not None else None
    for folder in (start, *start.parents):
        if folder.joinpath(*PROJECT_MARKER).is_dir():
            return folder
        if folder == home:
            return None
    return None


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(home) if home else None


def choose_project(explicit: Path | None, command: str | None) -> tuple[Path, str]:
    """(project folder, how it was chosen) for the root callback."""
    if explicit is not None:
        return explicit.resolve(), "option"
    cwd = Path.cwd().resolve()
    if command in _CREATES_PROJECT:
        return cwd, "cwd"
    found = find_project(cwd, _home())
    return (found, "found") if found is not None else (cwd, "cwd")


#: The typer app and the command modules registered on it: definitions only, built on first use
#: (so `--version` never imports typer) and reused by later invocations in the same process.
#: Everything about one invocation is in its `Application` (the click context's `obj`).
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
        add_completion=True,
        # Inherited by every sub-command's context, so `-h` works everywhere.
        context_settings={"help_option_names": ["-h", "--help"]},
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
    def _root(
        ctx: typer.Context,
        project: Path | None = typer.Option(  # noqa: B008 (see above)
            None,
            "--project",
            "-C",
            metavar="FOLDER",
            help="Project folder holding .ai-sdlc (default: AI_SDLC_PROJECT, else the nearest "
            "one from the current folder up; `init`: the current folder). Also accepted after "
            "the command.",
            envvar="AI_SDLC_PROJECT",
        ),
        verbose: bool = typer.Option(
            False, "--verbose", "-v", help="Also print debug lines (provider, model, decisions)."
        ),
        quiet: bool = typer.Option(
            False, "--quiet", "-q", help="Print only errors and the final result."
        ),
        version: bool = typer.Option(
            False, "--version", callback=version_option, is_eager=True, help="Print the version."
        ),
    ) -> None:
        if verbose and quiet:
            raise typer.BadParameter("use one of --verbose and --quiet", param_hint="'--quiet'")
        application = ctx.ensure_object(Application)
        chosen, source = choose_project(project, application.command)
        application.choose_project(
            chosen, source, VERBOSE if verbose else QUIET if quiet else NORMAL
        )

    # typer finds the context parameter by its type, and the string annotation cannot be
    # evaluated here (typer is not a module global): give it the class itself.
    _root.__annotations__["ctx"] = typer.Context
    app.callback()(_root)
    return app


class Interrupted(BaseException):
    """Ctrl-C during a command, carried past typer (which turns a KeyboardInterrupt into a
    silent `Exit(130)`) to `main()`, which says so."""


def _lazy_group_class() -> type[TyperGroup]:
    from typer.core import TyperGroup

    class LazyHelpGroup(TyperGroup):
        """Lists and suggests commands from `COMMANDS`, so help needs no command module."""

        def list_commands(self, ctx: Any) -> list[str]:
            return list(COMMANDS)

        def format_commands(self, ctx: Any, formatter: Any) -> None:
            # Whole summaries, wrapped under themselves (click would cut them with "...").
            rows = [(name, info.summary) for name, info in COMMANDS.items()]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

        def get_command(self, ctx: Any, cmd_name: str) -> Any:
            command = super().get_command(ctx, cmd_name)
            if command is not None and cmd_name in COMMANDS:
                from ai_sdlc.cli.helptext import humanise

                humanise(command, cmd_name, examples())
            return command

        def format_help(self, ctx: Any, formatter: Any) -> None:
            from ai_sdlc.cli.helptext import humanise

            humanise(self, "", examples())
            super().format_help(ctx, formatter)

        def resolve_command(self, ctx: Any, args: list[str]) -> Any:
            try:
                return super().resolve_command(ctx, args)
            except Exception as exc:  # click's UsageError (typer vendors click)
                _suggest_commands(exc, args[0] if args else "")
                raise

        def invoke(self, ctx: Any) -> Any:
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt as exc:  # typer would make it a silent exit 130
                raise Interrupted from exc

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
    completing = _completed_command() if COMPLETE_VAR in os.environ else None
    if completing in COMMANDS:  # a Tab after a command name needs that command only
        wanted: tuple[str, ...] = (COMMANDS[completing].module,)
    elif argv is None or COMPLETE_VAR in os.environ:
        wanted = COMMAND_MODULES
    else:
        name = _command_name(argv)
        wanted = (COMMANDS[name].module,) if name in COMMANDS else ()
    for module in wanted:
        if module in _registered:
            continue
        importlib.import_module(f"ai_sdlc.cli.{module}").register(get_app())
        _registered.add(module)


def _completed_command() -> str | None:
    """The command name already typed on the line being completed (None while the command
    name itself is being completed): bash passes COMP_WORDS and COMP_CWORD, the other shells
    typer's `_TYPER_COMPLETE_ARGS` (its last word unfinished unless it ends with a space)."""
    import shlex

    try:
        if "COMP_WORDS" in os.environ:
            words = shlex.split(os.environ["COMP_WORDS"])[: int(os.environ["COMP_CWORD"])]
        else:
            line = os.environ.get("_TYPER_COMPLETE_ARGS", "")
            words = shlex.split(line)
            words = words if line.endswith(" ") else words[:-1]
    except ValueError:  # unbalanced quotes, a bad number: complete as before
        return None
    return _command_name(words[1:])


def _command_index(argv: list[str]) -> int | None:
    """Index of the first word after the global options (None when help or version comes
    first, or there is no command)."""
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in _VALUE_OPTIONS:
            skip = True
            continue
        if arg == "--":
            return i + 1 if i + 1 < len(argv) else None
        if arg.startswith("-"):
            if arg in ("--help", "-h", "--version"):
                return None
            continue
        return i
    return None


def _command_name(argv: list[str]) -> str | None:
    """The first word after the global options (None when help or version comes first)."""
    index = _command_index(argv)
    return argv[index] if index is not None else None


def hoist_global_options(argv: list[str]) -> list[str]:
    """`argv` with the global options found after the command name (up to `--`) moved in
    front of it, so `ai-sdlc status -C ../x -q` means `ai-sdlc -C ../x -q status`. Given
    both before and after, the later one wins (click keeps the last value)."""
    index = _command_index(argv)
    if index is None:
        return argv
    head, tail = argv[:index], argv[index:]
    moved: list[str] = []
    kept: list[str] = [tail[0]]
    i = 1
    while i < len(tail):
        arg = tail[i]
        if arg == "--":
            kept.extend(tail[i:])
            break
        if arg in _VALUE_OPTIONS and i + 1 < len(tail):
            moved += [arg, tail[i + 1]]
            i += 2
            continue
        # `-Cpath` and `--project=path` carry their value in the same word.
        attached = arg.startswith(("-C", "--project=")) and arg not in _VALUE_OPTIONS
        (moved if arg in _GLOBAL_FLAGS or attached else kept).append(arg)
        i += 1
    return [*head, *moved, *kept]


def _wants_json(argv: list[str]) -> bool:
    """`--json` among the options (before any `--`)."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


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
    """Console-script entry point: run the app, map our errors to exit codes.

    In `--json` mode a failure mapped here also ends stdout with one NDJSON line
    `{"event": "error", "message": ..., "hint": ..., "exit_code": ...}`, so a script reading
    the stream learns why it stopped. (A command that ends itself with a non-zero exit, such
    as an interrupted multi-story run, has already said so in its own final event.)"""
    argv = sys.argv[1:]
    if _asks_for_version_only(argv):
        sys.stdout.write(f"{PROG_NAME} {__version__}\n")
        sys.exit(0)
    from ai_sdlc.cli.terminal import flush_quietly
    from ai_sdlc.errors import AiSdlcError, ExitCode, disk_full

    # Before the interpreter's own flush at exit: a reader gone (`| head`) ends the output,
    # never changes the exit code, whichever way the command ends.
    atexit.register(flush_quietly, sys.stdout, sys.stderr)
    _terminate_as_interrupt()
    argv = hoist_global_options(argv)
    application = Application(command=_command_name(argv), json_mode=_wants_json(argv))
    try:
        register_commands(argv)
        with _debug_logging(argv):
            rc = get_app()(args=argv, prog_name=PROG_NAME, standalone_mode=False, obj=application)
    except AiSdlcError as exc:
        exc = disk_full(exc, application.project) or exc  # a git command that hit a full disk
        fail(application, exc.message, hint=exc.hint, exit_code=int(exc.exit_code))
    except (KeyboardInterrupt, Interrupted):
        fail(application, "interrupted", exit_code=int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        # Output closed early (e.g. `| head`) outside the terminal layer, which ends the
        # output and never the work: stop quietly, the output is gone.
        from ai_sdlc.cli.terminal import closed_output

        closed_output(sys.stdout)
        sys.exit(int(ExitCode.FAILURE))
    except Exception as exc:  # click usage errors and aborts come through here
        full = disk_full(exc, application.project)  # ENOSPC/EDQUOT/EIO anywhere: no traceback
        if full is not None:
            fail(application, full.message, hint=full.hint, exit_code=int(full.exit_code))
        _handle_click_exception(application, exc)
    sys.exit(rc if isinstance(rc, int) else 0)


def _terminate_as_interrupt() -> None:
    """SIGTERM (a cancelled CI job, `kill`, a service manager stopping) ends a command the way
    Ctrl-C does, through its clean-up: the phase in flight rolled back, its children ended, the
    session's temp folders removed (exit 130). By default it would end the process at once,
    leaving all of them. `watch` sets its own (a SIGTERM stops it with exit 0); a handler the
    embedding process set is left alone."""
    import signal

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread: no handler can be set
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, interrupt)


def _debug_logging(argv: list[str]) -> contextlib.AbstractContextManager[None]:
    """With `-v` before the command (where `hoist_global_options` puts it), the core's
    `ai_sdlc` DEBUG log records become debug lines for the whole command."""
    index = _command_index(argv)
    globals_ = argv[:index] if index is not None else argv
    if not any(arg in ("-v", "--verbose") for arg in globals_):
        return contextlib.nullcontext()
    from ai_sdlc.cli.terminal import Terminal

    return Terminal(verbosity=VERBOSE).debug_logging()


def fail(
    application: Application, message: str, *, hint: str | None = None, exit_code: int
) -> NoReturn:
    """Report a failure (stderr; plus the final NDJSON error event in `--json` mode) and
    exit with `exit_code`."""
    terminal = application.terminal(application.json_mode)
    terminal.error(message, hint=hint)
    if application.json_mode:
        terminal.error_event(message, hint=hint, exit_code=exit_code)
    sys.exit(exit_code)


def _handle_click_exception(application: Application, exc: Exception) -> None:
    from ai_sdlc.errors import ExitCode

    # typer vendors click; its exceptions carry `exit_code` and `show()`.
    show = getattr(exc, "show", None)
    exit_code = getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        message = getattr(exc, "message", None)
        if isinstance(message, str):
            from ai_sdlc.cli.helptext import plain_error

            exc.message = plain_error(message)  # type: ignore[attr-defined]
        show()
        if application.json_mode:
            message = getattr(exc, "format_message", lambda: str(exc))()
            application.terminal(True).error_event(
                str(message), hint=_usage_hint(application), exit_code=exit_code
            )
        sys.exit(exit_code)
    if type(exc).__name__ == "Abort":
        fail(application, "aborted", exit_code=int(ExitCode.INTERRUPTED))
    if os.environ.get("AI_SDLC_DEBUG"):
        raise exc
    fail(
        application,
        f"internal error: {type(exc).__name__}: {exc}",
        hint="this is a bug in ai-sdlc; run again with AI_SDLC_DEBUG=1 for the traceback "
        "and report it",
        exit_code=int(ExitCode.FAILURE),
    )


def _usage_hint(application: Application) -> str:
    known = application.command in COMMANDS  # `ai-sdlc version --help` would be no help
    command = f"{PROG_NAME} {application.command}" if known else PROG_NAME
    return f"see '{command} --help'"
