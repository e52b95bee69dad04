"""`run --auto --jobs N --executor ray` on a real local Ray cluster (started once for the module),
through the real CLI in its own process, with a local bare repository as `origin`: the same
counters as the local executor, the global limit exact under endless 429s, a worker killed
mid-implement retried without a recovery counted twice or a commit made twice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.support.fakes.callers import CALLER
from tests.support.git_support import git, git_env, make_repo  # noqa: F401  (fixture)
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    ENDLESS_RETRIES,
    RAY_ENV,
    frontmatter,
    kill_session,
    only_run,
    start_ray_cluster,
    story_events,
    write_config,
    write_rules,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("git_env")]
#: The tests that use the module's local cluster (a module fixture: one per xdist worker that
#: runs such a test) or `import ray` in this process (0.7 s): on one xdist worker
#: (`--dist loadgroup` in the Makefile), so the cluster is started once.
#: The others are left out of the group, and the cluster-loss test (a cluster of its own, in
#: test_ray_cluster_loss.py) is a group of its own: the Ray tests are not one serial chain.
with_ray = pytest.mark.xdist_group("ray")

COUNTERS = (
    "status",
    "total_recovery_attempts",
    "recovery_breakdown",
    "implementation_retry_count",
    "retry_count",
    "refinement_count",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    temp = tempfile.mkdtemp(prefix="ai-sdlc-ray-")
    try:
        address, sid = start_ray_cluster(temp, tmp_path_factory.mktemp("ray") / "cluster.log")
        try:
            yield address
        finally:
            kill_session(sid)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def on_ray(root: Path, address: str, *args: str, cache: Path) -> Any:
    env = {**RAY_ENV, "AI_SDLC_RUN__RAY__CACHE_DIR": str(cache)}
    return run_cli(
        root,
        "run",
        *args,
        "--executor",
        "ray",
        "--ray-address",
        address,
        "--json",
        env=env,
        subprocess=True,
        timeout=120,
    )


def project(tmp_path: Path, count: int, config: str = "", rules: str = "rules: []\n") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    repo = make_repo(tmp_path)
    for n in range(count):
        repo.story(f"Story {n + 1}")
    write_config(repo.root, config)
    write_rules(repo.root, rules)
    return repo.root


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def counters(root: Path, sid: str) -> dict[str, Any]:
    fm = frontmatter(root, sid)
    return {k: fm.get(k) for k in COUNTERS}


def branch_commits(origin: Path, branch: str) -> list[str]:
    """The `AI-SDLC-Attempt` trailer of every commit the story branch adds to main."""
    out = git(
        origin,
        "log",
        "--format=%(trailers:key=AI-SDLC-Attempt,valueonly)%x00",
        f"main..{branch}",
    )
    return [c.strip() for c in out.split("\0") if c.strip()]


#: A verification that fails while `broken.txt` exists (an implement attempt that breaks it).
VERIFY = (
    f'verify:\n  test: "{sys.executable} -c '
    '\'import os,sys; sys.exit(1 if os.path.exists(\\"broken.txt\\") else 0)\'"\n'
)
MIXED_RULES = (
    "rules:\n"
    "  - phase: implement\n    story: S-0002\n    attempt: 1\n"
    "    files: {broken.txt: 'oops'}\n"
    "  - phase: review\n    story: S-0005\n    attempt: 1\n"
    "    decision: REJECTED\n    feedback: 'Name the greeting function better.'\n"
    "  - phase: refine\n    story: S-0003\n    attempt: 1\n"
    "    decision: REJECTED\n    feedback: 'Say who the user is.'\n"
)


#: The rate stop conditions judge the stories finished so far, so with `--jobs 2` whether 3
#: scripted retries among 5 stories trip `max_retry_rate` (0.5) depends on which stories finish
#: first: this comparison is about the executors, so no rate may stop either run.
NO_RATE_STOPS = "run:\n  stop_conditions:\n    max_retry_rate: 1.0\n    max_reject_rate: 1.0\n"


@with_ray
def test_five_stories_on_ray_match_the_local_executor(tmp_path: Path, cluster: str) -> None:
    """Each scripted failure kind once (an implementation retry, a review rejection, a
    refinement rejection) among five stories on two workers, so that slots are reused."""
    local_root = project(tmp_path / "local", 5, VERIFY + NO_RATE_STOPS, MIXED_RULES)
    ray_root = project(tmp_path / "ray", 5, VERIFY + NO_RATE_STOPS, MIXED_RULES)

    local = run_cli(local_root, "run", "--auto", "--jobs", "2", "--json")
    assert local.returncode == 0, local.output
    done = on_ray(ray_root, cluster, "--auto", "--jobs", "2", cache=tmp_path / "cache")
    assert done.returncode == 0, done.output

    state = only_run(ray_root)
    assert state["run_status"] == "completed" and state["executor"] == "ray"
    assert state["counters"] == only_run(local_root)["counters"]
    ids = [f"S-000{n}" for n in range(1, 6)]
    for sid in ids:
        assert counters(ray_root, sid) == counters(local_root, sid), sid
        assert counters(ray_root, sid)["status"] == "done"
    # The scripted failures happened, and were counted the same way on both.
    assert counters(ray_root, "S-0002")["recovery_breakdown"] == {"implementation_retry": 1}
    assert counters(ray_root, "S-0005")["recovery_breakdown"] == {"rework": 1}
    # The failed attempt's patch reached the project's ledger; workers never wrote the project.
    assert (ray_root / ".ai-sdlc" / "stories").exists()
    assert list((ray_root / ".ai-sdlc" / "stories").glob("S-0002*/attempts/1.patch"))
    assert not (ray_root / ".ai-sdlc" / "worktrees").exists()
    # Every phase names the Ray node and worker process that ran it, in the run state and
    # in the --json events.
    nodes = {p["worker"] for s in state["stories"] for p in s["phases"]}
    assert nodes and all(n.startswith("ray:") and n.count(":") == 2 for n in nodes)
    started = [e for e in events_of(done.stdout) if e["event"] == "phase_started"]
    assert started and all(e["node"].startswith("ray:") for e in started)
    # Workers talked to the coordinator over direct links (the default).
    links = {e["link"] for e in events_of(done.stdout) if e["event"] == "coordination"}
    assert links == {"direct"}
    shown = run_cli(ray_root, "runs", "show", state["run_id"])
    assert shown.returncode == 0, shown.output
    for s in state["stories"]:
        line = next(ln for ln in shown.output.splitlines() if ln.strip().startswith(s["story_id"]))
        assert f"on {s['phases'][0]['worker']}" in line, line
    # The work travelled through git: each story branch is on origin with the same commits
    # (one per passing implementation attempt) as the local run's branch, and was fetched
    # into the project.
    origin = tmp_path / "ray" / "origin.git"
    for sid in ids:
        branch = str(frontmatter(ray_root, sid)["branch"])
        expected = ["2"] if sid == "S-0002" else ["1", "1"] if sid == "S-0005" else ["1"]
        assert branch_commits(origin, branch) == expected, sid
        assert branch_commits(local_root, branch) == expected, sid
        git(ray_root, "rev-parse", "--verify", f"refs/remotes/origin/{branch}")


@with_ray
def test_endless_429s_block_one_story_at_exactly_the_limit(tmp_path: Path, cluster: str) -> None:
    rules = (
        "rules:\n  - phase: refine\n    story: S-0001\n"
        "    fault: {kind: rate_limit, retry_after: 0}\n"
    )
    root = project(tmp_path, 4, ENDLESS_RETRIES + "  ray:\n    direct: false\n", rules)
    result = on_ray(root, cluster, "--auto", "--jobs", "4", cache=tmp_path / "cache")
    # The others finish; then the only story left is escalated: the run stops on that (as the
    # local executor does) with the blocked story's code, resumable once a human unblocks it.
    assert result.returncode == 5, result.output
    assert only_run(root)["stop_reason"]["condition"] == "all_escalated"
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 10
    assert dict(fm["recovery_breakdown"]) == {"api_retry": 10}
    counted = [
        e for e in events_of(result.stdout) if e["event"] == "recovery" and e["story"] == "S-0001"
    ]
    assert [e["total"] for e in counted] == list(range(1, 11))
    for sid in ("S-0002", "S-0003", "S-0004"):
        assert frontmatter(root, sid)["status"] == "done", sid
        assert frontmatter(root, sid).get("total_recovery_attempts", 0) == 0
    # With `run.ray.direct: false` every message went through the mailbox actor.
    links = {e["link"] for e in events_of(result.stdout) if e["event"] == "coordination"}
    assert links == {"mailbox"}


#: The first verification of S-0001's implementation (the one before is the baseline on its
#: untouched base) tells the test its worker's pid, then waits to be killed.
SLEEPER = (
    """\
import os, pathlib, sys, time
"""
    + CALLER
    + """
marks = pathlib.Path(sys.argv[1])
if "S-0001" in os.getcwd() and not (marks / "baseline").exists():
    (marks / "baseline").write_text("")
    sys.exit(0)
if "S-0001" in os.getcwd() and not (marks / "pid").exists():
    parent = caller()
    (marks / "pid.tmp").write_text(str(parent))
    (marks / "pid.tmp").rename(marks / "pid")
    for _ in range(600):
        if not alive(parent):
            sys.exit(3)
        time.sleep(0.05)
    sys.exit(4)
"""
)


@with_ray
def test_a_worker_killed_mid_implement_is_retried_and_counted_once(
    tmp_path: Path, cluster: str
) -> None:
    marks = records_path(tmp_path / "proj")  # the project's records folder
    script = tmp_path / "verify_sleeper.py"
    script.write_text(SLEEPER)
    config = f'verify:\n  test: "{sys.executable} {script} {marks}"\n'
    root = project(tmp_path, 2, config)
    assert records_folder(root) == marks
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            pid_file = marks / "pid"
            if pid_file.exists():
                pid = int(pid_file.read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    result = on_ray(root, cluster, "--auto", "--jobs", "2", cache=tmp_path / "cache")
    thread.join(timeout=5)
    assert killed, "the verification never started"
    assert result.returncode == 0, result.output
    events = events_of(result.stdout)
    lost = [e for e in events if e["event"] == "worker_lost"]
    assert len(lost) == 1 and lost[0]["story"] == "S-0001"
    assert lost[0]["worker"].endswith(f":{killed[0]}")
    assert lost[0]["retried_on"] != lost[0]["worker"]
    # The killed attempt counts once, as the ledger's crash rule says; nothing else counted.
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "done"
    assert fm["total_recovery_attempts"] == 1
    assert dict(fm["recovery_breakdown"]) == {"implementation_retry": 1}
    stale = [
        e for e in story_events(root, "S-0001") if e.get("action") == "recovery" and e.get("stale")
    ]
    assert len(stale) == 1
    assert frontmatter(root, "S-0002")["status"] == "done"
    assert frontmatter(root, "S-0002").get("total_recovery_attempts", 0) == 0
    # One commit per passing attempt: attempt 2 passed; the killed attempt 1 left nothing.
    origin = tmp_path / "origin.git"
    assert branch_commits(origin, str(fm["branch"])) == ["2"]
    state = only_run(root)
    assert state["run_status"] == "completed"


def test_without_ray_installed_the_ray_executor_exits_4_with_the_install_command(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError(\"No module named 'ray' (test shim)\")\n")
    root = project(tmp_path, 1)
    result = run_cli(
        root,
        "run",
        "--auto",
        "--jobs",
        "2",
        "--executor",
        "ray",
        env={"PYTHONPATH": str(tmp_path / "shim")},
        subprocess=True,
    )
    assert result.returncode == 4, result.output
    assert "pip install 'ai-sdlc-runner[ray]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (root / ".ai-sdlc" / "runs").exists() or not list(
        (root / ".ai-sdlc" / "runs").iterdir()
    )


@with_ray  # `run --executor ray` in this process imports ray
def test_the_ray_executor_needs_a_remote_and_a_multi_story_run(tmp_path: Path) -> None:
    repo_root = project(tmp_path, 1)
    git(repo_root, "remote", "remove", "origin")
    no_remote = run_cli(repo_root, "run", "--auto", "--jobs", "2", "--executor", "ray")
    assert no_remote.returncode == 2, no_remote.output
    assert "needs a git remote 'origin'" in no_remote.stderr
    runs = repo_root / ".ai-sdlc" / "runs"
    assert not runs.exists() or not list(runs.iterdir())  # refused before a run was created
    single = run_cli(repo_root, "run", "S-0001", "--executor", "ray")
    assert single.returncode == 2 and "multi-story run" in single.stderr
    unknown = run_cli(repo_root, "run", "--auto", "--executor", "slurm")
    assert unknown.returncode == 2 and "unknown executor 'slurm'" in unknown.stderr


def test_a_commit_pushed_by_an_attempt_the_ledger_never_settled_is_dropped(
    tmp_path: Path,
) -> None:
    """The window a retry must close: a worker pushed attempt 2's commit and died before the
    coordinator recorded it (the ledger still holds attempt 2 open and will count it as a
    crash), so the retry drops that commit; any other tip is left alone."""
    from ai_sdlc.git.attempts import commit_message
    from ai_sdlc.store import StoryStore
    from ai_sdlc.workflow.parallel.ray_worker import drop_unsettled_commit

    root = project(tmp_path, 1)
    story = StoryStore(root).get("S-0001")
    branch = "ai-sdlc/S-0001-story-1"
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(clone))
    git(clone, "switch", "-q", "-c", branch)
    for attempt in (1, 2):
        (clone / f"work{attempt}.txt").write_text(f"attempt {attempt}\n")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-F", "-", input=commit_message(story, attempt))
    git(clone, "push", "-q", "origin", branch)
    git(clone, "switch", "-q", "main")  # as a worker's slot: the story branch is not checked out
    first = git(clone, "rev-parse", f"{branch}^").strip()
    # Another phase open, or another attempt open: the tip is kept.
    assert not drop_unsettled_commit(clone, "origin", branch, "S-0001", {"phase": "review"})
    open_1 = {"phase": "implement", "attempt": 1}
    assert not drop_unsettled_commit(clone, "origin", branch, "S-0001", open_1)
    # Attempt 2 open in the ledger and its commit on the tip: dropped, on origin too.
    open_2 = {"phase": "implement", "attempt": 2}
    assert drop_unsettled_commit(clone, "origin", branch, "S-0001", open_2)
    assert git(tmp_path / "origin.git", "rev-parse", branch).strip() == first
    assert branch_commits(tmp_path / "origin.git", branch) == ["1"]


#: Every provider call of S-0001 fails with a 500; the `llm` breaker opens after two failures
#: and stays open for the rest of the test.
BREAKER_CONFIG = (
    "resilience:\n  policies:\n    llm:\n      max_attempts: 5\n"
    "      initial_delay: 0.001\n      max_delay: 0.002\n      jitter: 0\n"
    "      breaker:\n        failure_threshold: 2\n        open_timeout: 600\n"
    "run:\n  cooldown_seconds: 0\n"
)
BREAKER_RULES = "rules:\n  - phase: refine\n    story: S-0001\n    fault: {kind: server}\n"


@with_ray
def test_a_breaker_opened_on_one_worker_holds_for_the_whole_run(
    tmp_path: Path, cluster: str
) -> None:
    """As between local workers (the project's `.ai-sdlc/state/breakers.json`): the breaker
    S-0001's task opens is the coordinator's, and S-0002's task, a separate worker session, is
    refused by it without a provider call. The same run on one machine ends the same way, with
    the same policy metrics in the project."""
    local_root = project(tmp_path / "local", 2, BREAKER_CONFIG, BREAKER_RULES)
    ray_root = project(tmp_path / "ray", 2, BREAKER_CONFIG, BREAKER_RULES)
    local = run_cli(local_root, "run", "--auto", "--jobs", "1", "--json")
    cache = tmp_path / "cache"
    done = on_ray(ray_root, cluster, "--auto", "--jobs", "1", cache=cache)
    assert done.returncode == local.returncode == 6, done.output
    assert only_run(ray_root)["stop_reason"] == only_run(local_root)["stop_reason"]
    for sid in ("S-0001", "S-0002"):
        assert counters(ray_root, sid) == counters(local_root, sid), sid
    assert dict(frontmatter(ray_root, "S-0001")["recovery_breakdown"]) == {"api_retry": 2}
    events = events_of(done.stdout)
    returned = [e for e in events if e["event"] == "story_returned" and e["story"] == "S-0002"]
    assert returned and all("circuit breaker is open" in e["reason"] for e in returned)
    # S-0002's worker never called the provider: the open breaker refused the first call.
    assert not [e for e in events if e["event"] == "scripted_default"]
    # The breaker is the project's, written by the coordinator (not a worker process); a
    # worker's clone holds only its replica of that file.
    project_file = ray_root / ".ai-sdlc" / "state" / "breakers.json"
    stored = json.loads(project_file.read_text())
    assert stored["breakers"]["llm"]["state"] == "open"
    workers = {int(e["worker"].rsplit(":", 1)[1]) for e in events if e["event"] == "story_started"}
    assert workers and stored["breakers"]["llm"]["changed_by_pid"] not in workers
    replicas = list(cache.glob("*/slot-*/.ai-sdlc/state/breakers.json"))
    assert replicas and all(r.read_bytes() == project_file.read_bytes() for r in replicas)
    metrics = [
        json.loads((root / ".ai-sdlc" / "state" / "metrics.json").read_text())
        for root in (local_root, ray_root)
    ]
    # The workers' policy metrics reached the project's metrics, the same as on one machine.
    local_metrics, ray_metrics = metrics
    assert ray_metrics["policies"] == local_metrics["policies"]
    assert ray_metrics["policies"]["llm"]["breaker_rejections"] >= 1
    for counts in (local_metrics, ray_metrics):
        counts["breakers"]["llm"].pop("time_in_state")
    assert ray_metrics["breakers"] == local_metrics["breakers"]


@with_ray
def test_a_committed_backlog_stays_out_of_the_workers_worktrees(
    tmp_path: Path, cluster: str
) -> None:
    """Issue 26: a worker's story worktree (in its clone) leaves the committed `.ai-sdlc/`
    out too, and the branch it pushes keeps every story file of the backlog unchanged."""
    seen = records_path(tmp_path / "proj") / "seen.log"
    look = (
        "import json, os, sys; "
        "open(sys.argv[1], 'a').write(json.dumps(sorted(os.listdir('.'))) + '\\n')"
    )
    command = json.dumps(f"{sys.executable} -c {json.dumps(look)} {seen}")
    root = project(tmp_path, 2, f"verify:\n  build: {command}\n")
    assert records_folder(root) == seen.parent
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "backlog")
    git(root, "push", "-q", "origin", "main")
    stories = git(root, "rev-parse", "main:.ai-sdlc/stories").strip()

    done = on_ray(root, cluster, "--auto", "--jobs", "2", cache=tmp_path / "cache")

    assert done.returncode == 0, done.output
    views = [json.loads(line) for line in seen.read_text().splitlines()]
    assert views and all(".ai-sdlc" not in view and "README.md" in view for view in views)
    origin = tmp_path / "origin.git"
    for sid in ("S-0001", "S-0002"):
        assert frontmatter(root, sid)["status"] == "done"
        branch = str(frontmatter(root, sid)["branch"])
        assert branch_commits(origin, branch) == ["1"], sid
        assert git(origin, "rev-parse", f"{branch}:.ai-sdlc/stories").strip() == stories
