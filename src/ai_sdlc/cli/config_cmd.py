"""`ai-sdlc config [key] [value]`: show the effective config (every key with its source), one
key, or set a key in .ai-sdlc/config.yaml (or, with `--user`, in the user's config file);
comments are kept, secrets are refused in files and masked in output."""

from __future__ import annotations

from typing import Annotated

import typer

from ai_sdlc.cli.app import project_root
from ai_sdlc.cli.common import open_store, terminal
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal, to_json
from ai_sdlc.config import get_value, load_config, mask_setting, set_value, user_config_path
from ai_sdlc.errors import UsageError

UserOption = Annotated[
    bool,
    typer.Option(
        "--user",
        help="Write the user's config file (every project on this machine) instead of the "
        "project's.",
    ),
]


def config(
    key: Annotated[
        str | None, typer.Argument(help="Dotted key, e.g. limits.global_recovery.")
    ] = None,
    value: Annotated[str | None, typer.Argument(help="New value (read as YAML).")] = None,
    user: UserOption = False,
    json: JsonOption = False,
) -> None:
    """Show the effective config with each key's source, one key, or set a key."""
    out = terminal(json)
    if user and value is None:
        raise UsageError(
            "--user writes a setting: it needs a key and a value",
            hint="e.g. ai-sdlc config --user ai.provider anthropic",
        )
    if user:
        from ai_sdlc.store import StoryStore

        store = StoryStore(project_root(), write_cache=False)
        new = set_value(store.root, key or "", value or "", user=True)
        _print_set(out, key or "", new, json, f" (in {user_config_path()})")
        return
    store = open_store(check_config=value is None)
    if key is None:
        loaded = load_config(store.root)
        settings = loaded.effective()
        if json:
            out.json(
                {
                    "files": {"user": str(loaded.user_path), "project": str(loaded.path)},
                    "settings": settings,
                }
            )
        else:
            for dotted, entry in settings.items():
                out.result(f"{dotted} = {to_json(entry['value'])}  ({entry['source']})")
        return
    if value is None:
        current = mask_setting(key, get_value(store.root, key))
        if json:
            out.json({key: current})
        else:
            out.result(current if isinstance(current, str) else to_json(current))
        return
    new = set_value(store.root, key, value)
    _print_set(out, key, new, json, "")


def _print_set(out: Terminal, key: str, new: object, json: bool, where: str) -> None:
    if json:
        out.json({key: mask_setting(key, new)})
    else:
        out.success(f"{key} = {to_json(mask_setting(key, new))}{where}")


def register(app: typer.Typer) -> None:
    app.command("config")(config)
