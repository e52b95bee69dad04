"""The one place that writes to the terminal.

Two streams, as every CLI our users know: **stdout carries what was asked** (the board, a
story, a log, doctor's checklist, a config value, the path a report was written to, the id
`add` made, `run`'s final result line, and all `--json` output); **stderr carries everything
else** (notes, progress, warnings, errors, debug lines). So `ai-sdlc status | grep power`
finds the story and `ai-sdlc show S-0003 > f` writes it, while progress still reaches the
screen.

The API says which is which: `data`, `table` and `result` write to stdout; `info`, `progress`,
`warn`, `alert`, `error`, `debug` and `status` to stderr; `json`/`ndjson` are the machine output.
In `--json` mode stdout carries the JSON alone: a human line a command still prints there (a
run's outcome lines) goes to stderr. Each stream is rich only when it is a terminal (and TERM
is not `dumb`), plain text when piped or redirected; NO_COLOR drops colour.

Everything written to either stream is redacted on its way out (`RedactingStream`): callers
never need to remember to.

Verbosity (`-q` / `-v`): quiet keeps errors and what was asked (`error`, `alert`, stdout: `data`,
`table`, `result`, JSON) and drops notes, warnings and progress (`info`, `warn`, `progress`,
`status`); verbose adds `debug` lines, including whatever the core logs on the `ai_sdlc`
logger at DEBUG level.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ai_sdlc.secrets import redact

if TYPE_CHECKING:
    from rich.console import Console

QUIET, NORMAL, VERBOSE = -1, 0, 1


def _json_default(value: Any) -> Any:
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_json(value: Any, *, indent: int | None = None) -> str:
    """JSON text for any value we print: dates as ISO strings, no ANSI, UTF-8 kept."""
    return json.dumps(value, default=_json_default, ensure_ascii=False, indent=indent)


class RedactingStream:
    """A text stream that masks secrets in everything written through it: the terminal layer's
    one seam, so no progress line, error, debug line, table or `--json` event reaches a stream
    with a secret in it, whoever formatted it. (rich writes each printed renderable, and the
    live status each refresh, in one `write`; our own lines are one `write` each.)"""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        #: The reader went away (`| head` exited): the output ends here, never the work.
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                self._stream.write(redact(text))
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        """A closed pipe: drop the rest of the output, so the run goes on and the command
        ends with its own exit code (`closed_output`)."""
        self.closed_by_reader = True
        closed_output(self._stream)

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def closed_output(stream: IO[str]) -> None:
    """The reader of `stream` went away: point its file descriptor at /dev/null, so what is
    still buffered, and the interpreter's own flush at exit, write nowhere instead of raising
    `BrokenPipeError` (which would abort a run or end the command with a random exit code)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def flush_quietly(*streams: IO[str]) -> None:
    """Flush the process's streams at the end of a command; a reader that went away ends
    the output (`closed_output`), not the command's exit code."""
    for stream in streams:
        try:
            stream.flush()
        except BrokenPipeError:
            closed_output(stream)
        except (OSError, ValueError):
            pass


def _rich_stream(stream: IO[str]) -> bool:
    """True when `stream` is a terminal rich may style (not a pipe, a file or TERM=dumb)."""
    return stream.isatty() and os.environ.get("TERM") != "dumb"


class Terminal:
    def __init__(
        self,
        *,
        json_mode: bool = False,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        verbosity: int = NORMAL,
    ) -> None:
        self.json_mode = json_mode
        self.verbosity = verbosity
        self._stdout: IO[str] = RedactingStream(stdout if stdout is not None else sys.stdout)  # type: ignore[assignment]
        self._stderr: IO[str] = RedactingStream(stderr if stderr is not None else sys.stderr)  # type: ignore[assignment]
        #: stderr is a terminal: progress may use a spinner and colour.
        self.is_tty = _rich_stream(self._stderr)
        #: stdout is a terminal: data may be a rich table; plain lines when piped.
        self.data_is_tty = _rich_stream(self._stdout)
        self._console: Console | None = None
        self._data_console: Console | None = None

    def _make_console(self, stream: IO[str], tty: bool) -> Console:
        from rich.console import Console

        return Console(
            file=stream,
            highlight=False,
            no_color=bool(os.environ.get("NO_COLOR")),
            force_terminal=None if tty else False,
            soft_wrap=not tty,
            emoji=False,
        )

    @property
    def console(self) -> Console:
        """rich on stderr (progress, spinners), made on first need: plain lines to a pipe or
        file never import it (~17 ms)."""
        if self._console is None:
            self._console = self._make_console(self._stderr, self.is_tty)
        return self._console

    @property
    def data_console(self) -> Console:
        """rich on stdout (tables of data), made on first need."""
        if self._data_console is None:
            self._data_console = self._make_console(self._stdout, self.data_is_tty)
        return self._data_console

    @property
    def quiet(self) -> bool:
        return self.verbosity <= QUIET

    @property
    def verbose(self) -> bool:
        return self.verbosity >= VERBOSE

    # --- what was asked (stdout; kept by -q) ---------------------------------------------
    def data(self, text: str = "", *, style: str | None = None) -> None:
        """A line of what the user asked for (a board row, a story field, a log entry)."""
        self._write(text, style, data=True)

    def table(self, renderable: Any) -> None:
        """A rich renderable (table, panel) of data, for a terminal on stdout; callers print
        plain `data` lines instead when `data_is_tty` is false, so a pipe gets greppable rows."""
        self.data_console.print(renderable)

    def result(self, text: str, *, style: str | None = None) -> None:
        """The command's final result line (the id `add` made, `run`'s outcome, the path a
        report went to): what `-q` keeps, and what a script reads."""
        self.data(text, style=style)

    def success(self, text: str) -> None:
        """A result that is good news: `result` in green."""
        self.result(text, style="green")

    # --- everything else (stderr) ---------------------------------------------------------
    def _write(self, text: str, style: str | None, *, data: bool) -> None:
        if data and self.json_mode:  # stdout carries the JSON alone; a human line goes aside
            data = False
        stream, tty = (self._stdout, self.data_is_tty) if data else (self._stderr, self.is_tty)
        if not tty:  # a pipe or a file: the text as it is, one line
            stream.write(text + "\n")
            stream.flush()
            return
        from rich.markup import escape

        (self.data_console if data else self.console).print(escape(text), style=style)

    def _diagnostic(self, text: str, style: str | None = None) -> None:
        self._write(text, style, data=False)

    def info(self, text: str, *, style: str | None = None) -> None:
        """A note on the way (stderr; dropped by `-q`)."""
        if not self.quiet:
            self._diagnostic(text, style)

    def warn(self, text: str) -> None:
        """A warning (stderr; dropped by `-q`)."""
        if not self.quiet:
            self._diagnostic(f"warning: {text}", "yellow")

    def progress(self, text: str, *, style: str | None = None) -> None:
        """A live progress line (stderr; dropped by `-q`)."""
        if not self.quiet:
            self._diagnostic(text, style)

    def debug(self, text: str) -> None:
        """Only with `-v`: what was decided and why (provider, model, project, policy)."""
        if self.verbose:
            self._diagnostic(f"debug: {text}", "dim")

    @contextmanager
    def debug_logging(self) -> Iterator[None]:
        """With `-v`, show the `ai_sdlc` logger's DEBUG records as debug lines meanwhile."""
        if not self.verbose:
            yield
            return
        import logging

        terminal = self

        class _ToTerminal(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                terminal.debug(record.getMessage())

        logger = logging.getLogger("ai_sdlc")
        handler, level = _ToTerminal(logging.DEBUG), logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)

    def alert(self, text: str, *, style: str | None = None) -> None:
        """What goes with an error and must survive `-q` (a failure loop's details, how to
        continue an interrupted run): stderr, no prefix."""
        self._diagnostic(text, style)

    def error(self, text: str, *, hint: str | None = None) -> None:
        """An error (stderr; kept by `-q`)."""
        self._diagnostic(f"error: {text}", "bold red")
        if hint:
            self._diagnostic(f"  hint: {hint}")

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner on a terminal; one plain line otherwise (stderr; dropped by `-q`)."""
        if self.quiet:
            yield
        elif self.is_tty and not self.json_mode:
            from rich.markup import escape

            with self.console.status(escape(text)):
                yield
        else:
            self._diagnostic(text)
            yield

    # --- machine output (stdout) -------------------------------------------------------
    def json(self, value: Any) -> None:
        self._stdout.write(to_json(value) + "\n")
        self._stdout.flush()

    def ndjson(self, value: Any) -> None:
        self._stdout.write(to_json(value) + "\n")
        self._stdout.flush()

    def error_event(self, message: str, *, hint: str | None, exit_code: int) -> None:
        """The last line of a failed `--json` command: why it stopped, as NDJSON."""
        event = {"event": "error", "message": message, "hint": hint}
        self.ndjson({**event, "exit_code": exit_code})
