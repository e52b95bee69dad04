"""Hand-made promise mutants (`make promise-mutants`): each is one small, plausible bug at a
promise of the sandbox, the judge, the ledger, git hardening, the config guard or redaction, and
names the tests that must catch it. `make mutants` (mutmut) swaps operators mechanically; these
are the second lines of defence a person would break by mistake (issue 35).

For each mutant a copy of `src/` is made, the one text replacement applied (it must match
exactly once: a mutant that no longer applies is a failure, so the list stays true as the code
moves), and its tests run against the copy (`PYTHONPATH` puts it before the editable install;
the sandbox launcher is started from the copy too). A mutant is killed when the tests fail.
Prints a table; exits 1 when any mutant survives or no longer applies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    promise: str
    file: str  # under src/ai_sdlc/
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "launcher-fails-open",
        "a command whose Landlock restriction cannot be applied does not run (exit 126)",
        "sandbox/launcher.py",
        "            _refuse(exc)\n        _exec(executable, argv)\n    # Not a writer",
        "            pass\n        _exec(executable, argv)\n    # Not a writer",
        ("tests/sandbox/test_launcher_fail_closed.py",),
    ),
    Mutant(
        "truncate-not-handled",
        "a sandboxed child cannot truncate a file outside its writable roots by path",
        "sandbox/landlock.py",
        "    if abi >= 3:\n        rights |= TRUNCATE\n",
        "",
        (
            "tests/sandbox/test_sandbox_promises.py::test_truncating_by_path_outside_the_writable_roots_is_denied",
        ),
    ),
    Mutant(
        "floor-counts-only-passes",
        "a test that failed at the base must pass now; it may not disappear",
        "verify/judge.py",
        "    needed = base.passed + base.failed\n",
        "    needed = base.passed\n",
        (
            "tests/verify/test_judge_promises.py::test_a_failing_base_test_that_disappears_fails_the_floor",
        ),
    ),
    Mutant(
        "skipped-comparison-reversed",
        "an attempt may not skip more tests than the base",
        "verify/judge.py",
        "    if now.skipped > base.skipped:\n",
        "    if now.skipped < base.skipped:\n",
        (
            "tests/verify/test_judge_promises.py::test_more_skipped_tests_than_the_base_fail_the_floor",
        ),
    ),
    Mutant(
        "dirty-base-taken-for-untouched",
        "a worktree at the base commit with uncommitted changes is not the untouched base",
        "verify/judge.py",
        'return f"# branch.oid {base}" in lines and all(ln.startswith("# ") for ln in lines)',
        'return f"# branch.oid {base}" in lines',
        (
            "tests/verify/test_judge_promises.py::test_uncommitted_work_at_the_base_commit_is_not_the_base",
        ),
    ),
    Mutant(
        "deselected-not-skipped",
        "tests pytest deselects count as skipped",
        "verify/counts.py",
        '    "deselected": "skipped",\n',
        "",
        ("tests/verify/test_judge_promises.py::test_deselected_tests_count_as_skipped",),
    ),
    Mutant(
        "ref-ignored-without-ledger",
        "with the ledger gone, the git ref alone restores the count",
        "workflow/state/anchor.py",
        "        if refs is not None:\n            ref = self.ref(story_id)",
        "        if refs is not None and tail.line:\n            ref = self.ref(story_id)",
        ("tests/workflow/state/test_ledger_ref_promise.py",),
    ),
    Mutant(
        "merged-read-as-done",
        "run.done_means: merged needs the pull request, not only status done",
        "workflow/state/readiness.py",
        'return has_pr if done_means in ("pr", "merged") else True',
        'return has_pr if done_means in ("pr",) else True',
        ("tests/workflow/state/test_readiness_promises.py",),
    ),
    Mutant(
        "commit-ignores-env-secrets",
        "a file holding the value of a credential-named variable is never committed",
        "git/staging.py",
        "    return redact(text) != text\n",
        "    return redact(text, environ={}) != text\n",
        ("tests/git/test_staging_promises.py",),
    ),
    Mutant(
        "git-worktrees-not-recorded",
        "git.worktrees is part of the accepted guardrail record",
        "config/guard.py",
        'GUARDED_KEYS = tuple(k for k in GUARDED if k.split(".", 1)[0] not in GUARDED_SECTIONS)',
        'GUARDED_KEYS = tuple(k for k in GUARDED if k.split(".", 1)[0] not in GUARDED_SECTIONS '
        'and k != "git.worktrees")',
        ("tests/config/test_guardrail_promises.py",),
    ),
    Mutant(
        "github-pat-not-redacted",
        "GitHub fine-grained tokens (github_pat_) are redacted",
        "secrets.py",
        '    r"github_pat_[A-Za-z0-9_]{16,}",\n',
        "",
        ("tests/test_secret_shapes.py",),
    ),
)


def run(mutant: Mutant) -> str:
    """'killed', 'survived' or 'does not apply'."""
    with tempfile.TemporaryDirectory(prefix="promise-mutant-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
        target = src / "ai_sdlc" / mutant.file
        text = target.read_text(encoding="utf-8")
        if text.count(mutant.old) != 1:
            return "does not apply"
        target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-x",
                "-n",
                "0",
                "-p",
                "no:randomly",
                *mutant.tests,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        return "survived" if done.returncode == 0 else "killed"


def main() -> int:
    chosen = [m for m in MUTANTS if not sys.argv[1:] or m.name in sys.argv[1:]]
    results = []
    for mutant in chosen:
        outcome = run(mutant)
        results.append((mutant, outcome))
        print(f"{outcome:15} {mutant.name:32} {mutant.promise}", flush=True)
    killed = sum(1 for _, o in results if o == "killed")
    print(f"\n{killed}/{len(results)} promise mutants killed")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
