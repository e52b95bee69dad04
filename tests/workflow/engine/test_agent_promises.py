"""What a CLI agent's calls are held to, end to end through the real CLI with a small
`command` agent: a write in a read-only phase is counted, not released (blocked at the global
limit after at most 11 calls), and implement's own failing verification line reaches the next
implement prompt. Each was checked to fail under the single-point mutation it pins
(docs/testing.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import run_cli
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    frontmatter,
    make_project,
    story_events,
)

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
    records = records_path(root)  # the agent's call counter and the prompts it was given
    count, prompts = records / "count", records / "prompts"
    agent = [sys.executable, str(script), str(count), str(prompts), "{phase}"]
    agent += [str(write_until), str(fail_until), "--prompt-file", "{prompt_file}"]
    config = f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
    if verify:
        check = tmp_path / "verify.py"
        check.write_text(VERIFY)
        config += f"verify:\n  test: {json.dumps(f'{sys.executable} {check}')}\n"
    make_project(root, titles, config + extra)
    records_folder(root)
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
