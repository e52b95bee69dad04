"""Benchmark one story run (backlog → done) with 1,000 and with 20,000 other stories.

Targets (issue 10), with the built-in offline `scripted` provider:
- a run costs the same however many other stories the project holds: CPU time with 20,000
  other stories at most 1.2x the time with 1,000;
- the tool's own overhead per story (the run's time minus its verification commands' time)
  at most 0.2 s;
- the verification commands run exactly once per implementation attempt (counted, not timed).

The project is a real git repository (a source file committed, a local bare repository as
`origin`); the other stories are written straight into `.ai-sdlc/stories/` and committed, as a
team that keeps its backlog in git has it (issue 26: each story's worktree leaves `.ai-sdlc/` out,
so its checkout does not grow with the backlog; `--untracked` leaves them uncommitted instead).
`verify.build` and `verify.test` are a counting command: a tiny script, run by this
interpreter, that appends its step name to a file and exits 0. The commands' own
cost is measured by running that same command bare, the same number of times, in the same run.
Every `ai-sdlc` call is a real subprocess (this is a benchmark, not a test); CPU is user + system
time of the process and everything it waited for (`os.wait4`), figures are medians of N runs.

`--compare REF` also runs the story with the code of REF (`git archive REF src`, as
`bench_files.py` does), in the same projects, interleaved: before and after a change in one run.

Then (issue 23, `bench_files.py`) one story run beside 100 and beside 20,000 committed source
files: what an attempt changed is asked of git, so the run beside 20,000 files costs at most 3x
the run beside 100 (the remainder being the worktree's checkout); `--compare REF` runs the code
of REF in the same projects too (before and after a change, in one run).

    python bench/bench_run.py [--sizes 1000 20000] [--repeat 3] [--files 100 20000]
                              [--compare REF] [--tmp DIR] [--skip-stories] [--skip-files]
                              [--untracked]
                              [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RATIO_LIMIT = 1.2
OVERHEAD_LIMIT = 0.2  # seconds per story
RUNS_PER_ATTEMPT = 1
BATCH = 5  # stories in the reference `run --batch`

#: Runs `ai-sdlc` exactly as its console script does (`ai_sdlc.cli.app:main`), then writes the
#: CPU of this process and of the processes it waited for (git, the verification commands) to
#: the file named by BENCH_RUSAGE_OUT: the breakdown of where a story run's time goes.
SPLIT_RUNNER = """import json, os, resource, sys
out = os.environ.pop("BENCH_RUSAGE_OUT")
sys.argv = ["ai-sdlc", *sys.argv[1:]]
code = 0
try:
    from ai_sdlc.cli.app import main
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
finally:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = {"own": own.ru_utime + own.ru_stime, "children": kids.ru_utime + kids.ru_stime}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(figures, f)
sys.exit(code)
"""

COUNTER = """import sys
with open(sys.argv[2], "a", encoding="utf-8") as log:
    log.write(sys.argv[1] + "\\n")
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass(frozen=True)
class Timing:
    cpu: float
    wall: float


@dataclass(frozen=True)
class StoryRun:
    timing: Timing
    executions: int  # verification runs (one per `build` line the counter wrote)
    steps: int  # counting-command processes (build + test lines)
    attempts: int  # implementation attempts (phase_started events for `implement`)


def entry_point() -> list[str]:
    script = Path(sys.executable).with_name("ai-sdlc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ai_sdlc"]


def cli_env(*, current: bool = True) -> dict[str, str]:
    """The environment of an `ai-sdlc` call. `current`: this checkout's code, whose sandbox
    lets the counting command write its log in the temp folder (older code knows no sandbox
    and refuses the setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed tool has its bytecode compiled
    env.update(GIT_ENV)
    env.update({"AI_SDLC_PROVIDER": "scripted", "NO_COLOR": "1"})
    if current:
        env["AI_SDLC_SANDBOX__WRITABLE"] = json.dumps([tempfile.gettempdir()])
    return env


def timed(
    argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[Timing, int, str]:
    """Run `argv` to completion: its timing (CPU of it and its waited-for children), exit code
    and stderr."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env if env is not None else cli_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return Timing(usage.ru_utime + usage.ru_stime, wall), proc.returncode, text


def cli(project: Path, *args: str) -> str:
    proc = subprocess.run(
        [*entry_point(), "--project", str(project), *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ai-sdlc {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env=cli_env(), check=True, capture_output=True, timeout=120
    )


def make_project(
    root: Path,
    others: int,
    counter: Path,
    log: Path,
    *,
    committed: bool = True,
    setup: Path | None = None,
) -> Path:
    """The project beside `others` backlog stories, committed (`committed`) or left untracked;
    `setup`: the source tree of the oldest code compared, which initialises it (each version
    reads the other's files)."""
    import bench_files  # it imports this module's helpers

    project = root / "proj"
    project.mkdir()
    (project / "app.py").write_text("def answer() -> int:\n    return 42\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "initial")
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", str(origin))
    git(project, "remote", "add", "origin", str(origin))
    git(project, "push", "-q", "origin", "main")
    bench_files.cli(project, "init", source=setup)
    for step in ("build", "test"):
        command = shlex.join([sys.executable, str(counter), step, str(log)])
        bench_files.cli(project, "config", f"verify.{step}", command, source=setup)
    write_other_stories(project, others)
    if committed:
        git(project, "add", "-A")
        git(project, "commit", "-q", "-m", f"backlog: {others} stories")
        git(project, "push", "-q", "origin", "main")
    return project


def write_other_stories(project: Path, count: int) -> None:
    """`count` backlog stories written directly (the store's format), S-10000 upwards."""
    stories = project / ".ai-sdlc" / "stories"
    for n in range(10_000, 10_000 + count):
        sid = f"S-{n:04d}"
        folder = stories / sid
        folder.mkdir(parents=True)
        (folder / "story.md").write_text(
            f"---\nid: {sid}\ntitle: Other story {n}\nslug: other-story-{n}\npriority: 50\n"
            "status: backlog\ntype: feature\ncreated: '2026-01-05'\nupdated: '2026-01-05'\n"
            "labels: []\nresearch_complete: false\nplan_complete: false\n"
            "implementation_complete: false\nreviews_complete: false\n---\n"
            f"# Other story {n}\n\nSomething else to do later.\n"
        )


def implement_attempts(project: Path, sid: str) -> int:
    path = project / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    if not path.exists():
        return 0
    attempts = 0
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("action") == "phase_started" and event.get("phase") == "implement":
            attempts += 1
    return attempts


def story_status(project: Path, sid: str) -> str:
    text = (project / ".ai-sdlc" / "stories" / sid / "story.md").read_text()
    for line in text.splitlines():
        if line.startswith("status:"):
            return line.split(":", 1)[1].strip()
    return "?"


def run_one(project: Path, log: Path, title: str) -> StoryRun:
    sid = cli(project, "add", title).strip()
    log.write_text("")
    timing, code, stderr = timed([*entry_point(), "--project", str(project), "run", sid])
    if code != 0 or story_status(project, sid) != "done":
        raise SystemExit(f"run {sid} did not finish (exit {code}):\n{stderr}")
    lines = log.read_text().splitlines()
    return StoryRun(timing, lines.count("build"), len(lines), implement_attempts(project, sid))


def run_batch(project: Path, log: Path, count: int) -> StoryRun:
    """`count` new stories in one `run --batch` process (start-up paid once)."""
    sids = [cli(project, "add", f"Batch story {i}").strip() for i in range(count)]
    log.write_text("")
    timing, code, stderr = timed(
        [*entry_point(), "--project", str(project), "run", "--batch", *sids]
    )
    if code != 0 or any(story_status(project, sid) != "done" for sid in sids):
        raise SystemExit(f"run --batch did not finish (exit {code}):\n{stderr}")
    lines = log.read_text().splitlines()
    attempts = sum(implement_attempts(project, sid) for sid in sids)
    return StoryRun(timing, lines.count("build"), len(lines), attempts)


#: What a story run imports before it does anything: the entry point, typer and the run command.
START_UP = "import ai_sdlc.cli.app, ai_sdlc.cli.run"


def start_up(repeat: int) -> Timing:
    """What the run command costs before it does anything: a fresh interpreter importing the
    entry point and the run command's modules."""
    argv = [sys.executable, "-c", START_UP]
    runs = [timed(argv)[0] for _ in range(repeat)]
    return Timing(statistics.median(t.cpu for t in runs), statistics.median(t.wall for t in runs))


def bare_command(counter: Path, log: Path, repeat: int) -> Timing:
    """Median cost of one counting-command process, run exactly as the runner runs it."""
    argv = [sys.executable, str(counter), "build", str(log)]
    runs = [timed(argv)[0] for _ in range(repeat)]
    return Timing(statistics.median(t.cpu for t in runs), statistics.median(t.wall for t in runs))


@dataclass(frozen=True)
class Split:
    """One story run's CPU by who spent it (medians)."""

    own: float  # the ai-sdlc process: interpreter start, imports, the run's own work
    children: float  # everything it waited for: git and the verification commands
    steps: int  # verification command processes among the children


def split_run(project: Path, log: Path, title: str, scratch: Path) -> Split:
    """One story run through SPLIT_RUNNER: our process's CPU apart from its children's."""
    sid = cli(project, "add", title).strip()
    log.write_text("")
    out = scratch / "rusage.json"
    argv = [sys.executable, "-c", SPLIT_RUNNER, "--project", str(project), "run", sid]
    env = {**cli_env(), "BENCH_RUSAGE_OUT": str(out)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or story_status(project, sid) != "done":
        raise SystemExit(f"run {sid} did not finish (exit {proc.returncode}):\n{proc.stderr}")
    figures = json.loads(out.read_text())
    return Split(figures["own"], figures["children"], len(log.read_text().splitlines()))


def interpreter(repeat: int) -> Timing:
    """A bare `python -c pass`: the floor any Python command pays."""
    runs = [timed([sys.executable, "-c", "pass"])[0] for _ in range(repeat)]
    return Timing(statistics.median(t.cpu for t in runs), statistics.median(t.wall for t in runs))


def print_split(
    splits: list[Split], startup: Timing, floor: Timing, bare: Timing, run_cpu: float
) -> None:
    own = statistics.median(s.own for s in splits)
    children = statistics.median(s.children for s in splits)
    steps = splits[-1].steps
    verify = steps * bare.cpu
    git = children - verify
    work = own - startup.cpu
    print("  where a story run's CPU goes (median; same runs through the console entry point):")
    print(f"    python -c pass (floor)                      {floor.cpu:6.3f} s")
    print(f"    start-up: importing the run command         {startup.cpu:6.3f} s")
    print(f"    the run's own work in our process           {work:6.3f} s")
    print(f"    git and other child processes               {git:6.3f} s")
    print(f"    verification commands ({steps} x bare command)   {verify:6.3f} s")
    print(f"    (our process {own:.3f} s + children {children:.3f} s; `run` alone {run_cpu:.3f} s)")


def bench(
    others: int,
    repeat: int,
    counter: Path,
    *,
    committed: bool = True,
    older: dict[str, Path] | None = None,
    where: str | None = None,
) -> tuple[Timing, StoryRun, Timing, float, dict[str, Timing]]:
    """Story runs in a project with `others` other stories: (median run, a sample run, the bare
    counting command, CPU per story of a `run --batch` without its command processes, and the
    median run of each older code version in `older`, run interleaved with this one's)."""
    import bench_files  # it imports this module's helpers

    older = older or {}
    with tempfile.TemporaryDirectory(prefix=f"bench-run-{others}-", dir=where) as tmp:
        root = Path(tmp)
        log = root / "verify.log"
        started = time.perf_counter()
        setup_code = next(iter(older.values()), None)
        project = make_project(root, others, counter, log, committed=committed, setup=setup_code)
        setup = time.perf_counter() - started
        run_one(project, log, "Warm-up story")  # caches, .pyc files, the first worktree
        for label, source in older.items():
            bench_files.run_story(project, log, f"Warm-up {label}", source)
        runs: list[StoryRun] = []
        old_runs: dict[str, list[Timing]] = {label: [] for label in older}
        for i in range(repeat):  # interleaved: machine load hits every version alike
            runs.append(run_one(project, log, f"Measured story {i}"))
            for label, source in older.items():
                title = f"Measured {label} {i}"
                old_runs[label].append(bench_files.run_story(project, log, title, source))
        batch = run_batch(project, log, BATCH)
        splits = [split_run(project, log, f"Split story {i}", root) for i in range(repeat)]
        startup = start_up(max(3, repeat))
        bare = bare_command(counter, root / "bare.log", max(5, repeat))
        floor = interpreter(max(5, repeat))
    cpu = statistics.median(r.timing.cpu for r in runs)
    wall = statistics.median(r.timing.wall for r in runs)
    sample = runs[-1]
    kept = "committed" if committed else "untracked"
    print(f"\n{others} other stories, {kept} (set up in {setup:.1f} s; median of {repeat} runs)")
    print(f"  story run            cpu {cpu:6.3f} s   wall {wall:6.3f} s")
    old_medians = {label: bench_files.median(t) for label, t in old_runs.items()}
    for label, t in old_medians.items():
        print(f"  story run ({label:>6})  cpu {t.cpu:6.3f} s   wall {t.wall:6.3f} s")
    per_run = [(r.executions, r.steps, r.attempts) for r in runs]
    print(f"  (verification runs, command processes, implement attempts) per run: {per_run}")
    batch_cpu = (batch.timing.cpu - batch.steps * bare.cpu) / BATCH
    print(
        f"  for reference: start-up alone cpu {startup.cpu:6.3f} s; "
        f"`run --batch` of {BATCH} stories: cpu {batch_cpu:.3f} s per story without its "
        f"{batch.steps} command processes"
    )
    print_split(splits, startup, floor, bare, cpu)
    return Timing(cpu, wall), sample, bare, batch_cpu, old_medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1000, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--files", type=int, nargs=2, default=[100, 20000])
    parser.add_argument("--compare", help="also run the benchmarks with this commit's code")
    parser.add_argument("--skip-stories", action="store_true", help="only the files benchmark")
    parser.add_argument("--skip-files", action="store_true", help="only the stories benchmark")
    parser.add_argument(
        "--untracked", action="store_true", help="leave the backlog uncommitted (as before)"
    )
    parser.add_argument("--tmp", help="folder for the benchmarks' projects (e.g. /dev/shm)")
    args = parser.parse_args()
    if shutil.which("git") is None:
        raise SystemExit("bench_run needs git")
    import bench_files  # it imports this module's helpers

    files_ok = True
    if not args.skip_files:
        files_ok = bench_files.report(args.files, args.repeat, args.compare, args.tmp)
    if args.skip_stories:
        print("\nFiles target:", "PASS" if files_ok else "FAIL")
        if args.strict and not files_ok:
            sys.exit(1)
        return
    small, large = args.sizes
    committed = not args.untracked
    with tempfile.TemporaryDirectory(prefix="bench-run-counter-") as tmp:
        counter = Path(tmp) / "count_verify.py"
        counter.write_text(COUNTER)
        older: dict[str, Path] = {}
        if args.compare:
            older[args.compare[:6]] = bench_files.old_source(args.compare, Path(tmp) / "old")
        small_t, small_run, bare, small_batch, small_old = bench(
            small, args.repeat, counter, committed=committed, older=older, where=args.tmp
        )
        large_t, large_run, _, large_batch, large_old = bench(
            large, args.repeat, counter, committed=committed, older=older, where=args.tmp
        )

    verdicts: list[bool] = []

    def verdict(ok: bool) -> str:
        verdicts.append(ok)
        return "PASS" if ok else "FAIL"

    cpu_ratio = large_t.cpu / small_t.cpu
    wall_ratio = large_t.wall / small_t.wall
    print(f"\nbare counting command: cpu {bare.cpu * 1000:.1f} ms, wall {bare.wall * 1000:.1f} ms")
    print(
        f"ratio {large}/{small}: cpu {cpu_ratio:.2f}x  target <= {RATIO_LIMIT:g}x  "
        f"{verdict(cpu_ratio <= RATIO_LIMIT)}   (wall {wall_ratio:.2f}x)"
    )
    for label in older:
        old_small, old_large = small_old[label], large_old[label]
        print(
            f"ratio {large}/{small} with the code of {label}: cpu "
            f"{old_large.cpu / old_small.cpu:.2f}x  (wall {old_large.wall / old_small.wall:.2f}x;"
            f" runs cpu {old_small.cpu:.3f} s / {old_large.cpu:.3f} s)"
        )
    print(
        f"for reference: `run --batch` CPU per story {large}/{small}: "
        f"{large_batch / small_batch:.2f}x (a batch reads its own stories, not the backlog)"
    )
    for size, timing, run in ((small, small_t, small_run), (large, large_t, large_run)):
        cpu_over = timing.cpu - run.steps * bare.cpu
        wall_over = timing.wall - run.steps * bare.wall
        print(
            f"tool overhead per story at {size}: wall {wall_over:.3f} s, cpu {cpu_over:.3f} s "
            f"(run minus {run.steps} x bare command)  target <= {OVERHEAD_LIMIT:g} s  "
            f"{verdict(max(wall_over, cpu_over) <= OVERHEAD_LIMIT)}"
        )
    for size, run in ((small, small_run), (large, large_run)):
        per_attempt = run.executions / run.attempts if run.attempts else float("nan")
        print(
            f"verification runs per implementation attempt at {size}: {run.executions} runs / "
            f"{run.attempts} attempts = {per_attempt:.2f}  target = {RUNS_PER_ATTEMPT}  "
            f"{verdict(run.attempts > 0 and run.executions == RUNS_PER_ATTEMPT * run.attempts)}"
        )
    verdicts.append(files_ok)
    print("\nStory-run targets:", "PASS" if all(verdicts) else "FAIL")
    if args.strict and not all(verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
