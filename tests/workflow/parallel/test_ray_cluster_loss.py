"""Losing the whole Ray cluster mid-run: `run --auto --executor ray` halts gracefully (exit 6,
resumable, the reason names the cluster), the phases in flight are released uncounted as on
Ctrl-C, and `run --resume` finishes the stories with exact counters.

The cluster is a real one of its own (killed here, so not the module cluster of
`test_ray_executor.py`), started in its own session so that every process of it (GCS, raylet,
agents, workers) can be killed at once, the way a machine loss ends them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli_environment, run_cli
from tests.support.fakes.callers import CALLER
from tests.support.git_support import git_env, make_repo  # noqa: F401  (fixture)
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    RAY_ENV,
    frontmatter,
    kill_session,
    only_run,
    start_ray_cluster,
    stop_or_explain,
    story_events,
    write_config,
)

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.usefixtures("git_env"),
    # Its own group: its cluster is its own, so it need not wait for the module cluster's tests
    # of test_ray_executor.py (two local clusters run side by side: each `ray start --head
    # --port=0` starts a new one, on ports of its own).
    pytest.mark.xdist_group("ray-cluster-loss"),
]

#: The verification of each story's implementation (the first, the baseline on the untouched
#: base, passes): says it started (`started-<worktree>`), then waits for `release` (the
#: resumed run) or for its worker to die (the cluster killed).
BLOCKER = (
    """\
import os, pathlib, sys, time
"""
    + CALLER
    + """
marks = pathlib.Path(sys.argv[1])
parent = caller()
name = pathlib.Path.cwd().name
if not (marks / f"baseline-{name}").exists():
    (marks / f"baseline-{name}").write_text("")
    sys.exit(0)
(marks / f".{name}").write_text(str(parent))
(marks / f".{name}").rename(marks / f"started-{name}")
while not (marks / "release").exists():
    if not alive(parent):
        sys.exit(3)
    time.sleep(0.02)
"""
)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A Ray cluster for this test alone: its address and its session id."""
    temp = tempfile.mkdtemp(prefix="ai-sdlc-ray-")
    try:
        address, sid = start_ray_cluster(temp, tmp_path / "cluster.log")
        try:
            yield address, sid
        finally:
            kill_session(sid)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_losing_the_cluster_halts_the_run_resumably_and_resume_finishes_it(
    tmp_path: Path, own_cluster: tuple[str, int]
) -> None:
    address, cluster_sid = own_cluster
    blocker = tmp_path / "blocker.py"
    blocker.write_text(BLOCKER)
    repo = make_repo(tmp_path)
    ids = [repo.story("Story 1"), repo.story("Story 2")]
    marks = records_path(repo.root)  # the project's records folder
    write_config(repo.root, f'verify:\n  test: "{sys.executable} {blocker} {marks}"\n')
    records_folder(repo.root)
    (repo.root / ".ai-sdlc" / "scripted.yaml").write_text("rules: []\n")
    env = cli_environment(
        {
            **RAY_ENV,
            "AI_SDLC_RUN__RAY__CACHE_DIR": str(tmp_path / "cache"),
            "PYTHONFAULTHANDLER": "1",
        }
    )
    argv = ["run", "--auto", "--jobs", "2", "--executor", "ray", "--ray-address", address]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(repo.root), *argv, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        # Both stories are in their implement phase's verification on a cluster worker.
        deadline = time.monotonic() + 90
        while len(list(marks.glob("started-*"))) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the verifications never started"
            time.sleep(0.02)
        kill_session(cluster_sid)
        stdout, stderr = stop_or_explain(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 6, stderr
    assert "Traceback" not in stderr
    assert f"halted (cluster_lost): lost the Ray cluster at {address}: " in stderr
    assert "run --resume" in stderr
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert events[-1]["event"] == "error" and events[-1]["exit_code"] == 6
    state = only_run(repo.root)
    assert state["run_status"] == "stopped" and state["resumable"] is True
    assert state["stop_reason"]["condition"] == "cluster_lost"
    assert address in state["stop_reason"]["message"]
    # Each phase in flight was released uncounted and rolled back, as a Ctrl-C does.
    rolled = [e for e in events if e["event"] == "rollback_initiated" and "run_id" in e]
    assert sorted(e["story"] for e in rolled) == ids
    assert {e["phase"] for e in rolled} == {"implement"}
    for sid in ids:
        fm = frontmatter(repo.root, sid)
        assert fm["status"] == "in-progress", sid
        assert fm.get("total_recovery_attempts", 0) == 0, sid
        assert not fm.get("recovery_breakdown"), sid
        log = story_events(repo.root, sid)
        released = [e for e in log if e.get("action") == "attempt_released"]
        assert [e["phase"] for e in released] == ["implement"], sid
        assert address in released[0]["reason"], sid

    (marks / "release").write_text("")
    resumed = run_cli(repo.root, "run", "--resume", state["run_id"], "--json")
    assert resumed.returncode == 0, resumed.output
    final = only_run(repo.root)
    assert final["run_status"] == "completed"
    for sid in ids:
        fm = frontmatter(repo.root, sid)
        assert fm["status"] == "done", sid
        # The abandoned attempt counted nothing, before or after the resume.
        assert fm.get("total_recovery_attempts", 0) == 0, sid
        assert not fm.get("recovery_breakdown"), sid
