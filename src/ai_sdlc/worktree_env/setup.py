"""`worktree.setup`: the commands that give a story worktree its own environment, and the
wrong-tree guard that refuses to verify a story against the main checkout's code.

The setup runs in the worktree (no shell, `verify.commands`' runner, `worktree.setup_timeout`
per command) when the worktree is new to it, and again when its inputs change: the commands
and the content of `worktree.setup_inputs` (default: the lock files and manifests found). The
hash of what it ran on is kept in the worktree's own folder inside the repository's git folder
(`.git/worktrees/<name>/ai-sdlc-setup.json`), out of the worktree's files and of git's eyes.

A setup that fails on a worktree as it was checked out is a project problem: the run stops
(exit 3) before any agent attempt, nothing counted. One that fails again after an attempt
changed its inputs (a broken lock file) fails that attempt's verification instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.git import staging
from ai_sdlc.git.pool import ENV_STAMP
from ai_sdlc.git.repo import read_git_file
from ai_sdlc.git.run import pinned
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.verify.commands import VerificationResult, run_commands, verify_environment
from ai_sdlc.verify.failures import error_line
from ai_sdlc.verify.normalise import failure_signature, normalise_failure, summarise_failure
from ai_sdlc.worktree_env import envdigest, wrongtree

if TYPE_CHECKING:
    from ai_sdlc.config import Config

#: Files whose change makes the setup run again, when `worktree.setup_inputs` is null: each
#: ecosystem's lock file and manifest (only those that exist count).
DEFAULT_INPUTS = (
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
    "Pipfile.lock",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "requirements-dev.txt",
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "Cargo.lock",
    "go.sum",
    "Gemfile.lock",
    "composer.lock",
)
#: In the worktree's git folder; a pooled worktree taken by the next story drops it (`git/pool`).
STAMP = ENV_STAMP
#: Environment variables every setup command gets: the main checkout's project folder and the
#: worktree's (`ai-sdlc worktrees venv` reads the first to find the project's venv).
PROJECT_VAR = "AI_SDLC_PROJECT"
WORKTREE_VAR = "AI_SDLC_WORKTREE"


class WorktreeSetupError(InvalidInputError):
    """The worktree's environment cannot be made, or verification would test the wrong tree:
    a project/config problem, exit 3, never an agent attempt or a recovery."""


class SetupSettings(msgspec.Struct, frozen=True):
    commands: tuple[str, ...] = ()
    inputs: tuple[str, ...] | None = None
    timeout: float = 900.0

    @classmethod
    def from_config(cls, config: Config) -> SetupSettings:
        section = config.typed().worktree
        inputs = section.setup_inputs
        return cls(
            commands=tuple(section.setup),
            inputs=tuple(inputs) if inputs is not None else None,
            timeout=section.setup_timeout or 900,
        )


def fingerprint(work: Path, settings: SetupSettings) -> str:
    """The commands and the content of the inputs present in `work` (absent ones by name)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(list(settings.commands)).encode())
    for name in settings.inputs if settings.inputs is not None else DEFAULT_INPUTS:
        path = work / name
        try:
            data = path.read_bytes() if path.is_file() else None
        except OSError:
            data = None
        if data is None and settings.inputs is None:
            continue  # a default input the project does not have
        digest.update(f"\0{name}\0".encode())
        digest.update(hashlib.sha256(data).digest() if data is not None else b"-")
    return digest.hexdigest()


def stamp_path(work: Path) -> Path | None:
    """Where the setup's hash is kept for the worktree holding `work`: its git folder. For a
    story worktree ai-sdlc opened, the folder it found from the main repository (`git.run.pin`),
    never the one the worktree's `.git` file names: an agent can rewrite that file, and the
    stamp is written outside the sandbox. Else (doctor) the `.git` file is read. None outside a
    linked worktree."""
    found = pinned(work)
    if found is not None:
        return found[1] / STAMP if found[1].is_dir() else None
    for folder in (work, *work.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return None  # a main checkout: its environment is the user's
        if dot_git.is_file():
            try:
                text = read_git_file(dot_git).decode("utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            admin = Path(text[len("gitdir:") :].strip())
            admin = admin if admin.is_absolute() else folder / admin
            return admin / STAMP if admin.is_dir() else None
    return None


def setup_command_lines(commands: Sequence[str]) -> list[tuple[str, str]]:
    """`(name, line)` steps for the runner; a line starting with `ai-sdlc` runs this very
    installation (`python -m ai_sdlc`), whatever `ai-sdlc` is on PATH."""
    steps: list[tuple[str, str]] = []
    for line in commands:
        argv = shlex.split(line)
        if argv and argv[0] == "ai-sdlc":
            line = shlex.join([sys.executable, "-m", "ai_sdlc", *argv[1:]])
        steps.append(("setup", line))
    return steps


class WorktreeEnvironment:
    """A project's story worktrees: their setup, and the guard before verification."""

    def __init__(
        self,
        settings: SetupSettings,
        *,
        project: Path,
        main: Path,
        worktrees_root: Path | None,
        verify_commands: Sequence[tuple[str, str]],
        environ: Callable[[], Mapping[str, str]] = verify_environment,
        clock: Callable[[], float] = time.time,
        sandbox: Callable[[Path], SandboxPolicy | None] = lambda _work: None,
    ) -> None:
        self.settings = settings
        self.project = project
        self.main = main
        self.worktrees_root = worktrees_root
        self.verify_commands = list(verify_commands)
        self.environ = environ
        self.clock = clock
        #: The sandbox policy setup commands run under (the worktree's, as agents' and
        #: verification's: they write the worktree and the tools' caches only).
        self.sandbox = sandbox
        #: Worktrees the guard passed in this process (it reads files only: once is enough).
        self._checked: set[Path] = set()

    def ensure(self, work: Path, *, after_attempt: bool = False) -> VerificationResult | None:
        """Run the setup in `work` when its inputs changed since it last succeeded there.
        None when nothing ran or it passed. A failure raises `WorktreeSetupError`, except
        `after_attempt` when an earlier setup succeeded there: then the attempt changed the
        inputs, and the failed result is returned as that attempt's verification. An
        environment that differs from what setup made (`envdigest`) is made again; after an
        attempt, that attempt fails naming the files it changed."""
        if not self.settings.commands:
            return None
        stamp = stamp_path(work)
        if stamp is None:
            return None
        wanted = fingerprint(work, self.settings)
        recorded = _read_stamp(stamp)
        tampered: list[str] = []
        if recorded.get("fingerprint") == wanted:
            tampered = _tampered(work, recorded)
            if not tampered:
                return None
            # Made again now, so the next attempt starts from (and is checked against) what
            # setup makes; until that succeeds, the stamp says it must be made again.
            recorded = {**recorded, "fingerprint": "", "tampered_at": self.clock()}
            _write_stamp(stamp, recorded)
        environment = {
            **self.environ(),
            PROJECT_VAR: str(self.project),
            WORKTREE_VAR: str(work),
        }
        before = _changes(work)
        result = run_commands(
            setup_command_lines(self.settings.commands),
            cwd=work,
            timeout=self.settings.timeout,
            env=environment,
            section="worktree",
            sandbox=_for_setup(self.sandbox(work)),
        )
        if result.passed:
            left = sorted(_changes(work) - before)
            if left:
                shown = ", ".join(path for _xy, path in left[:10])
                raise WorktreeSetupError(
                    f"worktree.setup changed files git would commit in {work}: {shown}"
                    + (f" and {len(left) - 10} more" if len(left) > 10 else ""),
                    hint="an environment belongs in git-ignored files: add them to .gitignore, "
                    "or use an install that leaves tracked files alone (npm ci, uv sync "
                    "--frozen); no agent attempt was made or counted",
                )
            _write_stamp(stamp, {"fingerprint": wanted, "commands": list(self.settings.commands),
                                 "at": self.clock(),
                                 "environment": envdigest.environment_digest(work)})  # fmt: skip
            self._checked.discard(work)  # a new environment: look again
            return _tampered_result(tampered) if tampered and after_attempt else None
        if after_attempt and recorded:
            # Whatever it left half-made is set up again before the next verification.
            _write_stamp(stamp, {**recorded, "fingerprint": "", "failed_at": self.clock()})
            return _tampered_result(tampered) if tampered else result
        step = result.failed_step
        shown = shlex.join(step.argv) if step is not None else "?"
        cause = error_line(result.failure_output) or "no output"
        raise WorktreeSetupError(
            f"worktree setup failed in {work}: `{shown}` "
            f"{'timed out' if step is not None and step.timed_out else 'failed'}: {cause}\n"
            + summarise_failure(result.failure_output),
            hint="fix worktree.setup in .ai-sdlc/config.yaml (or what it installs), then run "
            "again; no agent attempt was made or counted",
        )

    def verify_environment(self, work: Path) -> dict[str, str]:
        """The environment verification commands get in `work`: ours without the AI keys, and,
        where the worktree has a venv of its own (`.venv`, made by its setup), that venv
        activated (its `bin` first on PATH, `VIRTUAL_ENV`), so `pytest -q` finds the
        worktree's pytest rather than an activated main venv's."""
        environment = dict(self.environ())
        venv = work / ".venv"
        if (venv / "pyvenv.cfg").is_file() and (venv / "bin").is_dir():
            path = environment.get("PATH", "")
            environment["PATH"] = str(venv / "bin") + (os.pathsep + path if path else "")
            environment["VIRTUAL_ENV"] = str(venv)
        return environment

    def check(self, work: Path) -> None:
        """The wrong-tree guard: raise when a verify command run in `work` would import the
        project's code from the main checkout."""
        if work in self._checked or not self.verify_commands:
            return
        findings = wrongtree.check(
            self.verify_commands,
            worktree=work,
            main=self.main,
            project=self.project,
            worktrees_root=self.worktrees_root,
            environ=self.verify_environment(work),
        )
        if findings:
            raise WorktreeSetupError(
                findings[0].message(work)
                + "; set worktree.setup (suggested: "
                + suggestion_text(self.project)
                + ")",
                hint="then run again: each story worktree gets its own environment; no verdict "
                "was recorded and no recovery counted",
            )
        self._checked.add(work)


def _tampered(work: Path, recorded: dict[str, Any]) -> list[str]:
    """The environment files that differ from what setup made (none recorded: nothing)."""
    made = recorded.get("environment")
    if not isinstance(made, dict):
        return []
    return envdigest.changed({str(k): str(v) for k, v in made.items()},
                             envdigest.environment_digest(work))  # fmt: skip


def _tampered_result(paths: list[str]) -> VerificationResult:
    """A failed verification: the attempt changed the environment setup made (a `.pth` or
    `sitecustomize.py` there runs inside the test process, unseen by the review)."""
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    reason = (
        f"the attempt changed the worktree's environment: {shown} (made by worktree.setup, "
        "git-ignored, not the story's to change; it is made again before the next verification)"
    )
    output = f"[ai-sdlc] {reason}\n"
    normalised = normalise_failure(output)
    return VerificationResult(
        passed=False,
        steps=(),
        failure_output=output,
        normalised_failure=normalised,
        signature=failure_signature(normalised),
        reason=reason,
    )


def _changes(work: Path) -> set[tuple[str, str]]:
    """What `git status` shows in the worktree (changed, deleted, untracked but not ignored):
    a setup must leave it as it was, or its output would be taken for the agent's work."""
    return {(c.xy, c.path) for c in staging.status(work)}


def suggestion_text(project: Path) -> str:
    from ai_sdlc.worktree_env.propose import PYTHON_RECIPE, propose

    commands = propose(project).commands
    if not any(c == PYTHON_RECIPE or c.startswith("uv ") for c in commands):
        commands = [PYTHON_RECIPE, *commands]  # the finding is a Python venv's
    return "ai-sdlc config worktree.setup '" + json.dumps(commands) + "'"


def _read_stamp(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_git_file(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_stamp(path: Path, data: dict[str, Any]) -> None:
    from ai_sdlc.fsutil import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1) + "\n")


def _for_setup(policy: SandboxPolicy | None) -> SandboxPolicy | None:
    """Setup commands may reach package registries unless `sandbox.network` leaves them out."""
    return None if policy is None else policy.for_step("setup")
