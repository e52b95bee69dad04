"""`ai-sdlc config [key] [value]`: show the effective config (every key with its source), one
key, or set a key in .ai-sdlc/config.yaml (or, with `--user`, in the user's config file);
comments are kept, secrets are refused in files and masked in output."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.completion import config_keys
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal, to_json
from ai_sdlc.config import get_value, load_config, mask_setting, set_value, user_config_path
from ai_sdlc.config.guard import GuardrailRecord, is_guarded, shown
from ai_sdlc.errors import UsageError

UserOption = Annotated[
    bool,
    typer.Option(
        "--user",
        help="Write the user's config file (every project on this machine) instead of the "
        "project's.",
    ),
]

AcceptOption = Annotated[
    bool,
    typer.Option(
        "--accept",
        help="Accept the guardrail settings (limits, verify, gates, sandbox, worktree) of the "
        "config files as they are now, after they were changed by hand.",
    ),
]


def config(
    ctx: typer.Context,
    key: Annotated[
        str | None,
        typer.Argument(help="Dotted key, e.g. limits.global_recovery.", autocompletion=config_keys),
    ] = None,
    value: Annotated[str | None, typer.Argument(help="New value (read as YAML).")] = None,
    user: UserOption = False,
    accept: AcceptOption = False,
    json: JsonOption = False,
) -> None:
    """Show the effective config with each key's source, one key, or set a key."""
    app = Application.of(ctx)
    out = app.terminal(json)
    if accept:
        if key is not None or user:
            raise UsageError(
                "--accept takes no key, value or --user: it accepts the config files as they are",
                hint="ai-sdlc config --accept",
            )
        _accept(app, out, json)
        return
    if user and value is None:
        raise UsageError(
            "--user writes a setting: it needs a key and a value",
            hint="e.g. ai-sdlc config --user ai.provider anthropic",
        )
    if user:
        from ai_sdlc.store import StoryStore

        store = StoryStore(app.project, write_cache=False)
        new = set_value(store.root, key or "", value or "", user=True)
        _record(store.root, key or "")
        _print_set(out, key or "", new, json, f" (in {user_config_path()})")
        return
    store = app.store(check_config=value is None)
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
    _record(store.root, key)
    _print_set(out, key, new, json, "")


def _record(root: Path, key: str) -> None:
    """A guardrail key set through this command is accepted as set (see `configguard`)."""
    if is_guarded(key):
        GuardrailRecord(root).accept(key)


def _accept(app: Application, out: Terminal, json: bool) -> None:
    store = app.store()
    changed = GuardrailRecord(store.root).accept()
    listed = {k: [shown(a), shown(b)] for k, (a, b) in changed.items()}
    if json:
        out.json({"accepted": listed})
        return
    if not listed:
        out.success("the guardrail settings already match the accepted ones")
        return
    for key, (before, now) in listed.items():
        out.success(f"accepted {key}: {before} -> {now}")


def _print_set(out: Terminal, key: str, new: object, json: bool, where: str) -> None:
    if json:
        out.json({key: mask_setting(key, new)})
    else:
        out.success(f"{key} = {to_json(mask_setting(key, new))}{where}")


def register(app: typer.Typer) -> None:
    app.command("config")(config)
