"""Helpers for tests/test_runs_*.py: real projects built in-process (fast), then driven through
the real `ai-sdlc` entry point."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import allow_unverified, cli_environment

#: Verification commands (argument lists, no shell) that pass or fail at once.
PASS = [sys.executable, "-c", "pass"]
FAIL = [
    sys.executable,
    "-c",
    "import sys; print('boom: widget count is 3, expected 4'); sys.exit(1)",
]


#: Keep Ray local, quiet and free of files in the user's home (the Ray tests and their clusters).
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_DISABLE_IMPORT_WARNING": "1",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
}
#: How the tests start a local Ray cluster: `ray start --head`, as a user does, with two CPUs, a
#: free port, and without the processes a test cluster has no use for: the dashboard, the
#: autoscaler's monitor, and the log monitor (it streams worker logs to drivers; every run sets
#: log_to_driver=False). A cluster started by `ray.init()` in a driver process runs all three,
#: plus a worker per CPU started at once for that driver, which never runs a task here (the
#: `ai-sdlc` drivers that connect get the workers they need): ~1.5 s of CPU more per cluster.
RAY_START = (
    "start",
    "--head",
    "--port=0",
    "--num-cpus=2",
    "--include-dashboard=false",
    "--disable-usage-stats",
    "--no-monitor",
    "--include-log-monitor=false",
)


@pytest.fixture
def killed_tmpdir() -> Iterator[Path]:
    """The `TMPDIR` of processes a test kills on purpose (SIGKILL leaves their temp folders):
    a folder of the test's own, removed after it. Short: Unix socket paths below it (the fork
    server's, Ray's) must stay within 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="ai-sdlc-killed-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def start_ray_cluster(temp: str, log: Path) -> tuple[str, int]:
    """A local Ray cluster in a session of its own (so that `kill_session` ends every process of
    it at once, as a machine loss would): its GCS address and the session id. `temp` must be a
    short folder: Ray's socket paths under it must stay within 107 bytes."""
    ray_cli = Path(sys.executable).with_name("ray")
    with log.open("w") as output:
        proc = subprocess.Popen(
            [str(ray_cli), *RAY_START, f"--temp-dir={temp}"],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Its workers' temp folders (a killed worker leaves them) go with the cluster's.
            env={**os.environ, **RAY_ENV, "TMPDIR": temp},
            start_new_session=True,
        )
        try:
            # `ray start` returns once the head node runs; its processes stay, in its session
            # (Linux reuses no pid while it names a live session, so the id stays theirs).
            returncode = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            kill_session(proc.pid)
            proc.wait()
            raise AssertionError(
                f"ray start still running after 120 s:\n{log.read_text()}"
            ) from None
    address_file = Path(temp) / "ray_current_cluster"
    if returncode != 0 or not address_file.exists():
        kill_session(proc.pid)
        raise AssertionError(f"ray start failed ({returncode}):\n{log.read_text()}")
    return address_file.read_text().strip(), proc.pid


def session_pids(sid: int) -> list[int]:
    """Every live process of session `sid` (Ray's workers lead process groups of their own,
    but stay in the session)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def kill_session(sid: int) -> None:
    for _ in range(50):
        pids = session_pids(sid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


#: A provider that keeps failing is retried at once and without end (only the recovery limit
#: stops it), and no stop condition of the run ends it first.
ENDLESS_RETRIES = (
    "resilience:\n  policies:\n    llm:\n      max_attempts: 100\n"
    "      initial_delay: 0.001\n      max_delay: 0.002\n      jitter: 0\n"
    "      breaker:\n        failure_threshold: 1000\n"
    # a story whose phase gives up (the run's retry budget) is tried again until blocked
    "run:\n  cooldown_seconds: 0\n  max_story_errors: 20\n"
    "  stop_conditions:\n    max_consecutive_fails: 20\n"
)


def make_project(root: Path, titles: list[str], config: str = "") -> StoryStore:
    """An initialised project with one story per title (priority in title order)."""
    root.mkdir(parents=True, exist_ok=True)
    store = StoryStore(root)
    store.init()
    for title in titles:
        store.add(title)
    write_config(root, config)
    return store


def write_config(root: Path, text: str) -> None:
    """The project's config: `text`, plus `verify.none: true` when it sets no `verify`."""
    (root / ".ai-sdlc" / "config.yaml").write_text(text)
    allow_unverified(root)


def write_rules(root: Path, text: str) -> None:
    (root / ".ai-sdlc" / "scripted.yaml").write_text(text)


def start_cli(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`ai-sdlc` as a background process (for Ctrl-C, SIGKILL and daemon tests), in a user's
    environment (`cli_environment`) plus `env`. Python's fault handler is on, so a process that
    hangs can be made to print its stacks (`stop_or_explain`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=cli_environment({**(env or {}), "PYTHONFAULTHANDLER": "1"}),
        text=True,
    )


def stop_or_explain(
    proc: subprocess.Popen[str], timeout: float = 60.0, leftovers: tuple[int, ...] = ()
) -> tuple[str, str]:
    """`proc.communicate()` with a deadline; a process still running at the deadline is made to
    dump its Python stacks (SIGABRT + fault handler) and the test fails showing them, instead of
    hanging the suite. `leftovers` (pids the process started) are then killed too."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            _, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                _, stderr = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                # Dead, but a process it started still holds its pipes open: say so, don't hang.
                proc.wait()
                stderr = "(no stderr: a process ai-sdlc started still holds its pipes open)"
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(
            f"ai-sdlc (pid {proc.pid}) still running {timeout:g}s after the signal; "
            f"its stderr and stacks:\n{stderr}"
        ) from None


def run_states(root: Path) -> list[dict[str, Any]]:
    runs = root / ".ai-sdlc" / "runs"
    if not runs.is_dir():
        return []
    # (not `runs/single/`: the single-story runs)
    states = [
        json.loads((d / "state.json").read_text())
        for d in sorted(runs.iterdir())
        if d.name != "single"
    ]
    return sorted(states, key=lambda s: (s["started_at"], s["run_id"]))


def only_run(root: Path) -> dict[str, Any]:
    states = run_states(root)
    assert len(states) == 1, states
    return states[0]


def story_states(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["story_id"]: s for s in state["stories"]}


def run_events(root: Path, run_id: str) -> list[dict[str, Any]]:
    path = root / ".ai-sdlc" / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def story_events(root: Path, sid: str) -> list[dict[str, Any]]:
    path = root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phases_started(root: Path, sid: str) -> list[str]:
    return [e["phase"] for e in story_events(root, sid) if e["action"] == "phase_started"]


def frontmatter(root: Path, sid: str) -> dict[str, Any]:
    return dict(StoryStore(root).get(sid).frontmatter)


def yaml_list(argv: list[str]) -> str:
    return json.dumps(argv)
