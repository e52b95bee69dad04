"""The `worktree.setup` that `init` proposes (and the wrong-tree guard suggests) for what a
project's files show: each ecosystem's usual install from its lock file, run in the worktree.

A story worktree holds only what git tracks: a lock file that `.gitignore` ignores is not
there, so an install that needs it (`npm ci` "can only install with an existing
package-lock.json") is never proposed; the next install that can run is, and `notes` say why."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec

#: The layered venv recipe (see `pyvenv`): ~0.1 s and ~100 KB per worktree on top of the
#: project's own `.venv`; a full venv + `pip install -e .[dev]` where there is none.
PYTHON_RECIPE = "ai-sdlc worktrees venv"

#: (file that shows the tool, its install command), first match per ecosystem wins.
_PYTHON = (
    ("uv.lock", "uv sync --frozen"),
    ("pyproject.toml", PYTHON_RECIPE),
    ("setup.py", PYTHON_RECIPE),
    ("setup.cfg", PYTHON_RECIPE),
)
_NODE = (
    ("pnpm-lock.yaml", "pnpm install --frozen-lockfile"),
    ("yarn.lock", "yarn install --frozen-lockfile"),
    ("bun.lockb", "bun install --frozen-lockfile"),
    ("package-lock.json", "npm ci"),
    ("npm-shrinkwrap.json", "npm ci"),
    # No lock file to install from: one written into the worktree would be taken for the
    # agent's work (and refused as setup output), so none is written.
    ("package.json", "npm install --no-package-lock"),
)


class Proposal(msgspec.Struct, frozen=True):
    commands: list[str]
    #: What each command was proposed for (`pyproject.toml`, `package-lock.json`).
    found: list[str]
    #: Why an install the files suggest was not proposed (a lock file git ignores).
    notes: list[str] = msgspec.field(default_factory=list)

    def config_line(self) -> str:
        """The `  setup: ...` line of config.yaml, with a comment saying why."""
        from ai_sdlc.config import DEFAULT_SETUP_LINE

        if not self.commands:
            return DEFAULT_SETUP_LINE
        value = json.dumps(self.commands)
        return f"  setup: {value}  # proposed by `ai-sdlc init` for {', '.join(self.found)}"


def propose(
    project: Path,
    which: Callable[[str], str | None] = shutil.which,
    ignored: Callable[[Path, str], str | None] | None = None,
) -> Proposal:
    """The setup for the files in `project` (empty when nothing needs installing). A tool that
    is not installed here is not proposed: `uv.lock` without `uv` on PATH falls back to the
    layered venv recipe. That recipe is proposed only where the project has a venv to layer
    on (one made by `python -m venv`, uv, poetry in-project...): without one, verification runs
    an interpreter of the machine's, the same in every worktree, and a venv per worktree would
    cost a full install each. A file git ignores (`ignored`: the rule that ignores it) proposes
    nothing: a worktree would not have it."""
    from ai_sdlc.worktree_env.pyvenv import find_base_venv

    rule_of = ignored or ignore_rule
    commands: list[str] = []
    found: list[str] = []
    notes: list[str] = []
    for table in (_PYTHON, _NODE):
        for name, command in table:
            if not (project / name).is_file():
                continue
            rule = rule_of(project, name)
            if rule is not None:
                notes.append(
                    f"{name} is ignored by git ({rule}), so a story worktree has none: "
                    f"`{command}` is not proposed"
                )
                continue
            if command.startswith("uv ") and which("uv") is None:
                command = PYTHON_RECIPE
            if command == PYTHON_RECIPE and find_base_venv(project) is None:
                break
            commands.append(command)
            found.append(name)
            break
    return Proposal(commands, found, notes)


def ignore_rule(project: Path, name: str) -> str | None:
    """The `.gitignore` rule (`.gitignore:3: package-lock.json`) that makes git ignore `name`
    in `project`; None when git does not ignore it (or `project` is not in a repository)."""
    from ai_sdlc.git.run import GitError, run

    try:
        done = run(["git", "check-ignore", "-v", "--", name], project, check=False)
    except (GitError, OSError, ValueError):
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    source, _, _path = done.stdout.strip().partition("\t")
    where, _, pattern = source.rpartition(":")
    return f"{where}: {pattern}" if where else source
