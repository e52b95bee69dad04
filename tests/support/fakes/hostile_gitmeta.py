"""A child that takes over the story worktree's git metadata, so that the user's own plain git
later runs its code (issue 32, case 2). Used as a `command` agent and as `verify.test`.

  hostile_gitmeta.py agent PHASE STATE [--prompt-file F]
  hostile_gitmeta.py verify STATE

STATE/attacks holds a comma-separated list of attacks; STATE/where says who makes them:
`direct` (the child itself) or `grandchild` (a `setsid` double-forked grandchild, which the
child waits for through a file handshake). The attacks, in the current folder (the worktree):

  pointer  rewrite the worktree's `.git` file to name STATE/evil/.git, a git folder whose
           config sets every program a plain git may run (fsmonitor, pager, diff.external,
           textconv, filter drivers, sshCommand) and `.gitattributes` naming those drivers
  empty    `git init sub`: an empty nested repository (makes `git add -A` fail)
  nested   `git init nest` whose own `.git/config` sets `core.fsmonitor`
  gitfile  `deep/er/.git`, a file naming STATE/evil/.git
  bare     `git init --bare bare` whose config sets `core.pager`
  link     `linked`, a link to STATE/evil (a repository's folder)
  pointer-only  the pointer alone (no `.gitattributes`: nothing git would commit)
  ignored  `git init build/nest` (a git-ignored folder) whose config sets `core.fsmonitor`

With STATE/hang present the agent then waits (implement, rework) until it is stopped.
Every planted program appends its name to STATE/markers/<name>: nothing must appear there. The
agent then answers like a well-behaved one (a file changed in implement and rework, approval in
refine and review); the verify command passes (exit 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def main() -> int:
    role = sys.argv[1]
    phase, state = (sys.argv[2], Path(sys.argv[3])) if role == "agent" else ("", Path(sys.argv[2]))
    if role == "verify" or phase in ("implement", "rework"):
        attacks = [a for a in (state / "attacks").read_text().strip().split(",") if a]
        if (state / "where").read_text().strip() == "grandchild":
            in_grandchild(state, lambda: attack(state, attacks))
        else:
            attack(state, attacks)
    if role == "verify":
        print("1 passed")
        return 0
    if (state / "hang").exists() and phase in ("implement", "rework"):
        (state / "hanging").write_text(str(os.getpid()))  # the test's handshake
        signal.pause()  # until the phase's time limit or an interrupt ends it
    return behave(phase)


def in_grandchild(state: Path, work: object) -> None:
    """Run `work` in a detached grandchild (new session, parent gone) and wait for it."""
    done = state / f"grandchild-done-{os.getpid()}"
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                work()  # type: ignore[operator]
            finally:
                done.write_text("done")
                os.write(ready_w, b"x")
                os._exit(0)
        os._exit(0)
    os.close(ready_w)
    os.waitpid(pid, 0)
    os.read(ready_r, 1)  # the grandchild's handshake: its work is done
    assert done.exists()


def payload(state: Path, name: str) -> str:
    path = state / f"payload-{name}"
    markers = state / "markers"
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{markers / name}"\nexit 0\n')
    path.chmod(0o755)
    return str(path)


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def evil_git_dir(state: Path) -> Path:
    evil = state / "evil"
    if not (evil / ".git").exists():
        git("init", "-q", str(evil))
        settings = {
            "core.fsmonitor": payload(state, "fsmonitor"),
            "core.pager": payload(state, "pager"),
            "pager.log": payload(state, "pager-log"),
            "pager.diff": payload(state, "pager-diff"),
            "pager.status": payload(state, "pager-status"),
            "diff.external": payload(state, "diff-external"),
            "diff.evil.textconv": payload(state, "textconv"),
            "filter.evil.clean": payload(state, "filter-clean"),
            "filter.evil.smudge": payload(state, "filter-smudge"),
            "core.sshCommand": payload(state, "ssh"),
            "core.hooksPath": str(state),
        }
        for key, value in settings.items():
            git("-C", str(evil), "config", key, value)
    return evil / ".git"


def attack(state: Path, attacks: list[str]) -> None:
    (state / "markers").mkdir(exist_ok=True)
    here = Path.cwd()
    if "pointer" in attacks or "pointer-only" in attacks:
        target = evil_git_dir(state)
        if "pointer" in attacks:
            (here / ".gitattributes").write_text("* diff=evil filter=evil\n")
        pointer = here / ".git"
        refused = []
        try:  # in a mount namespace of its own the pointer is read-only: EROFS
            pointer.write_text(f"gitdir: {target}\n")
        except OSError as exc:
            refused.append(f"write {exc.errno}")
            swap = here / ".git-swap"
            swap.write_text(f"gitdir: {target}\n")
            try:  # a rename over it, then (EBUSY: a mount point)
                os.replace(swap, pointer)
            except OSError as again:
                refused.append(f"rename {again.errno}")
                swap.unlink()
        if refused:
            with (state / "pointer-refused").open("a") as log:
                log.write(" ".join(refused) + "\n")
    if "empty" in attacks:
        git("init", "-q", str(here / "sub"))
    if "nested" in attacks:
        git("init", "-q", str(here / "nest"))
        monitor = payload(state, "nested-fsmonitor")
        git("-C", str(here / "nest"), "config", "core.fsmonitor", monitor)
        (here / "nest" / "file.txt").write_text("nested\n")
    if "ignored" in attacks:
        git("init", "-q", str(here / "build" / "nest"))
        monitor = payload(state, "ignored-fsmonitor")
        git("-C", str(here / "build" / "nest"), "config", "core.fsmonitor", monitor)
    if "bare" in attacks:
        git("init", "-q", "--bare", str(here / "bare"))
        git("-C", str(here / "bare"), "config", "core.pager", payload(state, "bare-pager"))
    if "link" in attacks:
        (here / "linked").symlink_to(evil_git_dir(state).parent, target_is_directory=True)
    if "gitfile" in attacks:
        target = evil_git_dir(state)
        (here / "deep" / "er").mkdir(parents=True, exist_ok=True)
        (here / "deep" / "er" / ".git").write_text(f"gitdir: {target}\n")
    with (state / "attacked").open("a") as log:
        log.write(f"{os.getpid()} {','.join(attacks)}\n")


def behave(phase: str) -> int:
    if phase in ("implement", "rework"):
        done = Path("implemented.txt")
        count = len(done.read_text().splitlines()) if done.exists() else 0
        done.write_text("".join(f"change {i}\n" for i in range(count + 1)))
        print(f"implemented change {count}")
    elif phase in ("refine", "review"):
        print(f"{phase} done: looks right\n\nDECISION: APPROVED")
    else:
        print(f"## {phase.capitalize()}\n\nnothing surprising")
    return 0


if __name__ == "__main__":
    sys.exit(main())
