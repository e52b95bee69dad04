"""`ai-sdlc run <story>` without typer: the product's most common command line, read by hand.

Importing typer (and the click it vendors) costs about 45 ms of CPU, a fifth of what the tool
spends on a whole story run. This parser accepts only a narrow form whose meaning is not in
doubt, and hands everything else to typer:

    ai-sdlc [-C DIR | --project DIR | --project=DIR | -CDIR] [-v | -q] run STORY
            [--json] [--no-worktree] [--no-sandbox] [--provider NAME | --provider=NAME]

(global options may also follow `run`; `main()` has already moved them in front). One story,
each option known and spelled out, values that do not look like options. Anything else (help,
`--`, combined short flags, a second story, any other option, `-v` with `-q`, shell completion)
returns None and typer parses the line, so usage errors keep typer's wording. A test checks that
every line this accepts gives typer's own parse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.cli.app import COMPLETE_VAR

#: The variable typer reads `--project` from when the option is not given.
PROJECT_ENV = "AI_SDLC_PROJECT"
_RUN_FLAGS = {"--json": "json", "--no-worktree": "no_worktree", "--no-sandbox": "no_sandbox"}
_RUN_VALUES = {"--provider": "provider"}


class FastRun(msgspec.Struct):
    """A `run` line read without typer: the global options and `execute`'s keyword args."""

    project: Path | None = None
    verbose: bool = False
    quiet: bool = False
    story_refs: list[str] = msgspec.field(default_factory=list)
    options: dict[str, Any] = msgspec.field(default_factory=dict)


def parse(argv: list[str], environ: Mapping[str, str] | None = None) -> FastRun | None:
    """The line as a FastRun, or None when typer should read it. `argv` is after
    `hoist_global_options` (global options first)."""
    env = os.environ if environ is None else environ
    if COMPLETE_VAR in env:
        return None
    got = FastRun()
    words = iter(argv)
    for word in words:  # global options, up to the command name
        if word == "run":
            break
        if word in ("-C", "--project"):
            value = next(words, "")
            if not _plain_value(value):
                return None
            got.project = Path(value)
        elif word.startswith("--project=") or (word.startswith("-C") and len(word) > 2):
            value = word.split("=", 1)[1] if word.startswith("--") else word[2:]
            if not _plain_value(value):
                return None
            got.project = Path(value)
        elif word in ("-v", "--verbose"):
            got.verbose = True
        elif word in ("-q", "--quiet"):
            got.quiet = True
        else:
            return None
    else:
        return None  # no `run` command
    for word in words:  # run's own options and its story
        if word in _RUN_FLAGS:
            got.options[_RUN_FLAGS[word]] = True
        elif word in _RUN_VALUES or word.startswith(tuple(f"{o}=" for o in _RUN_VALUES)):
            name, equals, value = word.partition("=")
            if not equals:
                value = next(words, "")
            if not _plain_value(value):
                return None
            got.options[_RUN_VALUES[name]] = value
        elif _plain_value(word) and not got.story_refs:
            got.story_refs.append(word)
        else:
            return None
    if len(got.story_refs) != 1 or (got.verbose and got.quiet):
        return None
    if got.project is None and env.get(PROJECT_ENV):
        got.project = Path(env[PROJECT_ENV])
    return got


def _plain_value(value: str) -> bool:
    """A value click would take as it is: present, not empty, not option-like."""
    return bool(value) and not value.startswith("-")


def invoke(line: FastRun) -> int:
    """Run the parsed line exactly as typer would: the root callback's global options, then
    the `run` command's work. Returns the exit code."""
    from ai_sdlc.cli.app import apply_global_options
    from ai_sdlc.cli.run_command import execute

    apply_global_options(line.project, verbose=line.verbose, quiet=line.quiet)
    return execute(line.story_refs, **line.options)
