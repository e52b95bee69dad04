"""Parallel runs (`run --auto --jobs N`) over a dependency graph, through the real CLI: workers are
real processes (the local executor), stories real files, the project a real git repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.workflow.runs import conflicts
from ai_sdlc.workflow.runs import graph as G
from tests.conftest import run_cli
from tests.support.git_support import git_env, make_repo  # noqa: F401  (fixture)
from tests.support.runs_support import (
    ENDLESS_RETRIES,
    frontmatter,
    only_run,
    run_events,
    story_events,
    story_states,
    write_config,
    write_rules,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

#: Agent calls take a moment, so stories that can overlap do.
SLOW = "delay: 0.2\nrules: []\n"


def add_field(root: Path, sid: str, line: str) -> None:
    path = root / ".ai-sdlc" / "stories" / sid / "story.md"
    text = path.read_text()
    head, body = text[4:].split("\n---\n", 1)
    path.write_text("---\n" + head + "\n" + line + "\n---\n" + body)


def project(tmp_path: Path, count: int, deps: dict[str, list[str]], config: str = "") -> Path:
    repo = make_repo(tmp_path, remote=False)
    for n in range(count):
        repo.story(f"Story {n + 1}")
    for sid, needs in deps.items():
        add_field(repo.root, sid, f"dependencies: [{', '.join(needs)}]")
    write_config(repo.root, config)
    return repo.root


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def span(events: list[dict[str, Any]], sid: str) -> tuple[str, str]:
    """When the story's first phase started and when it finished (runner event times)."""
    start = next(e["time"] for e in events if e["event"] == "phase_started" and e["story"] == sid)
    end = next(e["time"] for e in events if e["event"] == "story_finished" and e["story"] == sid)
    return start, end


def test_two_chains_run_three_at_a_time_in_dependency_order(tmp_path: Path) -> None:
    chains = {"S-0002": ["S-0001"], "S-0003": ["S-0002"], "S-0005": ["S-0004"]}
    chains["S-0006"] = ["S-0005"]
    root = project(tmp_path, 6, chains)
    write_rules(root, SLOW)
    result = run_cli(root, "run", "--auto", "--jobs", "3", "--json")
    assert result.returncode == 0, result.output
    events = events_of(result.stdout)
    state = only_run(root)
    assert state["run_status"] == "completed" and state["jobs"] == 3
    assert state["executor"] == "local"
    assert {s["story_id"]: s["status"] for s in state["stories"]} == {
        f"S-000{n}": "done" for n in range(1, 7)
    }
    # Order: a story's first phase starts only after each of its dependencies finished.
    spans = {f"S-000{n}": span(events, f"S-000{n}") for n in range(1, 7)}
    for sid, needs in chains.items():
        for dep in needs:
            assert spans[dep][1] <= spans[sid][0], (sid, dep, spans)
    # Overlap: the two chains ran at the same time (S-0001 and S-0004 both in progress).
    a, b = spans["S-0001"], spans["S-0004"]
    assert a[0] < b[1] and b[0] < a[1], spans
    workers = {e["worker"] for e in events if e["event"] == "phase_started"}
    assert len(workers) == 6 and all(w.startswith("local:") for w in workers)
    # The run state keeps each story's phase timeline with the worker that ran it.
    timeline = story_states(state)["S-0003"]["phases"]
    assert [p["phase"] for p in timeline] == ["refine", "research", "plan", "implement", "review"]
    assert all(
        p["started_at"] <= p["ended_at"] and p["worker"].startswith("local:") for p in timeline
    )
    logged = [e for e in run_events(root, state["run_id"]) if e["action"] == "phase_started"]
    assert len(logged) == 30 and all(e["worker"].startswith("local:") for e in logged)
    shown = run_cli(root, "runs", "show", state["run_id"])
    assert "jobs 3" in shown.stdout, shown.output


def test_a_cycle_is_refused_before_anything_runs(tmp_path: Path) -> None:
    root = project(tmp_path, 3, {"S-0001": ["S-0003"], "S-0003": ["S-0001"]})
    result = run_cli(root, "run", "--auto", "--jobs", "2")
    assert result.returncode == 3, result.output
    assert "S-0001 → S-0003 → S-0001" in result.stderr
    assert "S-0001" in result.stderr and "story.md" in result.stderr
    assert story_events(root, "S-0002") == []
    assert not (root / ".ai-sdlc" / "runs").exists()
    (tmp_path / "m").mkdir()
    missing = project(tmp_path / "m", 1, {"S-0001": ["S-0009"]})
    refused = run_cli(missing, "run", "--auto")
    assert refused.returncode == 3
    assert "S-0001 depends on S-0009, which does not exist" in refused.stderr


def test_a_blocked_storys_dependents_are_skipped_with_the_reason(tmp_path: Path) -> None:
    deps = {"S-0002": ["S-0001"], "S-0003": ["S-0002"]}
    root = project(tmp_path, 4, deps, "limits:\n  refinement_iterations: 0\n")
    write_rules(
        root,
        "rules:\n  - phase: refine\n    story: S-0001\n    decision: REJECTED\n"
        "    feedback: too vague\n",
    )
    result = run_cli(root, "run", "--auto", "--jobs", "2", "--json")
    assert result.returncode == 5, result.output  # the run did what it could; S-0001 is blocked
    assert only_run(root)["stop_reason"]["condition"] == "all_escalated"
    stories = story_states(only_run(root))
    assert stories["S-0001"]["status"] == "blocked"
    assert stories["S-0002"]["status"] == stories["S-0003"]["status"] == "skipped"
    assert stories["S-0002"]["reason"] == "depends on S-0001, which is blocked"
    assert stories["S-0003"]["reason"] == "depends on S-0002, which is skipped"
    assert stories["S-0004"]["status"] == "done"
    for sid in ("S-0002", "S-0003"):
        assert not [e for e in story_events(root, sid) if e["action"] == "phase_started"]
    skipped = [e for e in events_of(result.stdout) if e["event"] == "story_skipped"]
    assert {e["story"] for e in skipped} == {"S-0002", "S-0003"}


def test_two_concurrent_stories_hammering_recoveries_stop_exactly_at_the_limit(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, 2, {}, ENDLESS_RETRIES)
    write_rules(
        root,
        "rules:\n"
        + "".join(
            f"  - phase: refine\n    story: {sid}\n"
            "    fault: {kind: rate_limit, retry_after: 0}\n"
            for sid in ("S-0001", "S-0002")
        ),
    )
    result = run_cli(root, "run", "--auto", "--jobs", "2", "--json")
    assert result.returncode == 6, result.output
    events = events_of(result.stdout)
    for sid in ("S-0001", "S-0002"):
        fm = frontmatter(root, sid)
        assert fm["status"] == "blocked"
        assert fm["total_recovery_attempts"] == 10
        assert dict(fm["recovery_breakdown"]) == {"api_retry": 10}
        counted = [e for e in events if e["event"] == "recovery" and e["story"] == sid]
        assert [e["total"] for e in counted] == list(range(1, 11))
    # Both were hammering at the same time.
    first = {sid: span_first(events, sid) for sid in ("S-0001", "S-0002")}
    assert first["S-0001"][0] < first["S-0002"][1] and first["S-0002"][0] < first["S-0001"][1]


def span_first(events: list[dict[str, Any]], sid: str) -> tuple[str, str]:
    times = [e["time"] for e in events if e["event"] == "recovery" and e["story"] == sid]
    return times[0], times[-1]


def test_a_halt_in_a_parallel_run_keeps_every_story_whole_and_resumes(tmp_path: Path) -> None:
    root = project(tmp_path, 5, {}, "run:\n  stop_conditions:\n    max_total_attempts: 2\n")
    write_rules(root, SLOW)
    halted = run_cli(root, "run", "--auto", "--jobs", "3", "--json")
    assert halted.returncode == 6, halted.output
    state = only_run(root)
    assert state["run_status"] == "stopped" and state["resumable"] is True
    assert state["stop_reason"]["condition"] == "max_total_attempts"
    # Granted implementation attempts count: never above the cap (other phases are not capped).
    assert state["counters"]["implementation_attempts"] == 2
    events = events_of(halted.stdout)
    assert len([e for e in events if e["event"] == "run_stopped"]) == 1
    started = [e for e in events if e["event"] == "phase_started"]
    assert len([e for e in started if e["phase"] == "implement"]) == 2
    for n in range(1, 6):
        fm = frontmatter(root, f"S-000{n}")  # every story file parses and is consistent
        assert fm["status"] in ("backlog", "ready", "in-progress")
    # Raise the cap and resume: the run finishes every story (no agent latency needed now).
    write_config(root, "")
    write_rules(root, "rules: []\n")
    resumed = run_cli(root, "run", "--resume", state["run_id"], "--json")
    assert resumed.returncode == 0, resumed.output
    final = only_run(root)
    assert final["run_status"] == "completed" and final["segments"] == 2
    assert all(s["status"] == "done" for s in final["stories"])


def test_jobs_and_epic_options(tmp_path: Path) -> None:
    root = project(tmp_path, 3, {})
    add_field(root, "S-0001", "epic: E-01")
    path = root / ".ai-sdlc" / "stories" / "S-0003" / "story.md"
    path.write_text(path.read_text().replace("labels: []", "labels: [epic-E-01]", 1))
    result = run_cli(root, "run", "--epic", "E-01", "--jobs", "2", "--json")
    assert result.returncode == 0, result.output
    state = only_run(root)
    assert [s["story_id"] for s in state["stories"]] == ["S-0001", "S-0003"]
    assert state["epic"] == "E-01"
    assert run_cli(root, "run", "S-0002", "--jobs", "2").returncode == 2
    assert run_cli(root, "run", "--auto", "--jobs", "0").returncode == 2
    none = run_cli(root, "run", "--epic", "E-09")
    assert none.returncode == 2 and "no story belongs to epic E-09" in none.stderr
    add_field(root, "S-0002", "dependencies: [nope]")
    bad = run_cli(root, "run", "S-0002")
    assert bad.returncode == 3 and "not a story id" in bad.stderr


def test_graph_and_conflict_rules() -> None:
    graph = G.build(
        [
            ("S-0001", {"dependencies": ["S-0002"]}),
            ("S-0002", {"dependencies": ["S-0003"], "labels": ["x", "epic-E-2"]}),
            ("S-0003", {"dependencies": ["S-0001"], "status": "done"}),
        ]
    )
    assert G.find_cycle(graph, ["S-0001"]) == ["S-0001", "S-0002", "S-0003", "S-0001"]
    assert graph.in_epic("E-2") == ["S-0002"]
    done = G.node_of("S-0009", {"status": "done"})
    assert G.is_met(done, "done") and not G.is_met(done, "pr")
    assert G.is_met(G.node_of("S-0009", {"status": "done", "pr_url": "u"}), "merged")
    chain = G.build([("S-0001", {"dependencies": ["S-0002"]}), ("S-0002", {})])
    assert G.order(chain, ["S-0001", "S-0002"]) == ["S-0002", "S-0001"]
    plan = "Change `src/app/login.py` and ./tests/test_login.py. See docs/ and e.g. v1.2."
    assert conflicts.planned_paths(plan) >= {"src/app/login.py", "tests/test_login.py"}
    assert conflicts.overlap({"a.py", "b/c.py"}, {"b/c.py", "d.py"}) == ["b/c.py"]


def test_a_batch_reads_its_own_stories_and_what_they_depend_on(tmp_path: Path) -> None:
    """`run --batch` builds its graph from the named stories and their dependencies, however
    deep, not from a listing of the whole backlog (20,000 stories cost a batch as much as one):
    the listing cache is not even written. A met dependency outside the batch lets its story
    run, an unmet one skips it, a missing one and a cycle outside the batch are refused."""
    deps = {"S-0002": ["S-0001"], "S-0003": ["S-0002"], "S-0004": ["S-0009"]}
    root = project(tmp_path, 4, deps)
    first = root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    first.write_text(first.read_text().replace("status: backlog", "status: done"))
    cache = root / ".ai-sdlc" / ".cache"
    if cache.exists():
        shutil.rmtree(cache)

    ran = run_cli(root, "run", "--batch", "S-0003", "S-0002", "--json")
    assert ran.returncode == 0, ran.output
    assert frontmatter(root, "S-0002")["status"] == frontmatter(root, "S-0003")["status"] == "done"
    assert not cache.exists()  # no listing: S-0004 and its missing dependency were never read
    assert run_cli(root, "run", "--auto").returncode == 3  # a listing would have refused it

    (tmp_path / "b").mkdir()
    other = project(tmp_path / "b", 3, {"S-0002": ["S-0001"], "S-0003": ["S-0009"]})
    skipped = run_cli(other, "run", "--batch", "S-0002", "--json")
    assert skipped.returncode == 1, skipped.output  # its story skipped: not a success
    state = story_states(only_run(other))
    assert state["S-0002"]["status"] == "skipped"
    assert state["S-0002"]["reason"] == "depends on S-0001, which is backlog and not in this run"
    refused = run_cli(other, "run", "--batch", "S-0003")
    assert refused.returncode == 3
    assert "S-0003 depends on S-0009, which does not exist" in refused.stderr

    (tmp_path / "c").mkdir()
    loop = project(tmp_path / "c", 3, {"S-0001": ["S-0002"], "S-0002": ["S-0003"]})
    add_field(loop, "S-0003", "dependencies: [S-0002]")
    cycle = run_cli(loop, "run", "--batch", "S-0001")
    assert cycle.returncode == 3, cycle.output
    assert "S-0002 → S-0003 → S-0002" in cycle.stderr
