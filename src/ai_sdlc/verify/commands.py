"""Run the project's verification commands (build, test) in a workspace, safely and boundedly.

Each command line is split with `shlex` and run without a shell (nothing from a story or a
model can inject shell syntax), with stdin closed, in its own session so a timeout kills the
whole process group (test runners spawn children), and with output capped to its head and
tail. A command that cannot start is a failed step, not a crash.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.environ import current as current_environ
from ai_sdlc.errors import InvalidInputError
from ai_sdlc.fsutil import remove_tree
from ai_sdlc.sandbox.childenv import command_environment
from ai_sdlc.sandbox.policy import SYSTEM_WRITABLE, SandboxPolicy
from ai_sdlc.secrets import redact
from ai_sdlc.spawn import kill_session, start_session, wait_for_exit
from ai_sdlc.verify import bytecode
from ai_sdlc.verify.counts import TestCounts, parse_counts
from ai_sdlc.verify.failures import failure_reason
from ai_sdlc.verify.normalise import failure_signature, normalise_failure
from ai_sdlc.verify.pytest_run import (
    ADDOPTS,
    PytestReport,
    judge_addopts,
    read_report,
    without_report,
)

#: Bytes of output kept per step: the first fifth and the last four fifths.
DEFAULT_MAX_OUTPUT = 64 * 1024
#: After SIGTERM to a timed-out group, seconds before SIGKILL; also how long output is still
#: drained from leftovers that keep the pipe open after the command itself exited.
KILL_GRACE_SECONDS = 1.0
#: Credentials of the AI backends: code under verification is AI-written, so it does not get
#: them unless the caller passes an explicit `env`.
SECRET_ENV_VARS: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
)
EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126
#: Where Python keeps bytecode for a verification (see `run_commands`).
PYCACHE_VAR = "PYTHONPYCACHEPREFIX"


class StepResult(msgspec.Struct, frozen=True):
    """One verification command's outcome (build or test)."""

    name: str
    argv: tuple[str, ...]
    exit_code: int
    duration: float
    output: str
    timed_out: bool = False
    #: False when the command could not be started at all (no such executable, not allowed
    #: to run it): a configuration error, never the change's fault.
    started: bool = True

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class VerificationResult(msgspec.Struct, frozen=True):
    """The verdict of one verification: the steps run and the failure, normalised to compare."""

    passed: bool
    steps: tuple[StepResult, ...]
    #: The failing step's output ("" when everything passed).
    failure_output: str = ""
    #: The failure with run-to-run noise removed (see `normalise_failure`).
    normalised_failure: str = ""
    #: Stable hash of `normalised_failure` ("" when passed): equal for the same failure.
    signature: str = ""
    #: One line naming the failing test and its assertion ("" when passed or not readable).
    reason: str = ""
    #: Passed/failed/skipped tests read from the steps' output (None: no summary recognised).
    counts: TestCounts | None = None
    #: What `verify.judge` checked on top (base counts, protected files), for the record.
    judged: dict[str, Any] = msgspec.field(default_factory=dict)
    #: The failing tests, read from pytest's report (see `verify.pytest_run`); () when no
    #: report was written (the caller reads them from the output instead).
    failing: tuple[str, ...] = ()

    @property
    def failed_step(self) -> StepResult | None:
        return next((step for step in self.steps if not step.passed), None)

    def to_dict(self) -> dict[str, Any]:
        data = msgspec.structs.asdict(self)
        data["counts"] = self.counts.to_dict() if self.counts is not None else None
        data["steps"] = [
            {**msgspec.structs.asdict(step), "argv": list(step.argv), "passed": step.passed}
            for step in self.steps
        ]
        return data


def parse_commands(
    commands: Sequence[tuple[str, str]], *, section: str = "verify"
) -> list[tuple[str, tuple[str, ...]]]:
    """Split every command line up front, so a bad config line runs nothing at all.
    `section`: the config section the lines come from (named in the errors)."""
    parsed: list[tuple[str, tuple[str, ...]]] = []
    for name, line in commands:
        try:
            argv = tuple(shlex.split(line))
        except ValueError as exc:
            raise InvalidInputError(
                f"config key {section}.{name}: cannot split the command line {line!r}: {exc}",
                hint="check the quotes; commands run without a shell, so write the program "
                "and its arguments only",
            ) from exc
        if not argv:
            raise InvalidInputError(
                f"config key {section}.{name} is an empty command line",
                hint=f"set {section}.{name} to a command such as 'pytest -q', or remove it",
            )
        parsed.append((name, argv))
    return parsed


def default_environment() -> dict[str, str]:
    """This process's environment without the AI backends' credentials (the user's own
    `notify.command`; verification gets `command_environment`'s allow-list)."""
    return {k: v for k, v in current_environ().items() if k not in SECRET_ENV_VARS}


def verify_environment(
    extra: Mapping[str, str] | None = None, passed: Sequence[str] = ()
) -> dict[str, str]:
    """What verify and setup commands get: the allow-list of `sandbox.childenv` (no
    credentials but those `passed` names: `sandbox.pass_env`), then `extra` (`verify.env`)."""
    return command_environment(current_environ(), extra, passed)


def run_commands(
    commands: Sequence[tuple[str, str]],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    max_output: int = DEFAULT_MAX_OUTPUT,
    sandbox: SandboxPolicy | None = None,
    fallback: Path | None = None,
    section: str = "verify",
    seeds: bytecode.Seeds | None = None,
) -> VerificationResult:
    """Run `(name, command line)` steps in `cwd` until one fails; `timeout` is per step.

    `env` is the complete environment of the commands (None: `verify_environment()`).
    `sandbox` confines every step (see `ai_sdlc.sandbox`; None: unconfined).
    `clock` only measures durations; deadlines always use the real monotonic clock.
    A program given as a relative path (`.venv/bin/pytest`) runs from `cwd` when it is there,
    else from `fallback` (the main checkout's project folder, for a story worktree without
    an environment of its own: the wrong-tree guard judges whether that is safe).
    `section`: the config section of the commands, named when one cannot start.
    `seeds`: the session's folder of protected bytecode (None: one for this call alone).
    """
    parsed = [
        (name, resolve_program(argv, cwd, fallback))
        for name, argv in parse_commands(commands, section=section)
    ]
    if not cwd.is_dir():
        raise InvalidInputError(f"cannot verify in {cwd}: no such folder")
    environment = dict(env) if env is not None else verify_environment()
    if section != "verify":
        return _run_steps(parsed, cwd, timeout, environment, clock, max_output, sandbox, section)
    # Python reads bytecode only from a folder ai-sdlc made, never the work tree's git-ignored
    # `__pycache__`: a `.pyc` forged there (with the mtime and size of the source it stands
    # for) would run instead of the code the diff shows. Sandboxed, that folder is the
    # session's seeded one (`seeds`, read-only to the children: see verify/bytecode.py);
    # unconfined, an empty folder of this verification's own.
    pycache = None if sandbox is not None else tempfile.mkdtemp(prefix="ai-sdlc-pycache-")
    reports = Path(tempfile.mkdtemp(prefix="ai-sdlc-reports-"))  # pytest's, see pytest_run
    try:
        if sandbox is not None:
            writable = (*sandbox.writable, str(reports))
            seeded = seeds if seeds is not None else bytecode.Seeds()
            environment[PYCACHE_VAR] = seeded.prefix(
                (*writable, sandbox.runs, *SYSTEM_WRITABLE, str(cwd))
            )
            sandbox = msgspec.structs.replace(sandbox, writable=writable)
        elif pycache is not None:
            environment[PYCACHE_VAR] = pycache
        return _run_steps(
            parsed, cwd, timeout, environment, clock, max_output, sandbox, section, reports
        )
    finally:
        if pycache is not None:
            remove_tree(pycache)
        remove_tree(reports)


def _run_steps(
    parsed: Sequence[tuple[str, tuple[str, ...]]],
    cwd: Path,
    timeout: float,
    environment: dict[str, str],
    clock: Callable[[], float],
    max_output: int,
    sandbox: SandboxPolicy | None,
    section: str,
    reports: Path | None = None,
) -> VerificationResult:
    """`reports`: a folder for the pytest report of each step (None: none asked for)."""
    steps: list[StepResult] = []
    found: list[PytestReport | None] = []
    for index, (name, argv) in enumerate(parsed):
        env = environment
        if reports is not None:
            addopts = judge_addopts(environment.get(ADDOPTS, ""), reports / f"{index}.xml")[0]
            env = {**environment, ADDOPTS: addopts}
        step = run_step(
            name,
            argv,
            cwd=cwd,
            timeout=timeout,
            env=env,
            clock=clock,
            max_output=max_output,
            sandbox=sandbox,
            section=section,
        )
        if reports is not None:
            output = without_report(step.output, reports / f"{index}.xml")
            step = msgspec.structs.replace(step, output=output)
        steps.append(step)
        found.append(read_report(reports / f"{index}.xml") if reports is not None else None)
        if not step.passed:
            status = "timed out" if step.timed_out else f"exit {step.exit_code}"
            normalised = normalise_failure(f"step {name} failed ({status})\n{step.output}")
            read = found[-1]
            return VerificationResult(
                passed=False,
                steps=tuple(steps),
                failure_output=step.output + status_line(step),
                normalised_failure=normalised,
                signature=failure_signature(normalised),
                reason=(read.reason if read else "") or failure_reason(step.output),
                counts=step_counts(steps, found),
                failing=read.failing if read else (),
            )
    return VerificationResult(passed=True, steps=tuple(steps), counts=step_counts(steps, found))


def step_counts(
    steps: Sequence[StepResult], reports: Sequence[PytestReport | None] = ()
) -> TestCounts | None:
    """The test counts of all steps together (None when no step printed a summary). A step's
    printed summary comes first (pytest's also counts deselected tests); its pytest report
    (`reports[i]`) stands in when the user's options removed the summary (`-qq`)."""
    found: list[TestCounts] = []
    for index, step in enumerate(steps):
        counts = parse_counts(step.output)
        report = reports[index] if index < len(reports) else None
        if counts is None and report is not None:
            counts = report.counts
        if counts is not None:
            found.append(counts)
    if not found:
        return None
    total = found[0]
    for counts in found[1:]:
        total = total + counts
    return total


def resolve_program(argv: tuple[str, ...], cwd: Path, fallback: Path | None) -> tuple[str, ...]:
    """`argv` with a relative program path missing from `cwd` taken from `fallback`."""
    program = argv[0]
    if fallback is None or "/" not in program or os.path.isabs(program):
        return argv
    if os.path.lexists(cwd / program) or not os.path.lexists(fallback / program):
        return argv
    return (str(fallback / program), *argv[1:])


def status_line(step: StepResult) -> str:
    """The line ending a failed step's output: how it ended, and its last output line, so a
    command that fails without a word (or without a telling one) still says something real."""
    if step.timed_out or step.passed:
        return ""
    if step.exit_code < 0:
        try:
            how = f"was killed by {signal.Signals(-step.exit_code).name}"
        except ValueError:
            how = f"was killed by signal {-step.exit_code}"
    else:
        how = f"failed with exit status {step.exit_code}"
    lines = [line.strip() for line in step.output.splitlines() if line.strip()]
    if not lines:
        tail = " and printed nothing"
    elif lines[-1].startswith("[ai-sdlc]"):
        return ""  # could not start: the line above says why
    else:
        last = lines[-1] if len(lines[-1]) <= 200 else lines[-1][:199] + "…"
        tail = f" (last output line: {last})"
    separator = "" if not step.output or step.output.endswith("\n") else "\n"
    return f"{separator}[ai-sdlc] step {step.name!r} {how}{tail}\n"


def run_step(
    name: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str],
    clock: Callable[[], float] = time.monotonic,
    max_output: int = DEFAULT_MAX_OUTPUT,
    sandbox: SandboxPolicy | None = None,
    section: str = "verify",
) -> StepResult:
    """Run one command (no shell, stdin closed, own session) and capture its bounded output."""
    started = clock()
    argv = tuple(argv)
    buffer = _HeadTail(max_output)  # made first: nothing may come between the start and the try
    try:
        process = start_session(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            close_fds=True,
            sandbox=sandbox,
        )
    except FileNotFoundError:
        message = f"[ai-sdlc] cannot run {argv[0]!r}: executable not found on PATH"
        return _not_started(name, argv, EXIT_NOT_FOUND, message, clock() - started, section)
    except OSError as exc:
        message = f"[ai-sdlc] cannot run {argv[0]!r}: {exc.strerror or exc}"
        return _not_started(name, argv, EXIT_CANNOT_RUN, message, clock() - started, section)
    try:
        timed_out = _pump(process, buffer, timeout)
    except BaseException:
        _kill_group(process, signal.SIGKILL)
        process.wait()
        raise
    output = redact(buffer.text())  # output ends up in prompts, logs and blocked_reason
    if timed_out:
        output += (
            f"\n[ai-sdlc] step {name!r} timed out after {timeout:g}s; its processes were killed"
        )
    return StepResult(
        name=name,
        argv=argv,
        exit_code=process.returncode,
        duration=max(0.0, clock() - started),
        output=output,
        timed_out=timed_out,
    )


def _not_started(
    name: str,
    argv: tuple[str, ...],
    code: int,
    message: str,
    duration: float,
    section: str = "verify",
) -> StepResult:
    hint = f"{message} (check {section}.{name} in .ai-sdlc/config.yaml)"
    return StepResult(name, argv, code, max(0.0, duration), hint, started=False)


def _pump(process: subprocess.Popen[bytes], buffer: _HeadTail, timeout: float) -> bool:
    """Read output until EOF, the process's exit, or the deadline; True when it timed out."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout
    stop_reading_at: float | None = None
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out = True
                _terminate_group(process)
                stop_reading_at = time.monotonic() + KILL_GRACE_SECONDS
            if stop_reading_at is None and process.poll() is not None:
                # Exited; leftovers may still hold the pipe: drain briefly, then give up.
                stop_reading_at = now + KILL_GRACE_SECONDS
            if stop_reading_at is not None and now >= stop_reading_at:
                _kill_group(process, signal.SIGKILL)
                break
            limit = deadline if stop_reading_at is None else stop_reading_at
            if not selector.select(timeout=max(0.0, min(0.2, limit - now))):
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            buffer.add(chunk)
    process.stdout.close()
    remaining = max(0.0, deadline - time.monotonic())
    try:
        wait_for_exit(process, remaining if not timed_out else KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        timed_out = True
        _terminate_group(process)
    process.wait()
    if timed_out:
        _kill_group(process, signal.SIGKILL)
    return timed_out


def _terminate_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, give it the grace period, then SIGKILL whatever is left."""
    _kill_group(process, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        wait_for_exit(process, KILL_GRACE_SECONDS)
    _kill_group(process, signal.SIGKILL)


def _kill_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # start_new_session made the child a group leader: its pid is the group id.
    if sig == signal.SIGKILL and process.poll() is None:  # (never a pid that was reaped)
        kill_session(process.pid)  # detached grandchildren too, not only the group
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


class _HeadTail:
    """Keeps the first and last bytes of a stream within `limit`, counting what it dropped."""

    def __init__(self, limit: int) -> None:
        self.head_limit = max(0, limit // 5)
        self.tail_limit = max(0, limit - self.head_limit)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.tail_limit
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[ai-sdlc] ... {self.dropped} bytes of output not kept ...\n{tail}"
