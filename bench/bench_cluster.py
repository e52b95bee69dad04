"""Cluster runs: wall time of `run --auto --jobs N` on the local executor vs the Ray executor,
measured in the same run, and the coordination overhead per phase on Ray.

16 scripted stories in a real git project with a local bare repository as `origin`; every agent
call sleeps 1 s (injected provider latency: `delay: 1` in `.ai-sdlc/scripted.yaml`);
verification is `true`. The Ray run uses a local cluster this script starts
(`ray.init(num_cpus=2)`), reached through `--ray-address` like a remote one: every state change
travels to the coordinator and back, and every story's work through git (clone, push, fetch).

Printed: both wall times and their ratio (the peer: the local executor with the same --jobs),
and the coordination overhead, the time a story's worker waits on the coordinator (its
questions and every ledger operation, transport included) divided by the phases it ran.
Target: <= 50 ms per phase (PASS/FAIL). Split below it: the part the coordinator spent
applying the story's ledger operations (durable writes: a local worker does the same ones
itself), and the rest (transport, queueing, the scheduler's answers), which is what running
on a cluster adds. Run it on a quiet machine: both parts grow with the load average (printed).

    python bench/bench_cluster.py [--stories 16] [--delay 1] [--jobs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_parallel import bench_env
from bench_parallel import make_project as make_parallel_project

#: Coordination overhead per phase on the Ray executor, in seconds.
TARGET_OVERHEAD = 0.050
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_DISABLE_IMPORT_WARNING": "1",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
}


def make_project(home: Path, stories: int, delay: float) -> Path:
    """bench_parallel's project, with a bare `origin` next to it: workers clone it."""
    root = home / "proj"
    make_parallel_project(root, stories, delay, origin=home / "origin.git")
    return root


def timed_run(root: Path, env: dict[str, str], *args: str) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    argv = [sys.executable, "-m", "ai_sdlc", "--project", str(root), "run", "--auto", "--json"]
    done = subprocess.run(
        [*argv, *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return elapsed, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=16)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args()
    os.environ.update(RAY_ENV)
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {**bench_env(home), "AI_SDLC_RUN__RAY__CACHE_DIR": str(home / "clones")}
        local_root = make_project(home / "local", args.stories, args.delay)
        ray_root = make_project(home / "ray", args.stories, args.delay)
        info = ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            _temp_dir=str(home / "ray-tmp"),
        )
        try:
            address = str(info.address_info["gcs_address"])
            jobs = ("--jobs", str(args.jobs))
            local, _ = timed_run(local_root, env, *jobs, "--executor", "local")
            on_ray, events = timed_run(
                ray_root, env, *jobs, "--executor", "ray", "--ray-address", address
            )
        finally:
            ray.shutdown()
    reports = [e for e in events if e.get("event") == "coordination"]
    phases = sum(int(e["phases"]) for e in reports)
    waited = sum(float(e["seconds"]) for e in reports)
    ledger = sum(float(e.get("ledger_seconds") or 0.0) for e in reports)
    links = sorted({str(e.get("link")) for e in reports})
    asks = sum(int(e["asks"]) for e in reports)
    per_phase = waited / phases if phases else float("inf")
    kinds: dict[str, float] = {}
    for e in reports:
        for kind, seconds in dict(e.get("by_kind") or {}).items():
            kinds[kind] = kinds.get(kind, 0.0) + float(seconds)
    verdict = "PASS" if per_phase <= TARGET_OVERHEAD and len(reports) == args.stories else "FAIL"
    calls = args.stories * 5
    print(
        f"cluster runs: {args.stories} stories, {calls} agent calls of {args.delay:g} s each, "
        f"--jobs {args.jobs}"
    )
    print(f"  local executor:    {local:7.2f} s")
    print(f"  ray executor:      {on_ray:7.2f} s   (local Ray cluster, 2 CPUs, via --ray-address)")
    print(f"  ratio ray/local:   {on_ray / local:7.3f}")
    print(
        f"  coordination:      {per_phase * 1000:7.1f} ms per phase ({phases} phases, {asks} "
        f"round trips, {waited:.2f} s waited)  (target <= {TARGET_OVERHEAD * 1000:.0f} ms)  "
        f"{verdict}"
    )
    split = ", ".join(f"{k} {v / max(phases, 1) * 1000:.1f}" for k, v in sorted(kinds.items()))
    print(f"    by question (ms per phase): {split}")
    per = 1000 / max(phases, 1)
    print(
        f"    of which ledger writes {ledger * per:.1f} ms, transport and queueing "
        f"{(waited - ledger) * per:.1f} ms (links: {', '.join(links)}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
