"""The one place that writes to the terminal.

Human output and errors go to stderr (rich when a terminal is attached, plain text otherwise,
no colour under NO_COLOR); machine output (`--json`) goes to stdout as plain JSON or NDJSON.

Everything written to either stream is redacted on its way out (`RedactingStream`): callers
never need to remember to.

Verbosity (`-q` / `-v`): quiet keeps errors and results (`error`, `success`, `line`, `render`,
stdout) and drops notes, warnings and progress (`info`, `warn`, `progress`, `status`); verbose
adds `debug` lines, including whatever the core logs on the `ai_sdlc` logger at DEBUG level.
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

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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
        self.is_tty = self._stderr.isatty()
        #: stdout is a terminal: data may be a rich table; plain lines when piped.
        self.data_is_tty = _rich_stream(self._stdout)
        self._console: Console | None = None
        self._data_console: Console | None = None

    @property
    def console(self) -> Console:
        """rich, made on first need: plain lines to a pipe or file never import it (~17 ms)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                file=self._stderr,
                highlight=False,
                no_color=bool(os.environ.get("NO_COLOR")),
                force_terminal=None if self.is_tty else False,
                soft_wrap=not self.is_tty,
                emoji=False,
            )
        return self._console

    @property
    def data_console(self) -> Console:
        """rich on stdout (tables of data), made on first need."""
        if self._data_console is None:
            from rich.console import Console

            self._data_console = Console(
                file=self._stdout,
                highlight=False,
                no_color=bool(os.environ.get("NO_COLOR")),
                force_terminal=None if self.data_is_tty else False,
                soft_wrap=not self.data_is_tty,
                emoji=False,
            )
        return self._data_console

    # --- what was asked (stdout; kept by -q) ---------------------------------------------
    def data(self, text: str = "", *, style: str | None = None) -> None:
        """A line of what the user asked for (a board row, a story field, a log entry)."""
        if self.json_mode or not self.data_is_tty:
            stream = self._stderr if self.json_mode else self._stdout
            stream.write(text + "\n")
            stream.flush()
            return
        from rich.markup import escape

        self.data_console.print(escape(text), style=style)

    def table(self, renderable: Any) -> None:
        """A rich renderable (table, panel) of data, for a terminal on stdout."""
        self.data_console.print(renderable)

    # --- human output (stderr) ---------------------------------------------------------
    def line(self, text: str = "", *, style: str | None = None) -> None:
        if not self.is_tty:  # a pipe or a file: the text as it is, one line
            self._stderr.write(text + "\n")
            self._stderr.flush()
            return
        from rich.markup import escape

        if style:
            self.console.print(escape(text), style=style)
        else:
            self.console.print(escape(text))

    @property
    def quiet(self) -> bool:
        return self.verbosity <= QUIET

    @property
    def verbose(self) -> bool:
        return self.verbosity >= VERBOSE

    def info(self, text: str) -> None:
        """A note on the way (dropped by `-q`)."""
        if not self.quiet:
            self.line(text)

    def success(self, text: str) -> None:
        """A final result (kept by `-q`)."""
        self.line(text, style="green")

    def warn(self, text: str) -> None:
        if not self.quiet:
            self.line(f"warning: {text}", style="yellow")

    def progress(self, text: str, *, style: str | None = None) -> None:
        """A live progress line (dropped by `-q`)."""
        if not self.quiet:
            self.line(text, style=style)

    def debug(self, text: str) -> None:
        """Only with `-v`: what was decided and why (provider, model, project, policy)."""
        if self.verbose:
            self.line(f"debug: {text}", style="dim")

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

    def error(self, text: str, *, hint: str | None = None) -> None:
        self.line(f"error: {text}", style="bold red")
        if hint:
            self.line(f"  hint: {hint}")

    def render(self, renderable: Any) -> None:
        """Print a rich renderable (table, panel) to stderr."""
        self.console.print(renderable)

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner on a terminal; one plain line otherwise."""
        if self.quiet:
            yield
        elif self.is_tty and not self.json_mode:
            from rich.markup import escape

            with self.console.status(escape(text)):
                yield
        else:
            self.line(text)
            yield

    # --- machine output (stdout) -------------------------------------------------------
    def json(self, value: Any) -> None:
        self._stdout.write(to_json(value) + "\n")
        self._stdout.flush()

    def result(self, text: str) -> None:
        """A plain result line on stdout, for scripts (e.g. the id `add` created)."""
        self._stdout.write(text + "\n")
        self._stdout.flush()

    def ndjson(self, value: Any) -> None:
        self._stdout.write(to_json(value) + "\n")
        self._stdout.flush()

    def error_event(self, message: str, *, hint: str | None, exit_code: int) -> None:
        """The last line of a failed `--json` command: why it stopped, as NDJSON."""
        event = {"event": "error", "message": message, "hint": hint}
        self.ndjson({**event, "exit_code": exit_code})
