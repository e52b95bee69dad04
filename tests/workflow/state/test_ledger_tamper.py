"""Issue 22, cases 1 and 5 through the real CLI: a hostile verify command attacks the recovery
ledger itself (`--no-sandbox`: the detection holds on its own), and the global limit still blocks
the story at exactly 10.

The verify command counts each execution, does one thing to the ledger (truncate it, delete it,
append a forged entry, `rm -rf .ai-sdlc/state`, replace it by a symbolic link, a folder or a
plain file), zeroes the story file's counters, and fails. The ledger's copies outside
`.ai-sdlc/state` (the user's state folder; the git ref `refs/ai-sdlc/ledger/<id>` in a git
repository) survive each of these, so every failed verification is counted once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STATE_HOME, CliResult, run_cli
from tests.workflow.state.test_ledger_integrity import (
    SID,
    assert_global_block,
    events,
    executions,
    frontmatter,
    near_the_limit,
    new_project,
    run_until_blocked,
    story_file,
)

pytestmark = pytest.mark.e2e

#: Count the execution, attack the ledger, zero the story file's counters, fail.
HOSTILE = r"""
import hashlib, json, os, re, shutil, sys
counter, action, ledger, story = sys.argv[1:5]
with open(counter, "a") as fh:
    fh.write("ran\n")
state = os.path.dirname(os.path.dirname(ledger))
if action == "truncate":
    open(ledger, "w").close()
elif action == "shorten":
    with open(ledger, "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    with open(ledger, "wb") as fh:
        fh.writelines(lines[: max(1, len(lines) // 2)])
elif action == "delete":
    os.remove(ledger)
elif action == "forge":
    with open(ledger, "rb") as fh:
        last = fh.read().splitlines()[-1]
    entry = json.loads(last)
    forged = dict(entry, op="unblock", seq=entry["seq"] + 100, total=0, breakdown={},
                  prev=hashlib.sha256(last).hexdigest(), open=None, prev_total=0)
    with open(ledger, "ab") as fh:
        fh.write(json.dumps(forged).encode() + b"\n")
elif action == "rm-state":
    shutil.rmtree(state)
elif action == "symlink":
    empty = os.path.join(os.path.dirname(counter), "empty.jsonl")
    open(empty, "w").close()
    os.remove(ledger)
    os.symlink(empty, ledger)
elif action == "folder":
    os.remove(ledger)
    os.mkdir(ledger)
elif action == "plain-file":
    shutil.rmtree(os.path.dirname(ledger))
    with open(os.path.dirname(ledger), "w") as fh:
        fh.write("{}\n")
with open(story, encoding="utf-8") as fh:
    text = fh.read()
names = ("total_recovery_attempts|implementation_retry_count|retry_count|refinement_count"
         "|implementation_retry|rework|api_retry|refinement")
text = re.sub(r"(?m)^(\s*(?:%s)): \d+$" % names, r"\1: 0", text)
with open(story, "w", encoding="utf-8") as fh:
    fh.write(text)
print("FAILED tests/test_calc.py::test_multiply - assert 9 == 20")
sys.exit(1)
"""

ACTIONS = ("truncate", "shorten", "delete", "forge", "rm-state", "symlink", "folder", "plain-file")


def ledger_path(root: Path) -> Path:
    return root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"


def hostile_verify(root: Path, tmp_path: Path, action: str) -> Path:
    script = tmp_path / "hostile_verify.py"
    script.write_text(HOSTILE)
    counter = tmp_path / "verifications.txt"
    argv = [sys.executable, str(script), str(counter), action]
    command = shlex.join([*argv, str(ledger_path(root)), str(story_file(root))])
    result = run_cli(root, "config", "verify.test", command)
    assert result.returncode == 0, result.output
    return counter


def tamper_events(root: Path) -> list[dict[str, Any]]:
    return [e for e in events(root) if e["action"] == "tamper_detected"]


def assert_no_crash(results: list[CliResult]) -> None:
    for result in results:
        assert "internal error" not in result.output, result.output
        assert "Traceback" not in result.output, result.output
        assert result.returncode in (0, 5), result.output


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout


def committed(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "stories")


#: The attack that walks the whole way from 0 (each run's phase limit, a plain unblock, the
#: next run); the others start from a hand-edited 8, where the block at 10 is the promise.
WALKS = "rm-state"


# --- case 1 and case 5: every attack on the ledger, outside git (user state folder alone) ----
@pytest.mark.parametrize("action", ACTIONS)
def test_an_attacked_ledger_still_blocks_at_exactly_10(tmp_path: Path, action: str) -> None:
    root = new_project(tmp_path)
    counter = hostile_verify(root, tmp_path, action)
    start = 0 if action == WALKS else 8
    if start:
        near_the_limit(root, start)
    results = run_until_blocked(root, "--no-sandbox")
    assert_no_crash(results[:-1])
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    # every failed verification was counted once, whatever the attack did to the ledger
    assert executions(counter) == 10 - start
    found = tamper_events(root)
    assert found, "the attack on the ledger was not reported"
    assert any("found" in e for e in found)  # the ledger's own finding, not only story.md's
    warned = " ".join(" ".join(r.output.split()) for r in results)
    assert "tamper detected" in warned
    # Blocked for good: another run and a plain unblock spend at most one more verification.
    before = executions(counter)
    assert run_cli(root, "run", SID, "--no-sandbox").returncode == 5
    assert executions(counter) == before


@pytest.mark.parametrize("action", ["forge", "rm-state", "symlink"])
def test_in_a_git_repository_the_ref_keeps_the_count_too(tmp_path: Path, action: str) -> None:
    """In a git repository (worktree per story) the head is also a ref in the main git folder;
    with the user's state folder wiped as well, the ref alone keeps the count. The story
    starts at a hand-edited 8 and each run stops after one failure (`implementation_retries:
    0`): the second run, after the wipe, counts on the ref alone."""
    root = new_project(tmp_path)
    counter = hostile_verify(root, tmp_path, action)
    assert run_cli(root, "config", "limits.implementation_retries", "0").returncode == 0
    near_the_limit(root, 8)
    committed(root)
    home = Path(STATE_HOME)
    results: list[CliResult] = []
    for _ in range(30):
        result = run_cli(root, "run", SID, "--no-sandbox")
        results.append(result)
        for copy in home.glob(f"*/ledger/{SID}.jsonl"):  # wipe the user-state copy each time
            if str(root) in (copy.parent.parent / "project").read_text():
                copy.unlink()
        if "Global recovery limit exceeded (10/10)" in " ".join(result.output.split()):
            break
        if result.returncode == 5:
            assert run_cli(root, "unblock", SID).returncode == 0
    assert_no_crash(results[:-1])
    assert len(results) == 2
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    assert 2 <= executions(counter) <= 4  # the two attempts, and the baseline (run again
    assert tamper_events(root)  # when the attack wiped its cache with the state folder)
    ref = git(root, "cat-file", "blob", f"refs/ai-sdlc/ledger/{SID}")
    assert json.loads(ref)["total"] == 10


def test_git_clean_between_runs_does_not_reset_the_count(tmp_path: Path) -> None:
    """A user's own `git clean -xfd` and `git checkout -- .` between runs wipe the ledger (its
    folder is git-ignored) and put back the committed story file (counters 0): the count
    carries on from the copies outside the project's ignored files. Each run stops after one
    failure (`implementation_retries: 0`), from a hand-edited 7 the commit does not hold."""
    root = new_project(tmp_path)
    counter = tmp_path / "verifications.txt"
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\nopen(sys.argv[1], 'a').write('ran\\n')\nprint('FAILED test_x')\nsys.exit(1)\n"
    )
    verify = shlex.join([sys.executable, str(script), str(counter)])
    assert run_cli(root, "config", "verify.test", verify).returncode == 0
    # only the attempts' verifications are counted here: the untouched base's (the judge's
    # baseline, cached in the ignored state the clean wipes) would run again after each clean
    assert run_cli(root, "config", "verify.baseline", "false").returncode == 0
    assert run_cli(root, "config", "limits.implementation_retries", "0").returncode == 0
    committed(root)
    near_the_limit(root, 7)
    totals: list[int] = []
    for _ in range(10):
        result = run_cli(root, "run", SID, "--no-sandbox")
        assert result.returncode == 5, result.output
        totals.append(frontmatter(root)["total_recovery_attempts"])
        if "Global recovery limit exceeded (10/10)" in " ".join(result.output.split()):
            break
        git(root, "worktree", "remove", "--force", str(frontmatter(root)["worktree_path"]))
        git(root, "clean", "-xfdq")
        git(root, "checkout", "-q", "--", ".")
        assert not ledger_path(root).exists()
        assert frontmatter(root).get("total_recovery_attempts", 0) == 0  # the file put back
    assert totals == [8, 9, 10]  # one failure a run, each counted on top of the last
    assert executions(counter) == 3
    assert tamper_events(root)


# --- the chain itself ---------------------------------------------------------------------
def chain(root: Path) -> list[dict[str, Any]]:
    lines = ledger_path(root).read_bytes().splitlines()
    entries = [json.loads(line) for line in lines]
    for before, entry in zip([b"", *lines], entries, strict=False):
        expected = hashlib.sha256(before).hexdigest() if before else ""
        assert entry["prev"] == expected
    return entries


def test_only_reset_retries_starts_a_new_chain_and_the_copies_follow(tmp_path: Path) -> None:
    root, _counter = failing_project(tmp_path)
    assert run_cli(root, "run", SID, "--no-sandbox").returncode == 5
    entries = chain(root)
    assert {e["chain"] for e in entries} == {0}
    assert entries[-1]["total"] == frontmatter(root)["total_recovery_attempts"] > 0
    assert run_cli(root, "unblock", SID, "--reset-retries").returncode == 0
    entries = chain(root)
    assert entries[-1]["op"] == "unblock" and entries[-1]["total"] == 0
    assert entries[-1]["chain"] == 1
    copies = list(Path(STATE_HOME).glob(f"*/ledger/{SID}.jsonl"))
    mine = [p for p in copies if str(root) in (p.parent.parent / "project").read_text()]
    assert len(mine) == 1
    last = mine[0].read_bytes().splitlines()[-1]
    assert last == ledger_path(root).read_bytes().splitlines()[-1]
    again = run_cli(root, "run", SID, "--no-sandbox")
    assert again.returncode == 5
    assert not tamper_events(root)  # the reset and everything after it agree with the copies
    assert os.path.getsize(ledger_path(root)) > 0


def test_a_torn_last_line_is_cut_back_before_the_next_append(tmp_path: Path) -> None:
    """A crash mid-append leaves bytes after the last newline: the next entry must not glue
    onto them (the line is cut back), and it is not tamper (the copies hold the entry the
    ledger's last whole line holds)."""
    root, _counter = failing_project(tmp_path)
    assert run_cli(root, "run", SID, "--no-sandbox").returncode == 5
    with ledger_path(root).open("ab") as fh:
        fh.write(b'{"op": "failed", "seq": 99, "tot')
    assert run_cli(root, "unblock", SID).returncode == 0
    entries = chain(root)  # every line parses and chains
    assert entries[-1]["op"] == "unblock"
    assert not tamper_events(root)


#: A `command` agent that answers each phase like a competent agent, but in implement first
#: wipes the project's state folder and zeroes the story's counters.
HOSTILE_AGENT = r"""
import os, re, shutil, sys
phase, state, story = sys.argv[1:4]
sys.stdin.read()
if phase in ("implement", "rework"):
    shutil.rmtree(state, ignore_errors=True)
    with open(story, encoding="utf-8") as fh:
        text = fh.read()
    text = re.sub(r"(?m)^(\s*(?:total_recovery_attempts|implementation_retry_count"
                  r"|implementation_retry)): \d+$", r"\1: 0", text)
    with open(story, "w", encoding="utf-8") as fh:
        fh.write(text)
    with open("calc.py", "w") as fh:  # a new (wrong) change every attempt: work, not nothing
        fh.write(f"def multiply(a, b):\n    return a + b  # attempt {os.getpid()}\n")
    print("Implemented.")
elif phase in ("refine", "review"):
    print("Looks right.\nDECISION: APPROVED")
else:
    print("## Notes\n\nNothing surprising.")
"""


def test_a_hostile_command_agent_wiping_the_state_still_blocks_at_10(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    agent = tmp_path / "agent.py"
    agent.write_text(HOSTILE_AGENT)
    state = root / ".ai-sdlc" / "state"
    template = [sys.executable, str(agent), "{phase}", str(state), str(story_file(root))]
    script = tmp_path / "fail.py"
    counter = tmp_path / "verifications.txt"
    script.write_text("import sys\nopen(sys.argv[1], 'a').write('x\\n')\nsys.exit(1)\n")
    verify = json.dumps(shlex.join([sys.executable, str(script), str(counter)]))
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        f"verify:\n  test: {verify}\n"
    )
    results = run_until_blocked(root, "--no-sandbox", env={"AI_SDLC_PROVIDER": "command"})
    assert_no_crash(results[:-1])
    assert_global_block(root, results[-1], {"implementation_retry": 10})
    assert 10 <= executions(counter) <= 11
    assert [e for e in tamper_events(root) if "found" in e]


def failing_project(tmp_path: Path) -> tuple[Path, Path]:
    root = new_project(tmp_path)
    counter = tmp_path / "n.txt"
    script = tmp_path / "fail.py"
    script.write_text("import sys\nopen(sys.argv[1], 'a').write('x\\n')\nsys.exit(1)\n")
    verify = shlex.join([sys.executable, str(script), str(counter)])
    assert run_cli(root, "config", "verify.test", verify).returncode == 0
    # one failed attempt a run: the chain and its copies are the promise, not the retries
    assert run_cli(root, "config", "limits.implementation_retries", "0").returncode == 0
    return root, counter


def home_copy(root: Path) -> Path:
    for path in Path(STATE_HOME).glob(f"*/ledger/{SID}.jsonl"):
        if str(root) in (path.parent.parent / "project").read_text():
            return path
    raise AssertionError("no copy in the user's state folder")


def test_a_ledger_from_before_the_chain_is_adopted_without_alarm(tmp_path: Path) -> None:
    """A ledger written before entries were chained (no `prev`, no copies anywhere) is taken as
    it is, and its copies are written from the next entry on."""
    root, _ = failing_project(tmp_path)
    assert run_cli(root, "run", SID, "--no-sandbox").returncode == 5
    total = frontmatter(root)["total_recovery_attempts"]
    old = [json.loads(line) for line in ledger_path(root).read_bytes().splitlines()]
    for entry in old:
        del entry["prev"], entry["chain"]
    ledger_path(root).write_text("".join(json.dumps(e) + "\n" for e in old))
    home_copy(root).unlink()
    assert run_cli(root, "unblock", SID).returncode == 0
    assert not tamper_events(root)
    assert frontmatter(root)["total_recovery_attempts"] == total
    last = ledger_path(root).read_bytes().splitlines()[-1]
    assert home_copy(root).read_bytes().splitlines()[-1] == last


def test_a_copy_one_entry_ahead_is_a_crash_and_its_entry_is_the_truth(tmp_path: Path) -> None:
    """The copies are written before the ledger: a process that dies between the two leaves
    the copy one entry ahead, chained onto the ledger's last line. That entry is taken as the
    truth (with its counters), without a tamper alarm."""
    root, _ = failing_project(tmp_path)
    assert run_cli(root, "run", SID, "--no-sandbox").returncode == 5
    total = frontmatter(root)["total_recovery_attempts"]
    lines = ledger_path(root).read_bytes().splitlines(keepends=True)
    ledger_path(root).write_bytes(b"".join(lines[:-1]))  # the append that never happened
    assert run_cli(root, "unblock", SID).returncode == 0
    assert not tamper_events(root)
    assert frontmatter(root)["total_recovery_attempts"] == total
    chain(root)
    # Two entries short is no crash: tamper, and still the count of the copy.
    assert run_cli(root, "run", SID, "--no-sandbox").returncode == 5
    total = frontmatter(root)["total_recovery_attempts"]
    lines = ledger_path(root).read_bytes().splitlines(keepends=True)
    ledger_path(root).write_bytes(b"".join(lines[:-2]))
    assert run_cli(root, "unblock", SID).returncode == 0
    assert [e for e in tamper_events(root) if "found" in e]
    assert frontmatter(root)["total_recovery_attempts"] == total


def test_two_projects_in_one_repository_keep_their_own_refs(tmp_path: Path) -> None:
    """A monorepo with two ai-sdlc projects in subfolders: both have an S-0001, both share the
    git folder; each keeps its own ref, so neither sees the other's count as tamper."""
    repo = tmp_path / "mono"
    roots = [repo / "app", repo / "lib"]
    for root, title in zip(roots, ("Add multiply", "Add divide"), strict=True):
        root.mkdir(parents=True)
        assert run_cli(root, "init").returncode == 0
        assert run_cli(root, "add", title).returncode == 0  # (one branch name each)
    committed(repo)
    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('FAILED tests/test_x.py::test_x')\nsys.exit(1)\n")
    for root in roots:
        verify = shlex.join([sys.executable, str(script)])
        assert run_cli(root, "config", "verify.test", verify).returncode == 0
        # one failure a run: the count per project is the promise, not the retries
        assert run_cli(root, "config", "limits.implementation_retries", "0").returncode == 0
    assert run_cli(roots[0], "run", SID, "--no-sandbox").returncode == 5
    first = frontmatter(roots[0])["total_recovery_attempts"]
    assert run_cli(roots[1], "unblock", SID).returncode == 0
    assert frontmatter(roots[1]).get("total_recovery_attempts", 0) == 0
    assert run_cli(roots[0], "unblock", SID).returncode == 0
    assert (
        run_cli(roots[0], "run", SID, "--no-sandbox").returncode == 5
    )  # one more failure, then blocked
    assert run_cli(roots[1], "run", SID, "--no-sandbox").returncode == 5
    second = frontmatter(roots[1])["total_recovery_attempts"]
    assert frontmatter(roots[0])["total_recovery_attempts"] == first + 1 != second
    assert not tamper_events(roots[0]) and not tamper_events(roots[1])
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/ai-sdlc/ledger/").split()
    assert len(refs) == 2 and all(r.endswith(f"/{SID}") and r.count("/") == 4 for r in refs)
    totals = sorted(json.loads(git(repo, "cat-file", "blob", r))["total"] for r in refs)
    assert totals == sorted([first + 1, second])


def test_a_crash_between_any_two_copies_is_not_taken_for_tamper() -> None:
    """The order of writes is: the state folder's copy, the ref (when the counters change),
    the ledger. Whichever of them a crash stops before, the next transaction takes the newest
    entry as the truth without an alarm; a ref that matches neither entry is tamper."""
    from ai_sdlc.workflow.state.anchor import Copy, assess, counters_blob
    from ai_sdlc.workflow.state.ledger import Journal, LedgerState, Tail, line_hash

    old = LedgerState(seq=4, total=2, breakdown={"implementation_retry": 2})
    old_line = Journal.encode("failed", "t1", old, "")
    new = LedgerState(seq=5, total=3, breakdown={"implementation_retry": 3})
    new_line = Journal.encode("failed", "t2", new, line_hash(old_line))
    tail = Tail(old, line=old_line, last_hash=line_hash(old_line))
    nothing = lambda: (0, {})  # noqa: E731

    for ref in (counters_blob(old), counters_blob(new)):  # stopped before or after the ref
        found = assess(tail, [Copy("home", new_line), Copy("ref", ref, counts_only=True)], nothing)
        assert found.found == [] and found.rewrite
        assert found.state.total == 3 and found.state.seq == 5
    forged = counters_blob(LedgerState(total=0))
    found = assess(tail, [Copy("home", new_line), Copy("ref", forged, counts_only=True)], nothing)
    assert found.found and found.state.total == 3
    # a ledger lowered with the state folder's copy (an attacker who found both): the ref
    lowered = LedgerState(seq=9, total=0)
    line = Journal.encode("unblock", "t3", lowered, line_hash(new_line))
    tail = Tail(lowered, line=line, last_hash=line_hash(line))
    copies = [Copy("home", line), Copy("ref", counters_blob(new), counts_only=True)]
    found = assess(tail, copies, nothing)
    assert found.found and found.state.total == 3
