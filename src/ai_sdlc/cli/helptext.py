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
from typing import Any, get_args

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
    """How help names the value `param` takes (None for a flag), from typer's description of
    its annotation."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    desc = param.type_descriptor
    if desc.choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    annotation = desc.annotation
    if desc.is_list and get_args(annotation):
        annotation = get_args(annotation)[0]
    if annotation is int:
        return "N"
    if annotation is float:
        return "NUMBER"
    if desc.is_path:
        info = desc.parameter_info
        if not info.file_okay:
            return "FOLDER"
        return "FILE" if not info.dir_okay else "PATH"
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


#: typer's validation wording (pydantic's) → ours, in a usage error's message.
_PLAIN_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Input should be greater than or equal to (\S+?)\.?$"), r"must be \1 or more"),
    (re.compile(r"Input should be less than or equal to (\S+?)\.?$"), r"must be \1 or less"),
    (re.compile(r"Input should be greater than (\S+?)\.?$"), r"must be more than \1"),
    (re.compile(r"Input should be less than (\S+?)\.?$"), r"must be less than \1"),
    (re.compile(r"Input should be a valid integer.*$"), "must be a whole number"),
    (re.compile(r"Input should be a valid number.*$"), "must be a number"),
    (re.compile(r"Value error, "), ""),
)


def plain_error(message: str) -> str:
    """A usage error's message without a validation library's wording (`Input should be
    greater than or equal to 0` → `must be 0 or more`, no `Value error, ` prefix)."""
    for pattern, replacement in _PLAIN_ERRORS:
        message = pattern.sub(replacement, message)
    return message
