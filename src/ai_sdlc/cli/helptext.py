"""Help in a person's words: every `--help` names values by what they are (`STORY`, `N`,
`FILE`, `[refine|plan]`), never by a Python type (`<str>`, `<list[str]>`, `<int range>`), shows
each command's summary whole (wrapped, not cut with `...`) and ends with one example.

typer derives a value's name from its annotation; `humanise` renames them on the click command
typer builds, once per command object, before help or an error names one. The examples live
beside each command's summary in `cli.app.COMMANDS` (the top-level ones) and in
`SUB_EXAMPLES` here (sub-commands such as `runs show`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from typer._click.types import FloatParamType, IntParamType

#: One example per sub-command ("group sub" → command line), shown at the end of its help.
SUB_EXAMPLES: dict[str, str] = {
    "runs show": "ai-sdlc runs show R-0003",
    "worktrees prune": "ai-sdlc worktrees prune --force",
    "worktrees venv": "ai-sdlc worktrees venv",
    "import github": "ai-sdlc import github --label bug --limit 20",
}

#: Marks a click command already renamed (typer's command tree is reused within a process).
_DONE = "_ai_sdlc_humanised"


def humanise(command: Any, path: str, examples: Mapping[str, str]) -> None:
    """Give `command` (`path`: its words after `ai-sdlc`, "" for the root) and its
    sub-commands plain value names, whole summaries and their example (`examples[path]`) as
    the help's last line."""
    if getattr(command, _DONE, False):
        return
    setattr(command, _DONE, True)
    example = examples.get(path)
    if example and not command.epilog:
        command.epilog = f"\b\nExample: {example}"  # \b: printed as it is, never re-wrapped
    for param in command.params:
        _rename(param)
    for name, sub in getattr(command, "commands", {}).items():
        if sub.help and not sub.short_help:  # listed whole (click would cut it with "...")
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        humanise(sub, f"{path} {name}".strip(), examples)


def value_name(param: Any) -> str | None:
    """How help names the value `param` takes (None for a flag), from the click type typer
    gave it (`param.type`: a choice, a whole number, a number, a path)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    kind = param.type
    choices = getattr(kind, "choices", None)
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    if isinstance(kind, IntParamType):
        return "N"
    if isinstance(kind, FloatParamType):
        return "NUMBER"
    if hasattr(kind, "file_okay") and hasattr(kind, "dir_okay"):  # typer's path type
        if not kind.file_okay:
            return "FOLDER"
        return "FILE" if not kind.dir_okay else "PATH"
    return str(param.name or "value").upper()


def _rename(param: Any) -> None:
    name = value_name(param)
    if param.param_type_name == "argument":
        if param.metavar is None:
            param.metavar = name
        # typer prints an argument as `name <type>`: the name alone says it.
        param.display_type_rich = lambda ctx: None
    elif name is not None and param.metavar is None:
        param.metavar = name


#: click's wording for a value out of range or of the wrong kind → ours, in a usage error.
_PLAIN_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^.* is not in the range (\S+?)<=x<=(\S+?)\.?$"), r"must be from \1 to \2"),
    (re.compile(r"^.* is not in the range x>=(\S+?)\.?$"), r"must be \1 or more"),
    (re.compile(r"^.* is not in the range x<=(\S+?)\.?$"), r"must be \1 or less"),
    (re.compile(r"^.* is not in the range x>(\S+?)\.?$"), r"must be more than \1"),
    (re.compile(r"^.* is not in the range x<(\S+?)\.?$"), r"must be less than \1"),
    (re.compile(r"^.* is not a valid int( range)?\.?$"), "must be a whole number"),
    (re.compile(r"^.* is not a valid float( range)?\.?$"), "must be a number"),
)


def plain_error(message: str) -> str:
    """A usage error's message in a person's words (`-1 is not in the range x>=0.` → `must be
    0 or more`, `'x' is not a valid int.` → `must be a whole number`)."""
    for pattern, replacement in _PLAIN_ERRORS:
        message = pattern.sub(replacement, message)
    return message
