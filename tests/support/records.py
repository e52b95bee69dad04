"""A records folder for a test's stand-ins (agents, verify commands, tools) that write down
what they did: call logs, counters, pid markers.

The suite runs the product's real sandbox: a child may write its worktree, its private temp
folder and homes, and nothing else. A stand-in that records outside its worktree therefore
writes into a folder of its own that the test names in the project's `sandbox.writable`,
through `ai-sdlc config` before the first run, as a user widens the sandbox for a cache. The
folder sits beside the project and never holds it (a folder that holds the project would make
its `.ai-sdlc/` and git folder writable again)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli


def records_path(root: Path) -> Path:
    """Where `records_folder(root)` is: `<project>-records`, beside the project at `root` (for
    a config written before the project exists)."""
    return root.with_name(f"{root.name}-records")


def records_folder(root: Path, folder: Path | None = None) -> Path:
    """`folder` (by default `records_path(root)`), created, and added to the project's
    `sandbox.writable` (the folders it names already are kept). Call it once the test has
    written the config file by hand: `ai-sdlc config` records the guarded settings as accepted,
    so a later hand-edit would stop the run as a change nobody confirmed."""
    folder = records_path(root) if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    shown = run_cli(root, "config", "sandbox.writable", "--json")
    assert shown.returncode == 0, shown.output
    writable = [str(p) for p in json.loads(shown.stdout)["sandbox.writable"]]
    if str(folder) not in writable:
        done = run_cli(root, "config", "sandbox.writable", json.dumps([*writable, str(folder)]))
        assert done.returncode == 0, done.output
    return folder
