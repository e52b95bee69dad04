"""`Application`: what every command of one `ai-sdlc` invocation shares, in one object.

`main()` makes it from the command line (the command's name, `--json`) and hands it to click
as the context's `obj`; the root callback completes it with the global options (the project
folder, `-v`/`-q`). A command takes `ctx: typer.Context` and reaches it with
`Application.of(ctx)`: the project root, its terminal, its store and its config (loaded on
first use, once), and the clock. Nothing about an invocation is kept at module level, so two
invocations in one process (the tests' in-process runner) share nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ai_sdlc.cli.terminal import Terminal
    from ai_sdlc.config import Config
    from ai_sdlc.store import StoryStore

QUIET, NORMAL, VERBOSE = -1, 0, 1


class Application:
    """One invocation's project, output settings, store, config and clock."""

    def __init__(
        self,
        *,
        command: str | None = None,
        json_mode: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        #: The command being run (None for help, version, an unknown name): usage hints.
        self.command = command
        #: `--json` was given (or a command turned it on): a failure also ends stdout with an
        #: `{"event": "error", ...}` line.
        self.json_mode = json_mode
        #: The project folder; the current folder until the root callback chooses.
        self.project = Path.cwd()
        #: How it was chosen: "option" (-C / AI_SDLC_PROJECT), "found" (walked up), "cwd".
        self.project_source = "cwd"
        #: QUIET, NORMAL or VERBOSE.
        self.verbosity = NORMAL
        #: Wall-clock seconds (injectable for tests).
        self.clock = clock
        self._config: Config | None = None

    @classmethod
    def of(cls, ctx: Any) -> Application:
        """The invocation's application object from a click/typer context."""
        found = ctx.find_object(cls)
        if not isinstance(found, cls):
            raise RuntimeError("no Application in the click context (run through cli.app.main)")
        return found

    def choose_project(self, project: Path, source: str, verbosity: int) -> None:
        """Set by the root callback from `-C`/`AI_SDLC_PROJECT` or the walk up, and `-v`/`-q`."""
        self.project, self.project_source, self.verbosity = project, source, verbosity

    def terminal(self, json_mode: bool = False) -> Terminal:
        """The command's terminal, honouring `-q`/`-v`; `json_mode` also makes a failure end
        stdout with the NDJSON error event."""
        from ai_sdlc.cli.terminal import Terminal

        if json_mode:
            self.json_mode = True
        return Terminal(json_mode=json_mode, verbosity=self.verbosity)

    def config(self) -> Config:
        """The project's effective config, loaded on first use (a broken file raises here)."""
        if self._config is None:
            from ai_sdlc.config import load_config

            self._config = load_config(self.project)
        return self._config

    def store(
        self, *, must_exist: bool = True, read_only: bool = False, check_config: bool = True
    ) -> StoryStore:
        """The project's store; `read_only` also keeps the listing cache unwritten (dry runs);
        `check_config=False` lets `ai-sdlc config key value` repair a broken config.yaml."""
        from ai_sdlc.cli.common import NotInitializedError
        from ai_sdlc.store import StoryStore

        store = StoryStore(self.project, write_cache=not read_only)
        if must_exist and self.project_source == "option" and not store.root.is_dir():
            raise NotInitializedError(
                f"no such folder: {store.root}",
                hint="check the folder given to -C/--project (or AI_SDLC_PROJECT)",
            )
        if must_exist and not store.is_initialized():
            where = f"{store.root}" if self.project_source == "option" else f"{store.root} or above"
            raise NotInitializedError(
                f"no ai-sdlc project in {where}",
                hint="run 'ai-sdlc init' in the project's folder, or pass -C <folder>",
            )
        if self.project_source == "found":
            self.terminal().debug(f"project {store.root} (found from {Path.cwd()})")
        if must_exist and check_config:
            self.config()  # a broken config.yaml is reported by every command (exit 3)
        return store
