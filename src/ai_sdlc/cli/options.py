"""The typer options several commands share (kept apart from `common`, which the typer-free
`run` path imports)."""

from __future__ import annotations

from typing import Annotated

import typer

#: The one output option: plain JSON on stdout instead of human output on stderr.
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON on stdout instead of human output.")
]
#: The options `run` and `watch` share.
JobsOption = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        max=64,
        help="Stories run at once in a multi-story run, each in a worker process "
        "(default: run.jobs).",
    ),
]
NoSandboxOption = Annotated[
    bool,
    typer.Option(
        "--no-sandbox",
        help="Run agents and verification commands without the write sandbox (they can then "
        "change anything you can, the ledger and config included; see docs/sandbox.md).",
    ),
]
NoWorktreeOption = Annotated[
    bool,
    typer.Option(
        "--no-worktree",
        help="Let agents work in the project folder itself (no worktree, branch, commits or "
        "rollback; unsafe for unattended runs).",
    ),
]
