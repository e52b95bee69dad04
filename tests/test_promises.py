"""Issue 24, item 8: the promises that single-point mutations of the core once broke unseen.

Each test goes through the real CLI (or, for the state owner's own promises, real processes on a
real project), with real files and real subprocesses; the agents are small scripts the tests
write. Each was checked to fail with the mutation it is named after (docs/testing.md):

- a CLI agent writing in a read-only phase is counted, not released: blocked at the global
  limit after at most 11 calls;
- implement's own verification failure is fed into the next implement prompt;
- `events.jsonl` and a run's `state.json` are written redacted;
- the ledger line is appended inside the story lock (strictly increasing `seq`, no false
  `counters_hand_edited`, under recoveries from several processes at once);
- `consecutive_fails` resets on a success (alternating fail/pass is never halted);
- `begin_action` at the global limit refuses without reserving.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState
from tests.conftest import cli_environment, run_cli
from tests.support.runs_support import (
    frontmatter,
    make_project,
    only_run,
    story_events,
    story_states,
    write_rules,
)
from tests.support.waits import GUARD

#: A CLI agent for the `command` provider: counts its calls in COUNT, keeps each prompt in
#: PROMPTS/<n>-<phase>.txt, then answers as a well-behaved agent of its phase, except that
#: while its call number is at most WRITE_UNTIL it also writes a file in a read-only phase, and
#: while it is at most FAIL_UNTIL it fails, printing SECRET-bearing text on stderr.
AGENT = """
import os, sys
count, prompts, phase, write_until, fail_until = sys.argv[1:6]
n = 1
if os.path.exists(count):
    with open(count) as file:
        n += int(file.read())
with open(count, "w") as file:
    file.write(str(n))
prompt = open(sys.argv[sys.argv.index("--prompt-file") + 1], encoding="utf-8").read()
os.makedirs(prompts, exist_ok=True)
with open(os.path.join(prompts, f"{n:03d}-{phase}.txt"), "w", encoding="utf-8") as file:
    file.write(prompt)
if n <= int(fail_until):
    sys.stderr.write("upstream refused: " + os.environ["PROMISE_ERROR_TEXT"] + "\\n")
    sys.exit(3)
if phase in ("implement", "rework"):
    lines = open("work.txt").read().splitlines() if os.path.exists("work.txt") else []
    with open("work.txt", "w") as file:
        file.write("".join(f"change {i}\\n" for i in range(len(lines) + 1)))
    print(f"implemented change {len(lines)}")
else:
    if n <= int(write_until):
        with open(f"sneaky-{n}.txt", "w") as file:
            file.write("written in a read-only phase\\n")
    if phase in ("refine", "review"):
        print(phase + " done: looks right\\n\\nDECISION: APPROVED")
    else:
        print("## " + phase.capitalize() + "\\n\\nnothing surprising")
"""

#: Verification: passes on the untouched project, fails with FAILING_LINE while work.txt holds
#: one change (implement's first attempt), passes from the second change on.
VERIFY = """
import os, sys
lines = open("work.txt").read().splitlines() if os.path.exists("work.txt") else []
if len(lines) == 1:
    print("collected 3 items")
    print("FAILED test_widgets.py::test_count - boom: widget count is 3, expected 4")
    sys.exit(1)
"""
FAILING_LINE = "boom: widget count is 3, expected 4"

#: Secrets built at run time (the repository's own secret scan never sees one).
TOKEN = "sk-" + "proj-" + "Zq8" * 8
PASSWORD = "Cor4l" + "-reef-" + "lantern-19"


def _agent_project(
    tmp_path: Path,
    titles: list[str],
    *,
    write_until: int = 0,
    fail_until: int = 0,
    verify: bool = False,
    extra: str = "",
) -> tuple[Path, Path, Path]:
    """A project whose agent is AGENT; returns (root, the call counter, the prompts folder)."""
    root = tmp_path / "p"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    count, prompts = tmp_path / "count", tmp_path / "prompts"
    agent = [sys.executable, str(script), str(count), str(prompts), "{phase}"]
    agent += [str(write_until), str(fail_until), "--prompt-file", "{prompt_file}"]
    config = f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
    if verify:
        check = tmp_path / "verify.py"
        check.write_text(VERIFY)
        config += f"verify:\n  test: {json.dumps(f'{sys.executable} {check}')}\n"
    make_project(root, titles, config + extra)
    return root, count, prompts


def _env(**extra: str) -> dict[str, str]:
    return {"AI_SDLC_PROVIDER": "command", **extra}


def _ledger(root: Path, sid: str) -> list[dict[str, object]]:
    path = root / ".ai-sdlc" / "state" / "ledger" / f"{sid}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_cli_agent_writing_in_a_read_only_phase_is_blocked_at_the_global_limit(
    tmp_path: Path,
) -> None:
    """Every write is reverted and counted as an implementation retry, so the story is blocked
    at 10 after at most 11 agent calls (the agent stops writing after 30: a run that released
    the violation instead would go on to finish the story)."""
    root, count, _ = _agent_project(
        tmp_path,
        ["Read only"],
        write_until=30,
        extra="limits:\n  implementation_retries: 100\n  refinement_iterations: 100\n",
    )
    result = run_cli(root, "run", "S-0001", env=_env())
    calls = int(count.read_text())
    assert result.returncode == 5, result.output  # blocked
    assert calls <= 11, f"{calls} agent calls before the story was blocked"
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "blocked", fm
    assert fm["total_recovery_attempts"] == 10, fm
    assert fm["recovery_breakdown"] == {"implementation_retry": 10}, fm
    assert "Global recovery limit" in str(fm["blocked_reason"]), fm
    violations = [
        e
        for e in story_events(root, "S-0001")
        if e["action"] == "phase" and e.get("outcome") == "read_only_violation"
    ]
    assert len(violations) == 10, violations
    assert "read-only refine phase: sneaky-1.txt" in violations[0]["feedback"], violations[0]


def test_the_next_implement_prompt_carries_the_failing_line_of_its_own_verification(
    tmp_path: Path,
) -> None:
    root, _, prompts = _agent_project(tmp_path, ["Widgets"], verify=True)
    result = run_cli(root, "run", "S-0001", env=_env())
    assert result.returncode == 0, result.output
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "done", fm
    assert fm["recovery_breakdown"] == {"implementation_retry": 1}, fm
    implements = sorted(prompts.glob("*-implement.txt"))
    assert len(implements) == 2, sorted(p.name for p in prompts.iterdir())
    first, second = (p.read_text() for p in implements)
    assert FAILING_LINE not in first
    assert "## Feedback from the previous attempt (this is attempt 2)" in second, second
    assert FAILING_LINE in second, second


def test_events_and_run_state_are_written_redacted(tmp_path: Path) -> None:
    """The agent's error (a provider refusing with a token in its message) and its review
    feedback (a token and the value of a password-named variable) reach the story's
    events.jsonl and the run's state.json only masked, however the text got there."""
    root = tmp_path / "p"
    make_project(root, ["Leaky"], "run:\n  cooldown_seconds: 0\n")
    feedback = f"The key {TOKEN} is hard-coded; the deploy password {PASSWORD} is logged."
    write_rules(
        root,
        "rules:\n"
        "  - phase: research\n    times: 1\n"
        f"    fault: {{kind: auth, message: 'upstream refused key {TOKEN}'}}\n"
        "  - phase: review\n    times: 1\n    decision: REJECTED\n"
        f"    feedback: {json.dumps(feedback)}\n",
    )
    result = run_cli(root, "run", "--batch", "S-0001", env={"DEPLOY_PASSWORD": PASSWORD})
    assert result.returncode == 0, result.output
    events = (root / ".ai-sdlc" / "stories" / "S-0001" / "events.jsonl").read_text()
    assert "upstream refused key ***" in events, events
    assert "The key *** is hard-coded; the deploy password *** is logged." in events, events
    state = only_run(root)
    assert story_states(state)["S-0001"]["last_error"] == "upstream refused key ***", state
    written = (root / ".ai-sdlc" / "runs" / state["run_id"] / "state.json").read_text()
    for path in (p for p in root.rglob("*") if p.is_file() and p.name != "scripted.yaml"):
        content = path.read_bytes().decode("utf-8", "replace")
        assert TOKEN not in content and PASSWORD not in content, path
    assert TOKEN not in written and TOKEN not in result.output


#: One process recording `api_retry` on S-0001 COUNT times, once GO exists (READY says it is
#: ready); the limit is far away, so every record counts.
_RECORDER = """
import os, sys
from pathlib import Path
import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import Phase
from ai_sdlc.store import StoryStore
from ai_sdlc.workflow.state.transitions import StoryState

root, ready, go, times = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
owner = StoryState(StoryStore(root), limit=1000)
r, w = os.open(go, os.O_RDONLY), None
Path(ready).write_text("ready")
os.read(r, 1)  # the handshake: the test writes one byte to the fifo for everyone at once
for _ in range(times):
    owner.record_recovery("S-0001", "api_retry", reason="429 from the API")
"""


def test_concurrent_recoveries_keep_seq_increasing_and_report_no_hand_edit(
    tmp_path: Path,
) -> None:
    writers, times = 4, 40
    root = tmp_path / "p"
    make_project(root, ["Busy"])
    go = tmp_path / "go"
    os.mkfifo(go)
    env = cli_environment()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RECORDER,
                str(root),
                str(tmp_path / f"r{i}"),
                str(go),
                f"{times}",
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    # Each opens the fifo for reading before it says ready; one writer end releases them all.
    fd = os.open(go, os.O_WRONLY)
    for i in range(writers):
        marker = tmp_path / f"r{i}"
        while not marker.exists():
            assert procs[i].poll() is None, procs[i].communicate()[1]
            os.sched_yield()
    os.write(fd, b"g" * writers)
    os.close(fd)
    errors = [p.communicate(timeout=GUARD * 5)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, "\n".join(errors)

    entries = _ledger(root, "S-0001")
    seqs = [int(str(e["seq"])) for e in entries]
    assert seqs == sorted(set(seqs)) and len(seqs) == len(entries), seqs
    recoveries = [e for e in entries if e.get("op") == "recovery"]
    assert len(recoveries) == writers * times
    assert [e["total"] for e in recoveries] == list(range(1, writers * times + 1))
    actions = [e["action"] for e in story_events(root, "S-0001")]
    assert "counters_hand_edited" not in actions and "tamper_detected" not in actions, actions
    fm = frontmatter(root, "S-0001")
    assert fm["total_recovery_attempts"] == writers * times
    assert fm["recovery_breakdown"] == {"api_retry": writers * times}


def test_alternating_fail_and_pass_is_not_halted_by_max_consecutive_fails(
    tmp_path: Path,
) -> None:
    """Rejected, done, rejected, done, rejected with `max_consecutive_fails: 2`: no two failures
    in a row, so the run goes through all five stories."""
    root = tmp_path / "p"
    stop = "    max_consecutive_fails: 2\n    min_attempted: 100\n"
    make_project(
        root,
        ["A", "B", "C", "D", "E"],
        "limits:\n  refinement_iterations: 0\n"
        f"run:\n  cooldown_seconds: 0\n  max_consecutive_escalations: 10\n"
        f"  stop_conditions:\n{stop}",
    )
    rule = "  - phase: refine\n    story: {sid}\n    decision: REJECTED\n    feedback: no.\n"
    failing = ("S-0001", "S-0003", "S-0005")
    write_rules(root, "rules:\n" + "".join(rule.format(sid=s) for s in failing))
    result = run_cli(root, "run", "--auto")
    state = only_run(root)
    # The run reached its end: the only halt is the one at the end for the escalated stories.
    reason = state["stop_reason"]
    assert reason["condition"] == "all_escalated", (reason, result.output)
    assert "every remaining story is escalated" in reason["message"], reason
    statuses = {sid: s["status"] for sid, s in story_states(state).items()}
    assert statuses == {
        "S-0001": "blocked",
        "S-0002": "done",
        "S-0003": "blocked",
        "S-0004": "done",
        "S-0005": "blocked",
    }, statuses
    assert state["statistics"]["consecutive_fails"] == 1
    assert state["counters"]["consecutive_fails"] == 1


def test_begin_action_at_the_global_limit_refuses_without_reserving(tmp_path: Path) -> None:
    """A story at the limit whose block was lifted by hand (a plain unblock keeps the counters):
    `begin_action` refuses, and nothing is reserved, so no later check counts a phantom
    attempt and no phase is logged as started."""
    root = tmp_path / "p"
    make_project(root, ["Spent"])
    owner = StoryState(StoryStore(root), limit=3)
    for _ in range(2):
        owner.record_recovery("S-0001", "api_retry")
    with pytest.raises(StoryBlockedError):
        owner.record_recovery("S-0001", "api_retry")
    owner.unblock("S-0001", reset_retries=False)
    assert frontmatter(root, "S-0001")["status"] != "blocked"
    before = _ledger(root, "S-0001")[-1]
    with pytest.raises(StoryBlockedError, match="Global recovery limit"):
        owner.begin_action("S-0001", Phase.RESEARCH)
    after = _ledger(root, "S-0001")[-1]
    assert after["open"] is None, after
    assert after["attempts"] == before["attempts"], (before, after)
    # A later owner (another process) settles nothing: the total stays at the limit.
    with pytest.raises(StoryBlockedError, match="Global recovery limit"):
        StoryState(StoryStore(root), limit=3).ensure_can_act("S-0001")
    assert _ledger(root, "S-0001")[-1]["total"] == 3
    assert frontmatter(root, "S-0001")["total_recovery_attempts"] == 3
    started = [e for e in story_events(root, "S-0001") if e["action"] == "phase_started"]
    assert started == [], started
