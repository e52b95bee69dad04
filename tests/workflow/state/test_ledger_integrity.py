"""Issue 15 through the real CLI: the global recovery limit cannot be escaped.

Each numbered test is one case of the issue's "Done when": a plain `unblock` after a phase limit,
a runner killed mid-verification, a timing-out agent, a verify command that lowers the story's
counters (by editing the file, or with `git checkout`), an inconsistent breakdown, and the
limit's ceiling. Verification executions are counted by the verify command itself: a small
Python script (run without a shell) that appends one line to a counter file each time it runs.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, allow_unverified, run_cli
from tests.support.paths import FAKES
from tests.support.records import records_folder, records_path
from tests.support.waits import pids_holding, wait_until_gone

pytestmark = pytest.mark.e2e

SID = "S-0001"
LIMIT_10 = "Global recovery limit exceeded (10/10)"
AGENT = [sys.executable, str(FAKES / "cli_agent.py")]

#: The verify command: count the execution, optionally do something hostile, then fail. (It
#: starts for every verification: `re` and `subprocess` only in the actions that use them.)
VERIFY_SCRIPT = r"""
import os, signal, sys
counter, action = sys.argv[1], sys.argv[2]
with open(counter, "a") as fh:
    fh.write("ran\n")
if action == "kill-runner":
    os.kill(os.getppid(), signal.SIGKILL)
elif action == "zero-counters":
    import re
    story = sys.argv[3]
    with open(story, encoding="utf-8") as fh:
        text = fh.read()
    names = ("total_recovery_attempts|implementation_retry_count|retry_count|refinement_count"
             "|implementation_retry|rework|api_retry|refinement")
    text = re.sub(r"(?m)^(\s*(?:%s)): \d+$" % names, r"\1: 0", text)
    with open(story, "w", encoding="utf-8") as fh:
        fh.write(text)
elif action == "git-checkout":
    import subprocess
    subprocess.run(["git", "checkout", "--", ".ai-sdlc"], check=False)  # none in a worktree
print("FAILED tests/test_calc.py::test_multiply - assert 9 == 20")
sys.exit(1)
"""


# --- helpers --------------------------------------------------------------------------------
def new_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert run_cli(root, "init").returncode == 0
    allow_unverified(root)
    assert run_cli(root, "add", "Add multiply").returncode == 0
    return root


def use_verify(root: Path, tmp_path: Path, action: str = "fail", *extra: str) -> Path:
    """Configure `verify.test` as the counting script; returns its counter file."""
    script = tmp_path / "verify_cmd.py"
    script.write_text(VERIFY_SCRIPT)
    counter = records_folder(root) / "verifications.txt"
    command = shlex.join([sys.executable, str(script), str(counter), action, *extra])
    result = run_cli(root, "config", "verify.test", command)
    assert result.returncode == 0, result.output
    return counter


def executions(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def story_file(root: Path) -> Path:
    return root / ".ai-sdlc" / "stories" / SID / "story.md"


def frontmatter(root: Path) -> dict[str, Any]:
    result = run_cli(root, "show", SID, "--json")
    assert result.returncode == 0, result.output
    return dict(json.loads(result.stdout)["frontmatter"])


def events(root: Path) -> list[dict[str, Any]]:
    path = root / ".ai-sdlc" / "stories" / SID / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def set_line(root: Path, key: str, value: str) -> None:
    """Hand-edit one top-level frontmatter line (added when absent), as a user would."""
    path = story_file(root)
    text = path.read_text()
    head, body = text[4:].split("\n---\n", 1)
    lines = [ln for ln in head.splitlines() if not ln.startswith(f"{key}:")]
    kept: list[str] = []
    skipping = False
    for ln in lines:  # drop the old value's indented block too
        if ln.startswith(" ") and skipping:
            continue
        skipping = False
        kept.append(ln)
    path.write_text("---\n" + "\n".join([*kept, f"{key}: {value}"]) + "\n---\n" + body)


def near_the_limit(root: Path, spent: int) -> None:
    """Hand-edit `spent` implementation retries into the story (as a user restoring a story's
    history would; an edit upward is honoured): tests whose promise is the block at the limit,
    not the walk to it, start there (test_4's zeroing verify command walks the whole way)."""
    set_line(root, "total_recovery_attempts", str(spent))
    set_line(root, "recovery_breakdown", f"\n  implementation_retry: {spent}")


def assert_global_block(root: Path, result: CliResult, breakdown: dict[str, int]) -> None:
    assert result.returncode == 5, result.output
    assert LIMIT_10 in " ".join(result.output.split())
    fm = frontmatter(root)
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 10
    assert {k: v for k, v in fm["recovery_breakdown"].items() if v} == breakdown
    assert fm["blocked_reason"].startswith(LIMIT_10)


def run_until_blocked(root: Path, *args: str, max_runs: int = 30, **kw: Any) -> list[CliResult]:
    """`run` again and again, as an unattended loop would, with a plain `unblock` after any
    phase-limit block, until the global limit stops the story."""
    results: list[CliResult] = []
    for _ in range(max_runs):
        result = run_cli(root, "run", SID, *args, **kw)
        results.append(result)
        if result.returncode == 5 and LIMIT_10 in " ".join(result.output.split()):
            return results
        if result.returncode == 5:
            assert run_cli(root, "unblock", SID).returncode == 0
    raise AssertionError(f"not blocked by the global limit after {max_runs} runs")


# --- (1) plain unblock after a phase limit ----------------------------------------------------
def test_1_plain_unblock_then_one_failure_is_blocked_by_the_global_limit(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    counter = use_verify(root, tmp_path)
    first = run_cli(root, "run", SID)
    assert first.returncode == 5, first.output
    assert "Implementation failed verification" in first.output  # the phase limit
    fm = frontmatter(root)
    spent, kinds = fm["total_recovery_attempts"], dict(fm["recovery_breakdown"])
    assert spent == executions(counter)  # every failed attempt was counted
    # A plain unblock keeps the counters: the phase limit, still exceeded, blocks again after
    # one more failure, which counts.
    unblocked = run_cli(root, "unblock", SID)
    assert unblocked.returncode == 0, unblocked.output
    fm = frontmatter(root)
    assert fm["status"] == "in-progress"
    assert fm["total_recovery_attempts"] == spent
    assert dict(fm["recovery_breakdown"]) == kinds
    before = executions(counter)
    again = run_cli(root, "run", SID)
    assert again.returncode == 5, again.output
    assert "Implementation failed verification" in again.output
    assert executions(counter) == before + 1
    fm = frontmatter(root)
    assert fm["total_recovery_attempts"] == spent + 1
    assert fm["recovery_breakdown"]["implementation_retry"] == kinds["implementation_retry"] + 1
    spent += 1
    # Hand-edited to 9, unblocked plainly (the 9 kept): the next failure hits the global limit.
    set_line(root, "total_recovery_attempts", "9")
    assert run_cli(root, "unblock", SID).returncode == 0
    assert frontmatter(root)["total_recovery_attempts"] == 9  # a plain unblock keeps counters
    before = executions(counter)
    again = run_cli(root, "run", SID)
    assert executions(counter) - before == 1
    assert_global_block(root, again, {"implementation_retry": spent + 1})
    message = " ".join(again.output.split())
    assert f"Breakdown: {spent + 1} implementation retries, {9 - spent} unattributed" in message
    # The global block wins over the phase limit the same failure reached.
    blocked = [e for e in events(root) if e["action"] == "blocked"]
    assert blocked[-1]["outcome"] == "global_recovery_limit"
    # Blocked: another run spends nothing.
    assert run_cli(root, "run", SID).returncode == 5
    assert executions(counter) - before == 1


# --- (2) a runner killed during verification ------------------------------------------------
def test_2_runs_killed_mid_verification_are_counted_until_the_limit(tmp_path: Path) -> None:
    """The verify command SIGKILLs its parent (the runner) after counting itself: every run
    dies with the attempt's reservation open, and the next run counts it first. The story
    starts at 8 (hand-edited): two deaths, each counted by the run after it, reach the limit."""
    root = new_project(tmp_path)
    counter = use_verify(root, tmp_path, "kill-runner")
    near_the_limit(root, 8)
    results: list[CliResult] = []
    killed_tmp = tmp_path / "killed-tmp"  # a killed run cannot remove its temp folders
    killed_tmp.mkdir()
    for _ in range(6):
        # A real process: it gets killed. Unsandboxed: the sandbox's signal scoping (Landlock
        # ABI 6) stops a verify command from killing the runner
        # (tests/sandbox/test_sandbox_units.py).
        env = {"TMPDIR": str(killed_tmp)}
        result = run_cli(root, "run", SID, "--no-sandbox", env=env, subprocess=True)
        results.append(result)
        if result.returncode != -9:
            break
    assert [r.returncode for r in results[:-1]] == [-9, -9]
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    assert executions(counter) == 2  # the 3rd run counts the 2nd death and stops
    stale = [e for e in events(root) if e["action"] == "recovery" and e.get("stale")]
    assert len(stale) == 2
    assert all(e["recovery_kind"] == "implementation_retry" for e in stale)


# --- (3) a timing-out agent -------------------------------------------------------------------
def test_3_phase_timeouts_are_retried_counted_and_exit_4(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    pids = records_path(root) / "agent-pids.json"
    template = [*AGENT, "hang", str(pids)]
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        "limits:\n  phase_timeout: 1\n"  # time for an agent to write its pids
        "resilience:\n  policies:\n    llm:\n      max_attempts: 3\n"
        "      initial_delay: 0.01\n      max_delay: 0.05\n"
    )
    allow_unverified(root)
    records_folder(root)  # the agents' pids
    env = {"AI_SDLC_PROVIDER": "command"}
    first = run_cli(root, "run", SID, env=env)
    assert first.returncode == 4, first.output
    fm = frontmatter(root)
    retries = fm["total_recovery_attempts"]
    assert retries == 2  # max_attempts 3: three calls, each timed out; two retries counted
    assert {k: v for k, v in fm["recovery_breakdown"].items() if v} == {"api_retry": retries}
    assert fm["status"] == "backlog"  # the refine attempt itself was released, not passed
    counted = [e for e in events(root) if e["action"] == "recovery"]
    assert len(counted) == retries
    assert all(e["recovery_kind"] == "api_retry" for e in counted)
    released = [e for e in events(root) if e["action"] == "attempt_released"]
    assert [e["phase"] for e in released] == ["refine"]
    second = run_cli(root, "run", SID, env=env)
    assert second.returncode == 4, second.output
    again = frontmatter(root)
    assert again["total_recovery_attempts"] == 2 * retries
    assert again["recovery_breakdown"]["api_retry"] == 2 * retries
    # The timed-out agents were killed with their children, not left running (they sleep
    # 600 s: only the kill ends them within the guard).
    # Each writes the pids of its PID namespace: the host's are found by the file in their argv.
    assert pids.exists(), "no agent got to write its pids within its 1 s limit"
    for pid in pids_holding(str(pids)):
        wait_until_gone(pid, "a timed-out agent or its child")


# --- (4) a verify command that lowers the counters ---------------------------------------------
def test_4_a_verify_command_zeroing_the_counters_is_restored_from_the_ledger(
    tmp_path: Path,
) -> None:
    """Outside git the workspace is the project folder: the verify command can rewrite
    story.md. It zeroes every counter line and fails; the ledger restores the figures."""
    root = new_project(tmp_path)
    counter = use_verify(root, tmp_path, "zero-counters", str(story_file(root)))
    results = run_until_blocked(root)
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    assert executions(counter) <= 11
    tampered = [e for e in events(root) if e["action"] == "tamper_detected"]
    assert tampered, "the lowered counters were not reported"
    assert "total_recovery_attempts" in tampered[-1]["changed"]
    ledger = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    assert json.loads(ledger.read_text().splitlines()[-1])["total"] == 10


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


def committed_project(tmp_path: Path) -> tuple[Path, Path]:
    """A git project whose stories are committed, verify = `git checkout -- .ai-sdlc` + fail."""
    root = new_project(tmp_path)
    git(root, "init", "-q")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    counter = use_verify(root, tmp_path, "git-checkout")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "stories")
    assert "story.md" in git(root, "ls-files", ".ai-sdlc")
    return root, counter


def test_4_git_checkout_of_committed_stories_does_not_reset_the_limit(tmp_path: Path) -> None:
    """The stories are committed; the verify command runs `git checkout -- .ai-sdlc` and fails.
    With `--no-worktree` it runs in the project folder, so it really puts back the committed
    story.md (status backlog, counters 0, no phase flags): the story goes through refine,
    research and plan again each time, but its ledger (git-ignored `.ai-sdlc/state/`) is
    untouched and restores the counters, so the limit still blocks at 10. (The story starts at
    a hand-edited 8, not committed: the checkout puts back 0.)"""
    root, counter = committed_project(tmp_path)
    near_the_limit(root, 8)
    results = run_until_blocked(root, "--no-worktree")
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    assert executions(counter) == 2
    assert [e for e in events(root) if e["action"] == "tamper_detected"]
    started = [e["phase"] for e in events(root) if e["action"] == "phase_started"]
    assert started.count("refine") > 1  # the checkout really reset the story's status


def test_4_in_a_story_worktree_git_checkout_cannot_reach_the_story(tmp_path: Path) -> None:
    """With the worktree workflow the verify command runs in the story's worktree: the same
    `git checkout -- .ai-sdlc` only touches that checkout's copy, never the story the runner
    owns in the main checkout, so nothing is tampered with and every failure simply counts."""
    root, counter = committed_project(tmp_path)
    result = run_cli(root, "run", SID)
    assert result.returncode == 5, result.output
    assert "Implementation failed verification" in result.output  # the phase limit
    fm = frontmatter(root)
    assert fm.get("worktree_path")
    assert fm["total_recovery_attempts"] == 4
    assert executions(counter) == 5  # the 4 attempts and the baseline on the untouched base
    assert not [e for e in events(root) if e["action"] in ("tamper_detected", "ledger_resynced")]


# --- (5) an inconsistent breakdown --------------------------------------------------------------
def test_5_a_breakdown_above_the_total_blocks_before_any_agent_call(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_line(root, "total_recovery_attempts", "0")
    set_line(root, "recovery_breakdown", "\n  implementation_retry: 50")
    usage = root / ".ai-sdlc" / "state" / "scripted-usage.json"
    result = run_cli(root, "run", SID)
    assert result.returncode == 5, result.output
    message = " ".join(result.output.split())
    assert "Global recovery limit exceeded (50/10)" in message
    assert "Breakdown: 50 implementation retries." in message
    assert not usage.exists()  # the scripted provider was never called
    assert [e for e in events(root) if e["action"] == "phase_started"] == []
    fm = frontmatter(root)
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 50


# --- (6) the ceiling ------------------------------------------------------------------------------
def test_6_the_limit_has_a_ceiling_and_the_environment_cannot_raise_it(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    config = root / ".ai-sdlc" / "config.yaml"
    before = config.read_bytes() if config.exists() else None
    for value in ("99999", "99999999999999999999", "1001", "0"):
        refused = run_cli(root, "config", "limits.global_recovery", value)
        assert refused.returncode == 2, (value, refused.output)  # typed: a usage error
        assert "limits.global_recovery" in refused.stderr
        assert "1 to 1,000" in refused.stderr
        assert "Traceback" not in refused.output
    assert (config.read_bytes() if config.exists() else None) == before  # nothing written
    assert run_cli(root, "config", "limits.global_recovery", "1000").returncode == 0
    assert run_cli(root, "config", "limits.global_recovery", "10").returncode == 0
    usage = root / ".ai-sdlc" / "state" / "scripted-usage.json"
    raised = run_cli(root, "run", SID, env={"AI_SDLC_LIMITS__GLOBAL_RECOVERY": "1000000"})
    assert raised.returncode == 3, raised.output
    text = " ".join(raised.output.split())
    assert "environment" in text and "limits.global_recovery" in text and "1 to 1,000" in text
    assert "Traceback" not in raised.output
    # Within the ceiling but above the project's value: refused too, naming both.
    looser = run_cli(root, "run", SID, env={"AI_SDLC_LIMITS__GLOBAL_RECOVERY": "11"})
    assert looser.returncode == 3, looser.output
    text = " ".join(looser.output.split())
    assert "AI_SDLC_LIMITS__GLOBAL_RECOVERY=11" in text
    assert "would loosen the guardrail limits.global_recovery" in text
    assert "the project's value is 10" in text
    assert "Traceback" not in looser.output
    assert not usage.exists() and not events(root)  # refused before anything ran
    # Lowering is allowed: the story blocks at the environment's stricter limit.
    set_line(root, "total_recovery_attempts", "2")
    lower = run_cli(root, "run", SID, env={"AI_SDLC_LIMITS__GLOBAL_RECOVERY": "2"})
    assert lower.returncode == 5, lower.output
    assert "Global recovery limit exceeded (2/2)" in " ".join(lower.output.split())


# --- unblock -------------------------------------------------------------------------------------
REFINE_REJECTS = """
rules:
  - phase: refine
    times: 6
    decision: REJECTED
    feedback: Acceptance criteria are missing.
"""


def test_reset_unblock_of_a_story_blocked_in_refinement_refines_again(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    use_verify(root, tmp_path)
    (root / ".ai-sdlc" / "scripted.yaml").write_text(REFINE_REJECTS)
    blocked = run_cli(root, "run", SID)
    assert blocked.returncode == 5, blocked.output
    assert "Refinement did not converge" in blocked.output
    fm = frontmatter(root)
    assert fm["status"] == "blocked" and fm["recovery_breakdown"]["refinement"] == 6
    assert run_cli(root, "unblock", SID, "--reset-retries").returncode == 0
    fm = frontmatter(root)
    assert fm["status"] == "backlog"  # not `ready`: refinement was never passed
    assert fm["total_recovery_attempts"] == 0
    ledger = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    last = json.loads(ledger.read_text().splitlines()[-1])
    assert last["op"] == "unblock" and last["total"] == 0  # the reset is in the ledger
    (root / ".ai-sdlc" / "scripted.yaml").write_text("rules: []\n")
    seen = len(events(root))
    run_cli(root, "run", SID)
    started = [e["phase"] for e in events(root)[seen:] if e["action"] == "phase_started"]
    assert started[0] == "refine"
    # No tamper was reported: the reset explained the lower figures.
    assert not [e for e in events(root) if e["action"] == "tamper_detected"]
