"""A write sandbox for every process an agent or a verification runs.

Agents (CLI agents, `command` agents, our own agent loop's `run_command`) and the project's
`verify.*` commands are untrusted: they could lower the story's ledger, raise a limit in
`.ai-sdlc/config.yaml` or plant a git hook next to the worktree they work in. Every such child
is started by `ai_sdlc.spawn.start_session` with a `SandboxPolicy`: it may write only its
worktree, a private temp folder, its private tool home and caches in ai-sdlc's state folder
(`homes`) and `sandbox.writable`.
Reads, execution and the network stay open (agents need their API and the whole toolchain).

Why Landlock applied by a launcher (measured on Linux 6.18, Landlock ABI 7, see docs/sandbox.md):
- Landlock needs no root, no setuid helper and no package: three system calls. It is inherited
  by every grandchild, cannot be widened by the sandboxed code, and its rules are allow-lists by
  hierarchy, so a worktree inside the main checkout is writable while the checkout is not.
- bubblewrap also works (11-16 ms per process) but is a package most machines lack and needs
  unprivileged user namespaces, which some distributions and containers turn off.
- `preexec_fn` would apply Landlock for ~3 ms, but runs Python in the forked child of a
  threaded parent (the claude provider pumps pipes from threads), which CPython documents as
  unsafe (a lock held by another thread at fork time deadlocks the child).
- So a tiny launcher (`launcher.py`, run with `python -I -S -c` from ai-sdlc's memory) forks,
  and its child restricts itself and `execv`s the command (the launcher stays outside the
  child's Landlock domain, out of its signals' reach): one Python start-up without
  site-packages per process (13-35 ms measured, with the load), against agent calls that
  take seconds.

Backends are pluggable (`backend.Backend`: `available()` and `wrap(argv, policy)`): a macOS
`sandbox-exec` backend would wrap the command line in a Seatbelt profile the same way. Only
Linux Landlock is implemented; elsewhere the sandbox is unavailable, said once by a single
run, and refused by `run --auto`/`watch` unless `--no-sandbox` or `sandbox.required: false`.
`AI_SDLC_SANDBOX=off` forces the unavailable path (a diagnostic).
"""

from ai_sdlc.sandbox.backend import SANDBOX_ENV, Availability, Backend, select_backend
from ai_sdlc.sandbox.policy import (
    Sandbox,
    SandboxPolicy,
    SandboxRequiredError,
    SandboxSettings,
    sandbox_policy_for,
)

__all__ = [
    "SANDBOX_ENV",
    "Availability",
    "Backend",
    "Sandbox",
    "SandboxPolicy",
    "SandboxRequiredError",
    "SandboxSettings",
    "sandbox_policy_for",
    "select_backend",
]
