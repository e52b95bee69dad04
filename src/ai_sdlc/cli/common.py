"""Pieces every command shares beside its `Application` (`cli/application.py`: the terminal,
the store, the config): the provider check and the missing-project error. The shared typer
options are in `cli/options.py`."""

from __future__ import annotations

from ai_sdlc.errors import AiSdlcError


def checked_provider(name: str | None) -> str | None:
    """`--provider` as given, once it names a known provider (UsageError, exit 2, otherwise)."""
    from ai_sdlc.errors import UsageError
    from ai_sdlc.providers.settings import PROVIDER_NAMES

    if name is not None and name.strip().lower() not in PROVIDER_NAMES:
        raise UsageError(
            f"unknown provider '{name}'", hint="use one of " + ", ".join(PROVIDER_NAMES)
        )
    return name


class NotInitializedError(AiSdlcError):
    """The command needs a project and none was found (exit 1)."""
