"""The pass-count floor and the untouched base, each pinned on its own: a test failing at the
base may not disappear, skipped tests may not rise (pytest's deselected ones included), and a
worktree at the base commit with uncommitted work is not the base (its baseline comes from a
checkout of the base, and the work stays). The test command is a small script that prints a
pytest summary line from the worktree's `counts.txt`, so each case sets exact figures."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.verify import run_commands
from ai_sdlc.verify.commands import VerificationResult
from ai_sdlc.verify.counts import parse_counts
from ai_sdlc.verify.judge import Judge, JudgeSettings
from tests.support.git_support import git, git_env  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("git_env")

REPORT = """\
import sys
from pathlib import Path
line = Path("counts.txt").read_text().strip()
print(f"=== {line} in 0.01s ===")
sys.exit(1 if "failed" in line else 0)
"""


def project(tmp_path: Path, counts: str) -> tuple[Path, str, str]:
    """(repository, base commit, test command) with `counts` as the base's summary."""
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "counts.txt").write_text(counts + "\n")
    (root / "lib.py").write_text("VALUE = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD").strip(), shlex.join([sys.executable, str(script)])


def attempt(root: Path, counts: str) -> None:
    """An attempt's commit: new code and the figures its verification will print."""
    (root / "lib.py").write_text("VALUE = 2\n")
    (root / "counts.txt").write_text(counts + "\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "attempt")


def judged(tmp_path: Path, base_counts: str, attempt_counts: str) -> VerificationResult:
    root, base, command = project(tmp_path, base_counts)

    def verify(path: Path) -> VerificationResult:
        return run_commands([("test", command)], cwd=path, timeout=60)

    judge = Judge(JudgeSettings(commands=(("test", command),)), tmp_path / "state")
    assert judge.baseline(root, base, verify) is not None
    attempt(root, attempt_counts)
    verdict = verify(root)
    assert verdict.passed, verdict.failure_output  # the attempt's own run passes
    return judge.judge(root, base, verdict, verify)


def test_a_failing_base_test_that_disappears_fails_the_floor(tmp_path: Path) -> None:
    result = judged(tmp_path, "3 passed, 1 failed", "3 passed")
    assert not result.passed
    assert "pass-count floor" in result.reason and "at least 4 must pass" in result.reason


def test_the_failing_base_test_now_passing_holds_the_floor(tmp_path: Path) -> None:
    assert judged(tmp_path, "3 passed, 1 failed", "4 passed").passed


def test_more_skipped_tests_than_the_base_fail_the_floor(tmp_path: Path) -> None:
    result = judged(tmp_path, "3 passed, 1 failed", "4 passed, 1 skipped")
    assert not result.passed
    assert "skipped tests rose from 0 to 1" in result.reason


def test_deselected_tests_count_as_skipped(tmp_path: Path) -> None:
    counts = parse_counts("=== 4 passed, 2 deselected in 0.10s ===")
    assert counts is not None and (counts.passed, counts.skipped) == (4, 2)
    result = judged(tmp_path, "4 passed", "4 passed, 1 deselected")
    assert not result.passed
    assert "skipped tests rose from 0 to 1" in result.reason


def test_uncommitted_work_at_the_base_commit_is_not_the_base(tmp_path: Path) -> None:
    root, base, command = project(tmp_path, "3 passed, 1 failed")
    (root / "counts.txt").write_text("9 passed\n")  # someone's uncommitted work
    (root / "notes.txt").write_text("untracked work\n")

    def verify(path: Path) -> VerificationResult:
        return run_commands([("test", command)], cwd=path, timeout=60)

    judge = Judge(JudgeSettings(commands=(("test", command),)), tmp_path / "state")
    baseline = judge.baseline(root, base, verify)
    assert baseline is not None and baseline.counts is not None
    assert (baseline.counts.passed, baseline.counts.failed) == (3, 1)  # the base's figures
    assert (root / "counts.txt").read_text() == "9 passed\n"  # the work is still there
    assert (root / "notes.txt").read_text() == "untracked work\n"
