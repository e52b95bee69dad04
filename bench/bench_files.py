"""Benchmark one story run beside 100 and beside 20,000 committed source files (issue 23).

What an attempt changed is asked of git (`git status`, `git diff` against the story's base),
whose cost follows the size of the change, not of the repository; the tool used to hash every
file of the worktree three times per story (4.2 s of a 5.4 s run beside 20,000 files). Target:
a story run beside 20,000 files (about 100 MB of source) costs at most 3x the run beside 100,
the remainder being the checkout of the story's worktree itself (`git worktree add`, timed here
and git's first look at the fresh tree, timed on their own for reference). Since issue 35 a
done story's worktree is parked and the next story's is that folder switched to its branch
(`git/pool`): the runs after the warm-up pay no whole checkout nor removal, so the "without
the checkout" ratio subtracts, for the new code, a cost it no longer has.

The project is a real git repository (no remote) whose source files are committed; the story
runs with the built-in `scripted` provider and a counting verification command, each `ai-sdlc`
call a real subprocess; figures are medians of N runs (wall time, and CPU of the process and
everything it waited for). `--compare REF` runs the same stories, in the same projects, with
the code of REF (`git archive REF src`, extracted into a temporary folder and put first on
`sys.path`): before and after a change in one run.

`--tmp DIR` puts the projects there (e.g. a tmpfs such as /dev/shm: on a shared machine a
100 MB checkout on disk can vary from 1 s to 35 s between runs, drowning what is measured).

    python bench/bench_files.py [--files 100 20000] [--repeat 3] [--compare REF] [--tmp DIR]
                                [--strict]
"""

from __future__ import annotations

import argparse
import io
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench_run import COUNTER, Timing, cli_env, entry_point, git, story_status, timed

RATIO_LIMIT = 3.0
#: One source file: about 5 KB (20,000 of them are about 100 MB).
SOURCE = "value = 'filler source text for the benchmark, about sixty chars'\n" * 80
#: Runs `ai-sdlc` from the source tree named by its first argument (older code, `--compare`).
FROM_SOURCE = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'ai-sdlc'; "
    "from ai_sdlc.cli.app import main; main()"
)
REPO = Path(__file__).resolve().parent.parent


def cli(project: Path, *args: str, source: Path | None = None) -> str:
    """`ai-sdlc <args>` in `project` with the code under `source` (None: this checkout's)."""
    argv = [*runner(source), "--project", str(project), *args]
    proc = subprocess.run(
        argv,
        env=cli_env(current=source is None),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ai-sdlc {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def make_project(
    root: Path, files: int, counter: Path, log: Path, setup: Path | None = None
) -> tuple[Path, Timing, Timing]:
    """A git project with `files` committed source files; (its folder, what a bare checkout of
    it costs: `git worktree add`, then git's first look at the fresh tree, which every story
    pays too: files written in the same second as the index are "racily clean", so the first
    `git status` after a checkout reads every one of them again, about 0.3 s for 100 MB; and
    what removing that checkout costs, as a done story's worktree is removed)."""
    project = root / "proj"
    project.mkdir()
    for n in range(files):
        folder = project / "src" / f"pkg{n // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{n:05d}.py").write_text(f"# module {n}\n{SOURCE}")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "sources")
    cli(project, "init", source=setup)  # the oldest code compared: each reads the other's
    for step in ("build", "test"):
        command = shlex.join([sys.executable, str(counter), step, str(log)])
        cli(project, "config", f"verify.{step}", command, source=setup)
    runs: list[Timing] = []
    removals: list[Timing] = []
    for _ in range(2):
        add = ["git", "-C", str(project), "worktree", "add", "-q", "--detach", "../checkout"]
        look = ["git", "-C", str(root / "checkout"), "status", "--porcelain"]
        (added, _, _), (looked, _, _) = timed(add), timed(look)
        runs.append(Timing(added.cpu + looked.cpu, added.wall + looked.wall))
        remove = ["git", "-C", str(project), "worktree", "remove", "--force", "../checkout"]
        removals.append(timed(remove)[0])
    return project, runs[-1], removals[-1]


def runner(source: Path | None) -> list[str]:
    """The `ai-sdlc` command line: this checkout's, or the one of the code under `source`."""
    return entry_point() if source is None else [sys.executable, "-c", FROM_SOURCE, str(source)]


def run_story(project: Path, log: Path, title: str, source: Path | None) -> Timing:
    sid = cli(project, "add", title, source=source).strip()
    log.write_text("")
    argv = [*runner(source), "--project", str(project), "run", sid]
    timing, code, stderr = timed(argv, env=cli_env(current=source is None))
    if code != 0 or story_status(project, sid) != "done":
        raise SystemExit(f"run {sid} did not finish (exit {code}):\n{stderr}")
    return timing


def median(runs: list[Timing]) -> Timing:
    return Timing(statistics.median(t.cpu for t in runs), statistics.median(t.wall for t in runs))


def old_source(ref: str, into: Path) -> Path:
    """`src/` of `ref` (a commit of this repository) extracted under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, "src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def bench(
    files: int,
    repeat: int,
    counter: Path,
    sources: dict[str, Path | None],
    where: str | None = None,
) -> tuple[dict[str, Timing], Timing]:
    """Story runs beside `files` source files, once per code version in `sources`; and what a
    bare checkout of the project and its removal cost together."""
    results: dict[str, Timing] = {}
    with tempfile.TemporaryDirectory(prefix=f"bench-files-{files}-", dir=where) as tmp:
        root = Path(tmp)
        log = root / "verify.log"
        started = time.perf_counter()
        oldest = [source for source in sources.values() if source is not None]
        project, checkout, removal = make_project(
            root, files, counter, log, oldest[0] if oldest else None
        )
        setup = time.perf_counter() - started
        print(f"\n{files} committed source files (set up in {setup:.1f} s; median of {repeat})")
        print(
            f"  checkout alone            cpu {checkout.cpu:6.3f} s   wall {checkout.wall:6.3f} s"
            "   (`worktree add` + git's first `status` of it)"
        )
        print(
            f"  its removal               cpu {removal.cpu:6.3f} s   wall {removal.wall:6.3f} s"
            "   (`worktree remove --force`: a done story's worktree goes)"
        )
        for label, source in sources.items():
            run_story(project, log, f"Warm-up {label}", source)
            runs = [run_story(project, log, f"Story {label} {i}", source) for i in range(repeat)]
            results[label] = median(runs)
            t = results[label]
            print(f"  story run ({label:>6})  cpu {t.cpu:6.3f} s   wall {t.wall:6.3f} s")
    return results, Timing(checkout.cpu + removal.cpu, checkout.wall + removal.wall)


def report(sizes: list[int], repeat: int, compare: str | None, where: str | None = None) -> bool:
    """Run the benchmark and print it; True when the target is met."""
    small, large = sizes
    with tempfile.TemporaryDirectory(prefix="bench-files-code-") as tmp:
        counter = Path(tmp) / "count_verify.py"
        counter.write_text(COUNTER)
        sources: dict[str, Path | None] = {"now": None}
        if compare:
            sources[compare[:6]] = old_source(compare, Path(tmp) / "old")
        few, few_checkout = bench(small, repeat, counter, sources, where)
        many, many_checkout = bench(large, repeat, counter, sources, where)
    ok = True
    print()
    for label in sources:
        ratio = many[label].wall / few[label].wall
        cpu_ratio = many[label].cpu / few[label].cpu
        # The run minus a bare checkout of its project and its removal: what the tool adds.
        beyond = (many[label].cpu - many_checkout.cpu) / (few[label].cpu - few_checkout.cpu)
        verdict = ""
        if label == "now":  # CPU: on a shared machine wall time measures the neighbours
            ok = cpu_ratio <= RATIO_LIMIT
            verdict = f"  target cpu <= {RATIO_LIMIT:g}x  {'PASS' if ok else 'FAIL'}"
        print(
            f"ratio {large}/{small} files ({label:>6}): cpu {cpu_ratio:.2f}x  wall {ratio:.2f}x"
            f"  (cpu without the checkout and its removal {beyond:.2f}x){verdict}"
        )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs=2, default=[100, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", help="also run the code of this commit (e.g. main)")
    parser.add_argument("--tmp", help="folder for the projects (default: the system's temp)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    ok = report(args.files, args.repeat, args.compare, args.tmp)
    if args.strict and not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
