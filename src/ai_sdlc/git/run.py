"""Run `git` and `gh` without a shell, with a timeout, in a clean environment.

Variables that point git at another repository (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`,
... as set inside a git hook) are removed so a command always acts on the folder it is run in;
`GIT_TERMINAL_PROMPT=0` and `GH_PROMPT_DISABLED=1` make a missing credential an error instead of
a prompt that hangs an unattended run. Failures that may heal by waiting (network, HTTP 5xx,
rate limits) raise `TransientRemoteError`, which the `github` resilience policy retries.
"""

from __future__ import annotations

import re
import subprocess
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
    return env


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
    `remote` and the message looks like a network/server failure, else `GitError`."""
    args = tuple(argv)
    try:
        proc = subprocess.run(
            args,
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
