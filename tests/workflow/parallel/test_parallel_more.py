"""Parallel runs, end to end through the real CLI in a git repository with a bare origin:
conflict awareness (a story whose plan names a file a running sibling changes waits for it),
and Ctrl-C while two workers are in a phase (exit 130 fast, no process left, resumable)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli_environment, run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401  (fixture)
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    frontmatter,
    only_run,
    run_events,
    stop_or_explain,
    write_rules,
)
from tests.support.waits import GUARD, pids_holding, wait_until_gone

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]


def edit(root: Path, sid: str, old: str, new: str) -> None:
    path = root / ".ai-sdlc" / "stories" / sid / "story.md"
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new, 1))


def planned(root: Path, sid: str, plan: str) -> None:
    """The story is ready with research and plan done; its plan.md is `plan`."""
    edit(root, sid, "\nstatus: backlog\n", "\nstatus: ready\n")
    edit(root, sid, "research_complete: false", "research_complete: true")
    edit(root, sid, "plan_complete: false", "plan_complete: true")
    (root / ".ai-sdlc" / "stories" / sid / "plan.md").write_text(plan)


def test_a_story_whose_plan_names_a_file_a_sibling_changes_waits_for_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    root = repo.root
    for n in range(3):
        repo.story(f"Story {n + 1}")
    planned(root, "S-0001", "# Plan\n\n1. Rewrite `src/shared.py` to add the greeting.\n")
    planned(root, "S-0002", "# Plan\n\n1. Change src/shared.py: rename the helper.\n")
    planned(root, "S-0003", "# Plan\n\n1. Add `src/other.py`.\n")
    write_rules(
        root,
        "delay: 0.3\nrules:\n"
        + "".join(
            f'  - phase: implement\n    story: {sid}\n    files:\n      {path}: "{sid} was here"\n'
            for sid, path in (
                ("S-0001", "src/shared.py"),
                ("S-0002", "src/shared.py"),
                ("S-0003", "src/other.py"),
            )
        ),
    )
    result = run_cli(root, "run", "--auto", "--jobs", "2", "--json")
    assert result.returncode == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    names = [(e["event"], e.get("story")) for e in events]
    deferred = [e for e in events if e["event"] == "story_deferred"]
    assert deferred and {e["story"] for e in deferred} == {"S-0002"}, deferred
    assert deferred[0]["siblings"] == ["S-0001"] and deferred[0]["paths"] == ["src/shared.py"]
    # S-0002 starts only after S-0001 finished; S-0003 (no overlap) did not wait for S-0001.
    s1_done = names.index(("story_finished", "S-0001"))
    s2_start = names.index(("story_dispatched", "S-0002"))
    assert s1_done < s2_start, names
    assert names.index(("story_dispatched", "S-0003")) < s1_done, names
    state = only_run(root)
    assert all(s["status"] == "done" for s in state["stories"])
    logged = [e["action"] for e in run_events(root, state["run_id"]) if e.get("story") == "S-0002"]
    assert logged.index("story_deferred") < logged.index("story_dispatched")
    # S-0001's branch really changed the file.
    branch = frontmatter(root, "S-0001")["branch"]
    assert "src/shared.py" in git(root, "diff", "--name-only", f"main...{branch}").split()
    shown = run_cli(root, "runs", "show", state["run_id"])
    assert "was deferred: overlaps S-0001 on src/shared.py" in shown.stdout, shown.output


#: Verification: the first call in each worktree writes its pid to <markers>/<worktree>.pid and
#: sleeps past any deadline; later calls pass.
HANG = """
import os, pathlib, sys, time
marker = pathlib.Path(sys.argv[1]) / (pathlib.Path.cwd().name + ".pid")
if not marker.exists():
    partial = marker.with_suffix(".tmp")
    partial.write_text(str(os.getpid()))
    partial.replace(marker)
    time.sleep(600)  # only the kill ends it within the guard (tests/support/waits.py NEVER)
"""


def test_ctrl_c_during_a_parallel_run_leaves_nothing_running_and_resumes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    root = repo.root
    for n in range(2):
        repo.story(f"Story {n + 1}")
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    markers = records_path(root)
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  test: {sys.executable} {script} {markers}\n"
    )
    records_folder(root)  # the verify commands' pid markers
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), "run", "--auto", "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=cli_environment({"PYTHONFAULTHANDLER": "1"}),
        text=True,
    )
    wait_for_markers(markers, 2, proc)
    pids = pids_holding(str(markers))  # the pids they wrote are their PID namespaces' own
    assert len(pids) >= 2, pids
    proc.send_signal(signal.SIGINT)  # `kill -INT` of the coordinator alone
    _, err = stop_or_explain(proc, timeout=GUARD, leftovers=tuple(pids))
    assert proc.returncode == 130, err
    state = only_run(root)
    workers = [
        int(e["worker"].split(":")[1])
        for e in run_events(root, state["run_id"])
        if e["action"] == "story_dispatched"
    ]
    assert len(workers) == 2
    for pid in pids + workers:  # the verifications sleep 600 s: only a kill ends them in time
        wait_until_gone(pid, "a worker or its verification")
    assert state["run_status"] == "stopped" and state["resumable"] is True
    for sid in ("S-0001", "S-0002"):
        fm = frontmatter(root, sid)  # parses; the phase in flight was rolled back
        assert fm["status"] != "done" and not fm.get("implementation_complete"), fm
    resumed = run_cli(root, "run", "--continue", "--json")
    assert resumed.returncode == 0, resumed.output
    assert all(s["status"] == "done" for s in only_run(root)["stories"])
    assert all(frontmatter(root, sid)["status"] == "done" for sid in ("S-0001", "S-0002"))


def wait_for_markers(markers: Path, count: int, proc: subprocess.Popen[str]) -> list[int]:
    deadline = time.monotonic() + GUARD
    while True:
        pids = [p.read_text() for p in markers.glob("*.pid")]
        if len(pids) == count and all(p.strip().isdigit() for p in pids):
            return [int(p) for p in pids]
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out: Any = proc.communicate()
            raise AssertionError(f"markers never appeared: {out}")
        time.sleep(0.02)


def test_wait_until_gone_fails_on_a_live_process_and_passes_a_killed_one() -> None:
    """`wait_until_gone` itself (the check can fail): it waits on the process's end, a killed
    child unreaped (a zombie) and a reaped one alike."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with pytest.raises(AssertionError, match="still running"):
            wait_until_gone(child.pid, "a sleeper", timeout=0.2)
    finally:
        os.kill(child.pid, signal.SIGKILL)
    wait_until_gone(child.pid, "a killed, unreaped child")
    child.wait()
    wait_until_gone(child.pid, "a reaped child")
