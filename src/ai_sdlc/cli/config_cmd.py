"""`ai-sdlc config [key] [value]`: read or set dotted keys in .ai-sdlc/config.yaml
(comments are kept)."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.common import JsonOption, open_store, terminal
from ai_sdlc.cli.terminal import to_json
from ai_sdlc.config import get_value, load_config, set_value


def config(
    key: Annotated[
        str | None, typer.Argument(help="Dotted key, e.g. limits.global_recovery.")
    ] = None,
    value: Annotated[str | None, typer.Argument(help="New value (read as YAML).")] = None,
    json: JsonOption = False,
) -> None:
    """Show the effective config, one key, or set a key."""
    out = terminal(json)
    store = open_store(check_config=value is None)
    if key is None:
        data = load_config(store.root).data
        if json:
            out.json(data)
        else:
            out.result(to_json(data, indent=2))
        return
    if value is None:
        current = get_value(store.root, key)
        if json:
            out.json({key: current})
        else:
            out.result(current if isinstance(current, str) else to_json(current))
        return
    new = set_value(store.root, key, value)
    if json:
        out.json({key: new})
    else:
        out.success(f"{key} = {to_json(new)}")


def register(app: typer.Typer) -> None:
    app.command("config")(config)
