"""Pieces every command shares: the terminal, the project's store, the provider check.

The shared typer options are in `cli/options.py`."""

from __future__ import annotations

from pathlib import Path

from ai_sdlc.cli.app import STATE, project_root
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.config import load_config
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.store import StoryStore


def checked_provider(name: str | None) -> str | None:
    """`--provider` as given, once it names a known provider (UsageError, exit 2, otherwise)."""
    from ai_sdlc.config import PROVIDER_CHOICES
    from ai_sdlc.errors import UsageError

    if name is not None and name.strip().lower() not in PROVIDER_CHOICES:
        raise UsageError(
            f"unknown provider '{name}'", hint="use one of " + ", ".join(PROVIDER_CHOICES)
        )
    return name


def terminal(json_mode: bool = False) -> Terminal:
    """The command's terminal, honouring the global `-q`/`-v`."""
    if json_mode:
        STATE.json_mode = True  # a failure then ends stdout with the NDJSON error event
    return Terminal(json_mode=json_mode, verbosity=STATE.verbosity)


class NotInitializedError(AiSdlcError):
    pass


def open_store(
    *, must_exist: bool = True, read_only: bool = False, check_config: bool = True
) -> StoryStore:
    """The project's store; `read_only` also keeps the listing cache unwritten (dry runs);
    `check_config=False` lets `ai-sdlc config key value` repair a broken config.yaml."""
    store = StoryStore(project_root(), write_cache=not read_only)
    if must_exist and not store.is_initialized():
        where = f"{store.root}" if STATE.project_source == "option" else f"{store.root} or above"
        raise NotInitializedError(
            f"no ai-sdlc project in {where}",
            hint="run 'ai-sdlc init' in the project's folder, or pass -C <folder>",
        )
    if STATE.project_source == "found":
        terminal().debug(f"project {store.root} (found from {Path.cwd()})")
    if must_exist and check_config:
        load_config(store.root)  # a broken config.yaml is reported by every command (exit 3)
    return store
