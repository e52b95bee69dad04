"""Pieces every command shares: the `--json` option, the terminal, the project's store."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.app import project_root
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.config import load_config
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.store import StoryStore

#: The one output option: plain JSON on stdout instead of human output on stderr.
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON on stdout instead of human output.")
]


def terminal(json_mode: bool = False) -> Terminal:
    return Terminal(json_mode=json_mode)


class NotInitializedError(AiSdlcError):
    pass


def open_store(
    *, must_exist: bool = True, read_only: bool = False, check_config: bool = True
) -> StoryStore:
    """The project's store; `read_only` also keeps the listing cache unwritten (dry runs);
    `check_config=False` lets `ai-sdlc config key value` repair a broken config.yaml."""
    store = StoryStore(project_root(), write_cache=not read_only)
    if must_exist and not store.is_initialized():
        raise NotInitializedError(
            f"no ai-sdlc project in {store.root}",
            hint="run 'ai-sdlc init' here, or pass --project <folder>",
        )
    if must_exist and check_config:
        load_config(store.root)  # a broken config.yaml is reported by every command (exit 3)
    return store
