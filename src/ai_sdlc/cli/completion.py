"""Shell completion of story ids and config keys (typer's `autocompletion`; install with
`ai-sdlc --install-completion`; `log --kind` values are completed by `log.log_kinds`).

Completion runs on every Tab press, so it is fast and never fails: story ids come from the
folder names under `.ai-sdlc/stories` (a title from the first lines of each story file, for
zsh's descriptions), no story is parsed or validated, and any error (a broken story file, an
unreadable folder) completes less instead of printing a traceback into the user's prompt.
Outside a project it completes no story id."""

from __future__ import annotations

import os
import re
from pathlib import Path

import typer

from ai_sdlc.cli.app import PROJECT_MARKER, find_project

_STORY_DIR = re.compile(r"^S-\d+$")
#: Bytes of a story file read for its title (the front matter's `title:` comes early).
_HEAD_BYTES = 2048


def _project(ctx: typer.Context) -> Path | None:
    """The project the command line names (`-C`, AI_SDLC_PROJECT) or the nearest one."""
    chosen = ctx.find_root().params.get("project")
    if chosen:
        folder = Path(chosen).expanduser()
        return folder if folder.joinpath(*PROJECT_MARKER).is_dir() else None
    home = os.environ.get("HOME")
    return find_project(Path.cwd(), Path(home) if home else None)


def _title(folder: Path) -> str:
    try:
        with (folder / "story.md").open("rb") as file:
            head = file.read(_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    for line in head.splitlines()[1:]:
        if line.startswith("title:"):
            return line[len("title:") :].strip().strip("'\"")
        if line.strip() == "---":
            break
    return ""


def story_ids(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Story ids starting with `incomplete`, each with its title."""
    try:
        project = _project(ctx)
        if project is None:
            return []
        stories = project.joinpath(*PROJECT_MARKER)
        names = sorted(
            entry.name
            for entry in os.scandir(stories)
            if _STORY_DIR.match(entry.name) and entry.name.startswith(incomplete)
        )
        return [(name, _title(stories / name)) for name in names]
    except Exception:  # completion must never fail (see the module docstring)
        return []


def config_keys(incomplete: str) -> list[tuple[str, str]]:
    """Dotted config keys starting with `incomplete`, each with its description."""
    try:
        from ai_sdlc.config import SCHEMA

        return [
            (key, str(getattr(setting, "doc", "") or ""))
            for key, setting in SCHEMA.items()
            if key.startswith(incomplete)
        ]
    except Exception:  # completion must never fail
        return []


def provider_names(incomplete: str) -> list[str]:
    """`--provider` values starting with `incomplete` (the registry's names)."""
    from ai_sdlc.providers.settings import PROVIDER_NAMES

    return [name for name in PROVIDER_NAMES if name.startswith(incomplete.lower())]
