"""Parallel runs: wall time of `run --auto --jobs 4` vs `--jobs 1`, measured in the same run.

20 scripted stories in a real git project (a worktree per story); every agent call sleeps 1 s
(injected provider latency: `delay: 1` in `.ai-sdlc/scripted.yaml`), verification is `true`.
Most of an agent's time is waiting on a model, so 4 workers should take at most 0.3x the time of
one (the ideal is 0.25x). Prints both wall times and the ratio with PASS/FAIL.

    python bench/bench_parallel.py [--stories 20] [--delay 1] [--jobs 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.3


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_project(root: Path, stories: int, delay: float, *, origin: Path | None = None) -> None:
    """A git project with `stories` scripted stories whose agent calls take `delay` seconds (and,
    with `origin`, a bare repository there as its `origin`)."""
    from ai_sdlc.store import StoryStore

    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# bench\n")
    store = StoryStore(root)
    store.init()
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    if origin is not None:
        git(root, "init", "-q", "--bare", str(origin))
        git(root, "remote", "add", "origin", str(origin))
        git(root, "push", "-q", "-u", "origin", "main")
    for n in range(stories):
        store.add(f"Bench story {n + 1}")
    (root / ".ai-sdlc" / "config.yaml").write_text(
        "verify:\n  test: 'true'\nrun:\n  stop_conditions:\n    max_total_attempts: 10000\n"
    )
    (root / ".ai-sdlc" / "scripted.yaml").write_text(f"delay: {delay}\nrules: []\n")


def bench_env(home: Path) -> dict[str, str]:
    """The `ai-sdlc` processes' environment: the scripted provider, and a git identity of our own
    in `home` (also for this process's own git calls), never the user's config."""
    gitconfig = home / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n")
    os.environ.update(GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    env.update(AI_SDLC_PROVIDER="scripted", NO_COLOR="1")
    return env


def timed_run(root: Path, jobs: int, env: dict[str, str]) -> float:
    started = time.perf_counter()
    argv = [sys.executable, "-m", "ai_sdlc", "--project", str(root), "run", "--auto"]
    done = subprocess.run(
        [*argv, "--jobs", str(jobs)],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"--jobs {jobs} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=20)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = bench_env(home)
        serial, parallel = home / "serial", home / "parallel"
        make_project(serial, args.stories, args.delay)
        make_project(parallel, args.stories, args.delay)
        one = timed_run(serial, 1, env)
        many = timed_run(parallel, args.jobs, env)
    ratio = many / one
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    calls = args.stories * 5
    print(f"parallel runs: {args.stories} stories, {calls} agent calls of {args.delay:g} s each")
    print(f"  --jobs 1:          {one:7.2f} s")
    print(f"  --jobs {args.jobs}:          {many:7.2f} s")
    print(f"  ratio jobs {args.jobs}/1:   {ratio:7.3f}  (target <= {TARGET})  {verdict}")


if __name__ == "__main__":
    main()
