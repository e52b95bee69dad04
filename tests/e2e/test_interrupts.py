"""Ctrl-C at 20 points of a real run: during each phase's provider call, during each
verification command, between phases and between stories, for `run S-0001` and `run --auto`.

Every point is reached, never guessed: the stand-in agent (tests/support/fakes/cli_agent.py
`phase`) or
the verification command writes its pid to a marker and sleeps, or the story's events.jsonl
shows the phase it must follow (the next agent call then blocks, so the run cannot end first).
Each time the run must exit 130 with the hung child gone, leave every story file readable,
count nothing for the interrupt, and a second command must finish the work. A story whose
point lies at its implementation or later starts there (refine, research and plan marked done
in its frontmatter, as a user may hand-edit them): the points before walk those phases.

No time window decides a result. The blocked child sleeps 600 s, ten times the guard: a run
that waited for it instead of killing it cannot exit before the guard fails the test (the
guard, 60 s, only bounds a failure). And the run reaps what it kills before it exits, so the
child is checked once, at the run's exit, not polled until it happens to be gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import cli_environment, run_cli
from tests.support.held_support import start_at_implement
from tests.support.paths import FAKES
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    frontmatter,
    make_project,
    only_run,
    start_cli,
    stop_or_explain,
    story_events,
    story_states,
)
from tests.support.waits import wait_for_pid

AGENT = FAKES / "cli_agent.py"
#: A failure guard, not a pass condition: how long the test waits for a handshake (a marker, an
#: event) or for the run to exit after Ctrl-C before failing with what it saw. The blocked
#: children sleep 600 s, so a run that waits for one instead of killing it cannot pass.
GUARD = 60.0

#: Verification step (build and test alike): counts its calls; fails the `fail_on`th; on the
#: `hang_on`th writes its pid to the marker (whole, by rename) and sleeps 600 s (past any guard).
#: (os.path rather than pathlib: this starts for every verification step, and pathlib would
#: double its start-up.)
VERIFY = """
import os, sys, time
count, hang_on, fail_on, marker = sys.argv[1:5]
n = 1
if os.path.exists(count):
    with open(count) as file:
        n += int(file.read())
with open(count, "w") as file:
    file.write(str(n))
if n == int(hang_on):
    with open(marker + ".tmp", "w") as file:
        file.write(str(os.getpid()))
    os.replace(marker + ".tmp", marker)
    time.sleep(600)
if n == int(fail_on):
    print("boom: widget count is 3, expected 4")
    sys.exit(1)
"""


@dataclass(frozen=True)
class Point:
    """Where Ctrl-C lands. `agent`: the provider call to block (`phase` or `phase@S-000N`);
    `verify`: the verification call to block (1st, 2nd, ...); `after`: (story, event action,
    phase) to wait for in that story's events.jsonl before signalling."""

    name: str
    multi: bool = False
    agent: str = "none"
    verify: int = 0
    fail_verify: int = 0
    after: tuple[str, str, str | None] | None = None
    #: total_recovery_attempts of S-0001 after the interrupt and at the end (the interrupt
    #: itself never counts).
    recoveries: int = 0
    #: Stories whose refine, research and plan are marked done (hand-edited, as a user may):
    #: their runs start at the implementation when the point lies there or later.
    at_implement: tuple[str, ...] = ()


ONE, BOTH = ("S-0001",), ("S-0001", "S-0002")

POINTS = [
    # `run S-0001`: during the provider call of every phase
    *(Point(f"single-agent-{p}", agent=p) for p in ("refine", "research", "plan")),
    Point("single-agent-implement", agent="implement", at_implement=ONE),
    Point("single-agent-review", agent="review", at_implement=ONE),
    # ... during verification: build, test, and the retry after a failed build
    Point("single-verify-build", verify=1, at_implement=ONE),
    Point("single-verify-test", verify=2, at_implement=ONE),
    Point("single-verify-retry-build", verify=2, fail_verify=1, recoveries=1, at_implement=ONE),
    Point("single-verify-retry-test", verify=3, fail_verify=1, recoveries=1, at_implement=ONE),
    # ... between phases: right after a phase's result is written (the next call blocks)
    Point("single-after-refine", agent="research", after=("S-0001", "phase", "refine")),
    Point("single-after-research", agent="plan", after=("S-0001", "phase", "research")),
    Point("single-after-plan", agent="implement", after=("S-0001", "phase", "plan")),
    Point(
        "single-after-implement",
        agent="review",
        after=("S-0001", "phase", "implement"),
        at_implement=ONE,
    ),
    # `run --auto` over two stories
    Point("auto-agent-refine-first", multi=True, agent="refine@S-0001", at_implement=("S-0002",)),
    Point("auto-agent-implement-second", multi=True, agent="implement@S-0002", at_implement=BOTH),
    Point("auto-agent-review-second", multi=True, agent="review@S-0002", at_implement=BOTH),
    Point("auto-verify-test-first", multi=True, verify=2, at_implement=BOTH),
    Point("auto-verify-build-second", multi=True, verify=3, at_implement=BOTH),
    Point(
        "auto-between-stories",
        multi=True,
        agent="refine@S-0002",
        after=("S-0001", "done", None),
        at_implement=ONE,
    ),
    Point(
        "auto-after-plan-second",
        multi=True,
        agent="implement@S-0002",
        after=("S-0002", "phase", "plan"),
        at_implement=ONE,
    ),
]


def _project(tmp_path: Path, point: Point) -> tuple[Path, Path, Path]:
    """A project whose agent and verification block where `point` says; returns the project,
    the agent's marker and the verification's marker."""
    root = tmp_path / "p"
    records = records_path(root)  # the stand-ins' markers and counter
    agent_marker, verify_marker = records / "agent.pid", records / "verify.pid"
    script = tmp_path / "verify.py"
    script.write_text(VERIFY)
    agent = [sys.executable, str(AGENT), "phase", "{phase}", point.agent, str(agent_marker)]
    agent += ["--prompt-file", "{prompt_file}"]
    step = [sys.executable, str(script), str(records / "count")]
    step += [str(point.verify), str(point.fail_verify), str(verify_marker)]
    line = json.dumps(" ".join(step))
    # A build step only where verification is the point (the agent points verify by test).
    build = f"  build: {line}\n" if point.verify or point.fail_verify else ""
    config = (
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n{build}  test: {line}\n"
    )
    make_project(root, ["A", "B"] if point.multi else ["A"], config)
    for sid in point.at_implement:
        start_at_implement(root, sid)
    records_folder(root)
    return root, agent_marker, verify_marker


def _env() -> dict[str, str]:
    return cli_environment({"AI_SDLC_PROVIDER": "command"})


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    return start_cli(root, *args, env={"AI_SDLC_PROVIDER": "command"})


def _wait_for_event(
    proc: subprocess.Popen[str], root: Path, sid: str, action: str, phase: str | None
) -> None:
    deadline = time.monotonic() + GUARD
    while not any(
        e["action"] == action and (phase is None or e.get("phase") == phase)
        for e in story_events(root, sid)
    ):
        assert proc.poll() is None, f"the run ended before {sid} {action} {phase}"
        assert time.monotonic() < deadline, f"{sid} never logged {action} {phase}"
        time.sleep(0.005)


def _pid_in(marker: Path) -> int | None:
    text = marker.read_text() if marker.exists() else ""
    return int(text) if text.strip().isdigit() else None


def _running(pid: int, marker: Path) -> bool:
    """Whether `pid` is still the live stand-in that wrote `marker` (its command line names the
    marker: a pid the system gave to another process since does not count). Checked once, no
    waiting: the run reaps what it kills before it exits. A zombie is dead (killed, its parent
    gone before reaping it: init does)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if str(marker).encode() not in cmdline.split(b"\0"):
        return False
    return status.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _kill_leftovers(markers: tuple[Path, ...]) -> None:
    """The test's own clean-up after a failure: no stand-in may sleep on for 600 s."""
    for marker in markers:
        pid = _pid_in(marker)
        if pid is not None and _running(pid, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("point", POINTS, ids=[p.name for p in POINTS])
def test_ctrl_c_exits_130_at_once_and_the_work_resumes(tmp_path: Path, point: Point) -> None:
    assert len(POINTS) == 20
    root, agent_marker, verify_marker = _project(tmp_path, point)
    sids = ["S-0001", "S-0002"] if point.multi else ["S-0001"]
    proc = _start(root, "run", *(["--auto"] if point.multi else ["S-0001"]))
    markers = (agent_marker, verify_marker)
    try:
        if point.after is not None:
            _wait_for_event(proc, root, *point.after)
        else:
            wait_for_pid(verify_marker if point.verify else agent_marker, timeout=GUARD)
    except BaseException:
        proc.kill()
        proc.communicate()
        _kill_leftovers(markers)
        raise
    proc.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    try:
        out, stderr = stop_or_explain(proc, GUARD)
        took = time.monotonic() - signalled
        assert proc.returncode == 130, f"exit {proc.returncode} after {took:.2f}s:\n{stderr}"
        said = "interrupted; finished work is kept" if point.multi else "error: interrupted"
        assert said in stderr and "Traceback" not in stderr, (out, stderr)

        # Whatever the run started is gone with it: the blocked call, and an agent the signal
        # may have caught starting (between-phase points).
        for marker in markers:
            pid = _pid_in(marker)
            assert pid is None or not _running(pid, marker), (
                f"pid {pid} ({marker.name}) outlived the interrupted run "
                f"(it exited {took:.2f}s after the signal)"
            )
    finally:
        _kill_leftovers(markers)
    # Every story file is whole, and the interrupt was not counted as a recovery.
    for sid in sids:
        shown = run_cli(root, "show", sid, "--json", env=_env())
        assert shown.returncode == 0, shown.output
        assert json.loads(shown.stdout)["id"] == sid
    assert frontmatter(root, "S-0001").get("total_recovery_attempts", 0) == point.recoveries
    if point.multi:
        state = only_run(root)
        assert state["run_status"] == "stopped" and state["resumable"] is True, state
        assert state["stop_reason"]["condition"] == "interrupted"
        listed = json.loads(run_cli(root, "runs", "--json", env=_env()).stdout)["runs"]
        assert [(r["run_id"], r["active"]) for r in listed] == [(state["run_id"], False)]
        assert f"run --resume {state['run_id']}" in stderr

    # A second command finishes the work (an agent call the signal came before must not block
    # now: its marker is taken).
    with contextlib.suppress(FileExistsError), agent_marker.open("x") as taken:
        taken.write("taken by the test")
    if not point.multi:
        again = run_cli(root, "run", "S-0001", env=_env())
    elif point.verify % 2:
        again = run_cli(root, "run", "--resume", only_run(root)["run_id"], env=_env())
    else:
        again = run_cli(root, "run", "--continue", env=_env())
    assert again.returncode == 0, again.output
    for sid in sids:
        assert frontmatter(root, sid)["status"] == "done", sid
    assert frontmatter(root, "S-0001").get("total_recovery_attempts", 0) == point.recoveries
    if point.multi:
        final = only_run(root)
        assert final["run_status"] == "completed"
        assert {s["status"] for s in story_states(final).values()} == {"done"}
