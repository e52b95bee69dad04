"""Verification an agent cannot game: a baseline on the story's base, a pass-count floor and the
base's tests run against the change.

Before a story's first implementation attempt the verification commands run once on its
untouched base (`baseline`, cached per base commit and verification config under
`.ai-sdlc/state/baselines/`). The story stops there, before any agent call and with no recovery
counted (exit 3), when the base cannot be verified at all: a command that cannot be started
(or that exits 126/127, a shell's "not found"), a failing build step, a test step that failed
having counted no test and named none (`python -m pytset`, `npm run tset`: a broken verify
command, quoted by its own error line). A failing *test* step that names its failing tests is
the expected start of a test-first story: they are recorded and the attempt must make them
pass. A test-first base that does not build because of its new test files (Go, Rust) is run
again in a scratch tree of the base without them (`verify.setaside`), for the counts of the
rest; where no count can be had the baseline says why (`floor_off`), and the run says so.

Every attempt that passes its own verification is then judged (`judge`):
- the pass-count floor: at least as many tests pass as passed or failed at the base (those that
  failed must now pass), and no more are skipped; a test summary that disappeared fails too;
- tests kept as they were: the base's version of every protected file the attempt changed or
  deleted is put back for one more verification against the attempt's code; a base test that
  no longer passes fails the attempt.
- what decides the verdict held as it was at the base (`held`): a change to it fails the attempt
  naming the file, whatever the tests said; toolchain settings the agents' private homes hold
  (`go env -w`) are not read by a verification at all (`held_settings`).
The base's run also decides whether Python runs the story's verifications with safe-path
semantics (`PYTHONSAFEPATH=1`: no working folder first on `sys.path`): yes, unless the base
then loses a module of its project folder (`Judge.safe_path`).
A story with `allow_test_changes: true` (its frontmatter: a human's explicit choice) skips these;
its counts and test diff are still shown to the review, in the pull request and the report.
A project without a base commit (no git worktree) gets neither.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.git.run import GitError, clean_env, git_options
from ai_sdlc.verify import freshness, held, protect, reasons, setaside
from ai_sdlc.verify.commands import VerificationResult
from ai_sdlc.verify.counts import TestCounts, parse_junit
from ai_sdlc.verify.failures import error_line, failing_tests, failure_reason
from ai_sdlc.verify.reasons import first_line
from ai_sdlc.wording import count

if TYPE_CHECKING:
    from ai_sdlc.config import Config

Verifier = Callable[[Path], VerificationResult]
#: Bumped when what a cached baseline holds changes.
BASELINE_FORMAT = 2
#: Set in a verification's environment: Python does not put the working folder (or the script's)
#: first on `sys.path`, so a `pytest.py` there cannot stand in for the runner (`-P`, 3.11+).
SAFE_PATH_VAR = "PYTHONSAFEPATH"
#: Toolchain settings a verification does not read from the agents' private homes, which
#: agents write: `go env -w GOFLAGS=-run=^TestAdd$` would persist in `$XDG_CONFIG_HOME/go/env`
#: and choose the tests of every later `go test`. A value the user's environment or
#: `verify.env` gives is kept (it names a file of the user's, out of the agents' reach).
HELD_SETTINGS: tuple[tuple[str, str], ...] = (("GOENV", "off"),)
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
#: Exit codes of a command a shell could not find (127) or not execute (126).
NOT_RUNNABLE = (126, 127)


class JudgeSettings(msgspec.Struct, frozen=True):
    """The `verify` config the judge needs."""

    commands: tuple[tuple[str, str], ...] = ()
    protected: tuple[str, ...] = protect.DEFAULT_PROTECTED
    junit: str | None = None
    baseline: bool = True
    #: What else makes the base's verification what it is (`worktree.setup`, `verify.env`):
    #: part of the cached baseline's key, so a changed environment takes the baseline again.
    setup: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_config(cls, config: Config, commands: Sequence[tuple[str, str]]) -> JudgeSettings:
        typed = config.typed()
        verify = typed.verify
        protected = verify.protected
        return cls(
            commands=tuple(commands),
            protected=protect.DEFAULT_PROTECTED if protected is None else tuple(protected),
            junit=verify.junit or None,
            baseline=verify.baseline,
            setup=tuple(typed.worktree.setup),
            env=tuple(sorted(verify.env.items())),
        )


class Baseline(msgspec.Struct, frozen=True):
    """The verification of a story's untouched base."""

    base: str
    passed: bool
    counts: TestCounts | None = None
    #: The tests that fail at the base (a test-first story's new tests).
    failing: tuple[str, ...] = ()
    reason: str = ""
    #: New test files that do not build at the base, left out of the run that gave `counts`.
    set_aside: tuple[str, ...] = ()
    #: Why no pass-count floor can be applied ("" when `counts` give one).
    floor_off: str = ""
    #: Python's safe-path semantics kept the base's tests running (see `Judge.safe_path`).
    safe_path: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "passed": self.passed,
            "counts": self.counts.to_dict() if self.counts else None,
            "failing": list(self.failing),
            "reason": self.reason,
            "set_aside": list(self.set_aside),
            "floor_off": self.floor_off,
            "safe_path": self.safe_path,
        }


def not_started(verdict: VerificationResult) -> str | None:
    """Why the failed step's command could not be started by us at all, or None."""
    step = verdict.failed_step
    if step is None or step.started:
        return None
    return first_line(step.output)


class Judge:
    """Baselines and judgements for the stories of one project (`state`: `.ai-sdlc/state`)."""

    def __init__(self, settings: JudgeSettings, state: Path) -> None:
        self.settings = settings
        self.state = state
        self._baselines: dict[str, Baseline] = {}
        #: Work trees whose base is being verified to decide safe path (`deciding`).
        self._deciding: set[str] = set()
        #: Work tree → whether its verifications run with Python's safe path (`safe_path`).
        self._safe: dict[str, bool] = {}
        #: Work tree → the base its baseline was taken of (`freshen`).
        self._bases: dict[str, str] = {}

    def deciding(self, path: Path) -> bool:
        """The base's verification is deciding safe path for `path` (run it as asked)."""
        return os.path.abspath(path) in self._deciding

    def freshen(self, path: Path) -> None:
        """Before an attempt's verification: the files its change touched are made newer
        than every build output in the work tree (`freshness`), so no build tool that
        decides by modification time runs what the agent built from other code."""
        base = self._bases.get(os.path.abspath(path))
        if base is not None:
            freshness.newer_than_outputs(path, base)

    def safe_path(self, path: Path) -> bool:
        """Whether Python runs with safe-path semantics (`PYTHONSAFEPATH=1`) in the
        verifications of the work tree at `path`: yes unless the story's base needs the
        working folder on `sys.path` (a flat project's tests import its modules from there
        under `python -m pytest`), as its baseline found; no before any baseline."""
        return self._safe.get(os.path.abspath(path), False)

    # --- the baseline -----------------------------------------------------------------------
    def baseline(self, path: Path, base: str | None, verify: Verifier) -> Baseline | None:
        """The base's verification (cached); raises InvalidInputError (exit 3) when the base
        cannot be verified at all. None: no base commit, or `verify.baseline: false`."""
        if base is None or not self.settings.baseline or not self.settings.commands:
            return None
        self._bases[os.path.abspath(path)] = base
        found = self.known(path, base)
        if found is not None:
            return found
        key = self._key(base, path)
        where = path
        if _at(path, base):
            try:
                verdict, safe = self._safely(path, verify)
            finally:
                _clean(path)
        else:
            verdict, safe, where = self._in_temporary_tree(path, base, verify)
        stop = _stop_reason(verdict)
        if stop is not None:
            raise InvalidInputError(
                f"verification fails before any change: {stop}",
                hint="the story's base (untouched) must build and its test command must run: "
                "fix verify.build / verify.test or the project, then run again (no agent was "
                "called and no recovery counted)",
            )
        baseline = msgspec.structs.replace(
            self._classified(path, base, verdict, verify, where), safe_path=safe
        )
        self._safe[os.path.abspath(path)] = safe
        self._baselines[key] = baseline
        with contextlib.suppress(OSError):  # a cache: a full disk costs a run later, no more
            self._save(key, baseline)
        return baseline

    def _classified(
        self, path: Path, base: str, verdict: VerificationResult, verify: Verifier, where: Path
    ) -> Baseline:
        """What the base's verification (run in `where`) counts as: a baseline with counts, a
        test-first failure that names its tests, its new tests set aside; else a broken verify
        command (raised)."""
        if verdict.passed:
            off = "" if _counted(verdict.counts) else _no_count(verdict)
            return Baseline(base, True, verdict.counts, floor_off=off)
        output = verdict.failure_output
        failing = verdict.failing or tuple(failing_tests(output))
        reason = verdict.reason or failure_reason(output) or error_line(output)
        if _counted(verdict.counts):
            return Baseline(base, False, verdict.counts, failing, reason)
        unbuilt = setaside.unbuilt_tests(output, where)
        if unbuilt:
            return self._set_aside(path, base, verify, unbuilt, reason)
        if failing:
            return Baseline(base, False, None, failing, reason, floor_off=_no_count(verdict))
        step = verdict.failed_step
        shown = " ".join(step.argv) if step is not None else "verify.test"
        code = step.exit_code if step is not None else "?"
        raise InvalidInputError(
            f"verification fails before any change: `{shown}` counted no test and named no "
            f"failing test (exit {code}): {error_line(output) or 'no output'}",
            hint="this is a broken verify command, not a failing test: fix verify.test (a "
            "misspelt program, script or subcommand?) and run again (no agent was called and "
            "no recovery counted)",
        )

    def _set_aside(
        self, path: Path, base: str, verify: Verifier, unbuilt: list[str], reason: str
    ) -> Baseline:
        """The base run again without its new test files that do not build, in a scratch
        tree of the base (the story's worktree is never touched): the rest's counts are the
        floor. Up to `setaside.ROUNDS` runs: each can reveal more such files."""
        aside: list[str] = []
        verdict: VerificationResult | None = None
        for _round in range(setaside.ROUNDS):
            wanted = [f for f in unbuilt if f not in aside]
            verdict, removed, where = self._without(path, base, verify, [*aside, *wanted])
            if not removed or removed == aside:
                break
            aside = removed
            if verdict.passed or _counted(verdict.counts):
                break
            unbuilt = setaside.unbuilt_tests(verdict.failure_output, where)
            if not unbuilt:
                break
        names = tuple(aside) or tuple(unbuilt)
        if verdict is None or not aside:
            why = f"its new tests ({', '.join(names)}) do not build and could not be set aside"
            return Baseline(base, False, None, names, reason, floor_off=why)
        shown = ", ".join(aside)
        if verdict.passed or _counted(verdict.counts):
            off = ""
            if not _counted(verdict.counts):
                off = f"with {shown} set aside, {_no_count(verdict)}"
            return Baseline(base, False, verdict.counts, names, reason, tuple(aside), off)
        detail = error_line(verdict.failure_output) or "no output"
        off = f"with {shown} set aside, the base's tests still do not run: {detail}"
        return Baseline(base, False, None, names, reason, tuple(aside), off)

    def _without(
        self, path: Path, base: str, verify: Verifier, files: list[str]
    ) -> tuple[VerificationResult, list[str], Path]:
        """The base's verification in a scratch tree without `files` (those it has), with the
        folder it ran in."""
        removed: list[str] = []

        def prepare(tree: Path) -> None:
            removed.extend(setaside.remove(tree, files))

        verdict, _safe, where = self._in_temporary_tree(path, base, verify, prepare)
        return verdict, removed, where

    def known(self, path: Path, base: str) -> Baseline | None:
        """The base's baseline when it was already taken (in this process or cached)."""
        if not self.settings.baseline or not self.settings.commands:
            return None
        key = self._key(base, path)
        found = self._baselines.get(key) or self._load(key)
        if found is not None:
            self._bases[os.path.abspath(path)] = base
            self._baselines[key] = found
            self._safe[os.path.abspath(path)] = found.safe_path
        return found

    def _key(self, base: str, path: Path) -> str:
        # One cache per project (its own `.ai-sdlc/state`): the project's folder in the
        # repository is implied.
        settings = self.settings
        data = [BASELINE_FORMAT, base, list(settings.commands), settings.junit]
        if settings.setup or settings.env:  # (a key without them stays as it was)
            data += [list(settings.setup), [list(pair) for pair in settings.env]]
        return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:24]

    def _load(self, key: str) -> Baseline | None:
        try:
            data = json.loads((self.state / "baselines" / f"{key}.json").read_text("utf-8"))
            return Baseline(
                str(data["base"]),
                bool(data["passed"]),
                TestCounts.from_dict(data.get("counts")),
                tuple(str(n) for n in data.get("failing") or ()),
                str(data.get("reason") or ""),
                tuple(str(n) for n in data.get("set_aside") or ()),
                str(data.get("floor_off") or ""),
                bool(data.get("safe_path")),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _save(self, key: str, baseline: Baseline) -> None:
        folder = self.state / "baselines"
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / f"{key}.json", json.dumps(baseline.to_dict(), indent=1))

    def _safely(self, path: Path, verify: Verifier) -> tuple[VerificationResult, bool]:
        """The base's verification with Python's safe path, unless that hides a module the
        project folder holds (`No module named 'calc'` with `calc.py` there) and the run
        without it does better (`_score`): then that run, and safe path off for the story."""
        where = os.path.abspath(path)
        self._safe[where] = True
        self._deciding.add(where)
        try:
            safe = self._run(path, verify)
        finally:
            self._deciding.discard(where)
        missing = {m.split(".")[0] for m in _MISSING_MODULE.findall(safe.failure_output)}
        if safe.passed or not any(_top_level(path, m) for m in missing):
            return safe, True
        self._safe[where] = False
        plain = self._run(path, verify)
        if plain.passed or _score(plain) > _score(safe):
            return plain, False
        self._safe[where] = True
        return safe, True

    def _in_temporary_tree(
        self,
        path: Path,
        base: str,
        verify: Verifier,
        prepare: Callable[[Path], None] | None = None,
    ) -> tuple[VerificationResult, bool, Path]:
        """The base checked out on its own (the story's worktree has moved on since, or
        `prepare` changes the checkout: files set aside), with whether safe path held and the
        folder it ran in (gone by then; its name reads paths in the output)."""
        prefix = _git_text(path, "rev-parse", "--show-prefix") or ""
        folder = self.state / "baseline-trees"
        folder.mkdir(parents=True, exist_ok=True)
        tree = Path(tempfile.mkdtemp(prefix=f"{base[:12]}-", dir=folder))  # one per process
        tree.rmdir()  # `worktree add` makes it
        if _git_text(path, "worktree", "add", "--detach", "--quiet", str(tree), base) is None:
            raise InvalidInputError(f"cannot check out the story's base {base[:12]} to verify it")
        try:
            if prepare is not None:
                prepare(tree / prefix)
            verdict, safe = self._safely(tree / prefix, verify)
            return verdict, safe, tree / prefix
        finally:
            _git_text(path, "worktree", "remove", "--force", "--force", str(tree))
            shutil.rmtree(tree, ignore_errors=True)

    # --- judging an attempt -----------------------------------------------------------------
    def recover(self, path: Path) -> list[str]:
        """Put back test files a killed run left in their base versions."""
        return protect.restore_pending(path, self.state / "protected")

    def judge(
        self,
        path: Path,
        base: str | None,
        verdict: VerificationResult,
        verify: Verifier,
        *,
        allow_test_changes: bool = False,
    ) -> VerificationResult:
        """`verdict` (the attempt's own verification), failed when the attempt lowered the
        pass-count floor or changed a protected test so that the base's version fails."""
        try:
            return self._judge(path, base, verdict, verify, allow_test_changes)
        except OSError as exc:  # git could not compare with the base, a file not put in place
            raise GitError(
                f"cannot judge the change against its base {(base or '')[:12]}: {exc}",
                hint="check the story's worktree and branch (git status, git log), then run "
                "again; no recovery was counted",
            ) from None

    def _judge(
        self,
        path: Path,
        base: str | None,
        verdict: VerificationResult,
        verify: Verifier,
        allow_test_changes: bool,
    ) -> VerificationResult:
        verdict = self._with_junit(path, verdict)
        baseline = self.baseline(path, base, verify) if base is not None else None
        if baseline is None or base is None:
            return verdict
        judged: dict[str, Any] = {
            "base": base,
            "base_counts": baseline.counts.to_dict() if baseline.counts else None,
            "counts": verdict.counts.to_dict() if verdict.counts else None,
            "allow_test_changes": allow_test_changes,
        }
        if baseline.floor_off:
            judged["floor_off"] = baseline.floor_off
        # What decides the verdict is held as it was at the base, whatever the tests said.
        # The tree's changes are listed once (three git processes) for every check below.
        changed = protect.changed_files(path, base)
        new_files = held.untracked(path)
        held_now = held.held_changes(path, base, self.settings.commands, changed + new_files)
        if held_now:
            judged["held_changed"] = [held.describe(h) for h in held_now]
        if held_now and not allow_test_changes:
            return reasons.failed(
                verdict, reasons.held_reason(held_now), judged, kept=not verdict.passed
            )
        if not verdict.passed:
            return verdict
        if not allow_test_changes:
            files, sections = protect.protected_changes(
                path, base, self.settings.protected, changed
            )
            judged["protected_changed"] = files + sections
            if sections:
                return reasons.failed(
                    verdict,
                    f"{sections[0]}: the story's change edits the project's test configuration "
                    "(protected; a story that must change it sets allow_test_changes: true)",
                    judged,
                )
            # Test configuration the attempt added: the base's suite runs without it (and
            # without the new tests that may rely on it).
            config, added = protect.added_configuration(
                path, base, self.settings.protected, changed, [u for u in new_files if u[0] == "A"]
            )
            judged["protected_added"] = config
            again_files = files + config + added if config else files
            linked = [(f, protect.linked_folder(path, f)) for f in again_files]
            linked = [(f, link) for f, link in linked if link is not None]
            if linked:
                file, link = linked[0]
                reason = f"{file}: the story's change makes its folder {link} a symlink"
                return reasons.failed(verdict, reason, judged)
            folders = [f for f in files if (path / f).is_dir() and not (path / f).is_symlink()]
            if folders:
                reason = f"{folders[0]}: the story's change replaces this test file by a folder"
                return reasons.failed(verdict, reason, judged)
            if again_files:
                state = self.state / "protected"
                with protect.base_versions_in_place(path, base, again_files, state):
                    again = self._run(path, verify)
                judged["base_tests_counts"] = again.counts.to_dict() if again.counts else None
                if not again.passed:
                    reason = (
                        reasons.weakened(files, again) if files else reasons.added(config, again)
                    )
                    return reasons.failed(verdict, reason, judged, again)
                floor = _floor(baseline, again)
                if floor:
                    return reasons.failed(
                        verdict, f"with the base's tests put back, {floor}", judged
                    )
        floor = "" if allow_test_changes else _floor(baseline, verdict)
        if floor:
            return reasons.failed(verdict, floor, judged)
        return msgspec.structs.replace(verdict, judged=judged)

    def tests_diff(self, path: Path, base: str | None) -> str:
        """The attempt's test changes against `base` ("" when none or unknown)."""
        if base is None:
            return ""
        # A diff shows only what the commit holds: its held files are found in its own changes.
        changed = protect.run_quietly(
            lambda: held.held_changes(
                path, base, self.settings.commands, protect.changed_files(path, base)
            )
        )
        extra = [file for file, _what in changed or ()]
        return (
            protect.run_quietly(
                lambda: protect.diff_of_tests(path, base, self.settings.protected, extra=extra)
            )
            or ""
        )

    # --- running ----------------------------------------------------------------------------
    def _run(self, path: Path, verify: Verifier) -> VerificationResult:
        report = self._junit_path(path)
        if report is not None:
            report.unlink(missing_ok=True)
        return self._with_junit(path, verify(path))

    def _junit_path(self, path: Path) -> Path | None:
        return path / self.settings.junit if self.settings.junit else None

    def _with_junit(self, path: Path, verdict: VerificationResult) -> VerificationResult:
        report = self._junit_path(path)
        if report is None:
            return verdict
        counts = parse_junit(report)
        report.unlink(missing_ok=True)  # ours, read: never committed as the agent's work
        # Missing: the judge's own report overrode one the project's `addopts` asks for
        # (see `verify.pytest_run`); the counts read from the run stand.
        return msgspec.structs.replace(verdict, counts=counts or verdict.counts)


def held_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` for a verification: the toolchains' per-user settings files in the agents'
    reach switched off (`HELD_SETTINGS`), unless the user's environment names its own."""
    return {**dict(HELD_SETTINGS), **environ}


def lost_project_module(path: Path, verdict: VerificationResult) -> bool:
    """The verification failed only because safe path hid a module the work tree's folder
    holds now (a test-first story's new module: it was not there when the base was verified).
    The caller runs it again without safe path; a module that shadows the runner is the held
    check's to catch (`verify/held`)."""
    if verdict.passed:
        return False
    missing = {m.split(".")[0] for m in _MISSING_MODULE.findall(verdict.failure_output)}
    return any(_top_level(path, m) for m in missing)


def _top_level(path: Path, module: str) -> bool:
    """`module` is a module or package in the folder `path` itself."""
    return (path / f"{module}.py").is_file() or (path / module / "__init__.py").is_file()


def _score(verdict: VerificationResult) -> tuple[int, int]:
    """More passing, then fewer failing (pytest stops at collection errors: a module found
    again may only mean one error fewer)."""
    counts = verdict.counts
    return (counts.passed, -counts.failed) if counts else (0, -(10**9))


def _at(path: Path, base: str) -> bool:
    """The work tree is the base, untouched: HEAD is `base` and nothing differs from it."""
    status = _git_text(
        path, "status", "--porcelain=v2", "--branch", "--untracked-files=normal", "--", "."
    )
    if status is None:
        return False
    lines = status.splitlines()
    return f"# branch.oid {base}" in lines and all(ln.startswith("# ") for ln in lines)


def _clean(path: Path) -> None:
    """Undo what the base's verification wrote into the work tree (it was the untouched base
    before: nothing there is anyone's work), so that the phase the baseline ran before (a
    read-only one) is not blamed for it. Ignored files (caches, build output) stay."""
    status = _git_text(
        path, "status", "--porcelain", "-z", "--untracked-files=all", "--", ".", strip=False
    )
    if not status:
        return
    entries = [e for e in status.split("\0") if len(e) > 3]
    # porcelain paths are relative to the repository's top, whatever the folder
    untracked = [f":(top,literal){e[3:]}" for e in entries if e.startswith("?? ")]
    tracked = [f":(top,literal){e[3:]}" for e in entries if not e.startswith("?? ")]
    if untracked:
        _git_text(path, "clean", "-f", "-q", "--", *untracked)
    if tracked:
        _git_text(path, "checkout", "-q", "HEAD", "--", *tracked)


def _git_text(path: Path, *args: str, strip: bool = True) -> str | None:
    try:
        done = subprocess.run(
            ["git", *git_options(path), *args],  # hardened; a story worktree's own git folder
            cwd=path,
            env=clean_env({"GIT_OPTIONAL_LOCKS": "0"}),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=protect.GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() if strip else done.stdout


def _stop_reason(verdict: VerificationResult) -> str | None:
    """Why a base's failed verification means the story cannot start (None: a test step that
    fails, the expected start of a test-first story; a step killed by a signal did not fail,
    it never finished)."""
    step = verdict.failed_step
    if step is None:
        return None
    first = verdict.reason or first_line(step.output)
    if not step.started:
        return first_line(step.output)
    if step.timed_out:
        return f"step {step.name!r} timed out: {first}"
    if step.exit_code < 0:  # killed by a signal: it never finished, so the base is not known
        return f"step {step.name!r} was killed by {_signal_name(-step.exit_code)}: {first}"
    if step.exit_code in NOT_RUNNABLE:
        return (
            f"step {step.name!r} exited {step.exit_code} (a command was not found or not "
            f"executable): {first_line(step.output)}"
        )
    if step.name != "test":
        return f"step {step.name!r} failed (exit {step.exit_code}): {first}"
    if step.exit_code in (3, 4) and "pytest" in " ".join(step.argv):
        return f"pytest could not run (exit {step.exit_code}: usage or internal error): {first}"
    return None


def _counted(counts: TestCounts | None) -> bool:
    """The run counted at least one test."""
    return counts is not None and counts.passed + counts.failed + counts.skipped > 0


def _no_count(verdict: VerificationResult) -> str:
    """Why a run gives no pass-count floor (its output had no summary we can read)."""
    if verdict.counts is not None:
        return "the base's test run counted no test"
    argv = next((s.argv for s in verdict.steps if s.name == "test"), ())
    if argv[:2] == ("go", "test") and "-v" not in argv:
        return "`go test` prints no count of passing tests without -v (add -v to verify.test)"
    return "no test runner's summary could be read from the base's test output"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _floor(baseline: Baseline, verdict: VerificationResult) -> str:
    """The pass-count floor, or "" when it holds."""
    base, now = baseline.counts, verdict.counts
    if base is None:
        return ""
    if now is None:
        return (
            f"no test summary could be read from this attempt's verification, while the base "
            f"reported {base.shown()}"
        )
    needed = base.passed + base.failed
    if now.passed < needed:
        failing = f" and {base.failed} failing (which must now pass)" if base.failed else ""
        return (
            f"pass-count floor: {count(now.passed, 'test')} passed, "
            f"the base had {base.passed} passing"
            f"{failing}: at least {needed} must pass ({now.shown()})"
        )
    if now.skipped > base.skipped:
        return (
            f"pass-count floor: skipped tests rose from {base.skipped} to {now.skipped} "
            f"({now.shown()})"
        )
    return ""
