"""Run `git` and `gh` without a shell, with a timeout, in a clean environment.

Variables that point git at another repository (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`,
... as set inside a git hook) are removed so a command always acts on the folder it is run in;
`GIT_TERMINAL_PROMPT=0` and `GH_PROMPT_DISABLED=1` make a missing credential an error instead of
a prompt that hangs an unattended run. Failures that may heal by waiting (network, HTTP 5xx,
rate limits) raise `TransientRemoteError`, which the `github` resilience policy retries.

Nothing an agent leaves behind steers these commands (issue 22): every `git` runs with
`HARDENING` (no hook, no fsmonitor program, no `ext::` transport, whatever any config file
says; the same settings reach the git processes `gh` starts, through `GIT_CONFIG_COUNT`), and a
command run inside a story worktree names its git folder and work tree explicitly (`pin`): the
git folder ai-sdlc found from the main repository, never the one the worktree's `.git` file
names (an agent can rewrite that file to point at a git folder of its own).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from ai_sdlc.environ import current as current_environ
from ai_sdlc.errors import AiSdlcError
from ai_sdlc.secrets import redact

#: Seconds for a local git command; pushes and `gh` calls get their own, longer limits.
LOCAL_TIMEOUT = 120.0
REMOTE_TIMEOUT = 300.0

#: Variables that redirect git to another repository, index or object store.
_LOCATING_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
)

#: Settings every git command ai-sdlc runs is given; the command line beats every config file
#: (system, global, the repository's shared `config`, `config.worktree`), so an agent that
#: plants hooks in `.git/hooks`, sets `core.hooksPath` or `core.fsmonitor` (a program git runs
#: on `status`, `add`, `commit`), or points a remote at an `ext::` command gets none of them run.
HARDENING_CONFIG = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("protocol.ext.allow", "never"),
)
HARDENING = tuple(o for key, value in HARDENING_CONFIG for o in ("-c", f"{key}={value}"))

#: Story worktree tops → their git folder (see `pin`). Process-wide on purpose, the one piece of
#: module-level state that carries meaning: every `git` call in a story worktree, from any
#: floor (attempts, verification's protected-test checks, the worktree setup, conflict checks),
#: must get the explicit `--git-dir`, and a registry each call site had to be handed would lose
#: the pin silently wherever one was forgotten. Pins only ever name folders ai-sdlc found in
#: the main repository's own `worktrees/` list.
_PINNED: dict[Path, Path] = {}
_PIN_LOCK = threading.Lock()

_TRANSIENT = re.compile(
    r"could not resolve host|connection (?:timed out|refused|reset)|timed out|"
    r"network is unreachable|temporary failure|the remote end hung up|early eof|"
    r"rpc failed|tls|ssl|secondary rate limit|rate limit|http 5\d\d|"
    r"\b50[0234]\b|bad gateway|service unavailable|gateway time-?out|"
    r"internal server error|unable to access",
    re.IGNORECASE,
)
_STATUS = re.compile(r"\b(429|50[0234])\b")


class GitError(AiSdlcError):
    """A git or gh command failed in a way waiting will not fix."""

    def __init__(self, message: str, *, returncode: int | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.returncode = returncode


class TransientRemoteError(ConnectionError):
    """A push or `gh` call failed for a reason that may heal (network, 5xx, rate limit).

    Deliberately not an `AiSdlcError`: the resilience classifier retries it (as `connection`,
    or by its `status_code` as `rate_limit`/`server`).
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


class Completed(msgspec.Struct, frozen=True):
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in current_environ().items() if k not in _LOCATING_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GH_PROMPT_DISABLED"] = "1"
    env["GH_NO_UPDATE_NOTIFIER"] = "1"
    env["NO_COLOR"] = "1"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    _add_hardening(env)
    return env


def _add_hardening(env: dict[str, str]) -> None:
    """`HARDENING_CONFIG` as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` (after any the user set):
    git reads them like `-c`, and passes them on to every git it starts, and so do the git
    commands `gh` runs in the repository (`gh pr create` asks `git status`)."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0") or "0")
    except ValueError:
        count = 0
    if count < 0:
        count = 0
    for key, value in HARDENING_CONFIG:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)


def pin(work_tree: Path, git_dir: Path) -> None:
    """From now on, git commands run in (or below) the story worktree `work_tree` name
    `--git-dir=<git_dir> --work-tree=<work_tree>`: `git_dir` is the worktree's folder under the
    main repository's `worktrees/`, found by ai-sdlc there (`worktrees.git_dir_of`)."""
    with _PIN_LOCK:
        _PINNED[work_tree] = git_dir
        _PINNED[_real(work_tree)] = git_dir


def unpin(work_tree: Path) -> None:
    with _PIN_LOCK:
        _PINNED.pop(work_tree, None)
        _PINNED.pop(_real(work_tree), None)


def pinned(path: Path) -> tuple[Path, Path] | None:
    """(work tree, git folder) of the pinned story worktree holding `path`, if any."""
    if not _PINNED:
        return None
    with _PIN_LOCK:
        for candidate in (path, _real(path)):
            for folder in (candidate, *candidate.parents):
                git_dir = _PINNED.get(folder)
                if git_dir is not None:
                    return folder, git_dir
    return None


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def git_options(cwd: Path) -> tuple[str, ...]:
    """The options every `git` run in `cwd` is given before its subcommand: `HARDENING`, and
    the explicit git folder and work tree when `cwd` is in a pinned story worktree."""
    found = pinned(cwd)
    if found is None:
        return HARDENING
    work_tree, git_dir = found
    return (*HARDENING, f"--git-dir={git_dir}", f"--work-tree={work_tree}")


def run(
    argv: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = LOCAL_TIMEOUT,
    remote: bool = False,
) -> Completed:
    """Run `argv` in `cwd`. `check` raises on a non-zero exit: `TransientRemoteError` when
    `remote` and the message looks like a network/server failure, else `GitError`. A `git`
    command gets `git_options(cwd)` before its own arguments (messages show the command as
    given)."""
    args = tuple(argv)
    full = (args[0], *git_options(cwd), *args[1:]) if args and args[0] == "git" else args
    try:
        proc = subprocess.run(
            full,
            cwd=cwd,
            env=clean_env(env),
            input=input,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise GitError(f"{args[0]} is not installed (not found on PATH)") from None
    except subprocess.TimeoutExpired:
        if remote:
            raise TransientRemoteError(f"`{_shown(args)}` timed out after {timeout:g} s") from None
        raise GitError(f"`{_shown(args)}` timed out after {timeout:g} s") from None
    done = Completed(args, proc.returncode, proc.stdout, proc.stderr)
    if check and not done.ok:
        raise failure(done, remote=remote)
    return done


def git(
    cwd: Path,
    *args: str,
    check: bool = True,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = LOCAL_TIMEOUT,
) -> Completed:
    return run(("git", *args), cwd, check=check, input=input, env=env, timeout=timeout)


def failure(done: Completed, *, remote: bool = False) -> GitError | TransientRemoteError:
    """The error for a failed command; its message carries the (redacted) stderr."""
    detail = redact((done.stderr.strip() or done.stdout.strip())[-2000:])
    message = f"`{_shown(done.args)}` failed (exit {done.returncode})"
    if detail:
        message += f": {detail}"
    if remote and _TRANSIENT.search(detail):
        match = _STATUS.search(detail)
        return TransientRemoteError(message, status_code=int(match.group(1)) if match else None)
    return GitError(message, returncode=done.returncode)


def _shown(args: Sequence[str]) -> str:
    """The command for a message: long arguments (a PR body) shortened."""
    parts = [a if len(a) <= 60 and "\n" not in a else a[:40].split("\n")[0] + "…" for a in args]
    return redact(" ".join(parts))
