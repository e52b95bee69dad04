"""Before/after figures for issue 24's removal of the start-up tricks (the line scanner, the
hand-parsed `run` line, the state owner's write cache), measured in the same run.

The old code is an earlier commit's `src/` (`git archive REF`) unpacked in a temp folder; both
versions run as `python -m ai_sdlc` from this interpreter and its installed packages, the old
one with PYTHONPATH on its unpacked `src/`, the new one on this checkout's `src/` (uncommitted
changes included). Measured, interleaved old/new so machine load hits both alike:

- `ai-sdlc --version`;
- `ai-sdlc status --json` on a project of N stories (default 5,000, the TypeScript tool's
  style), warm (listing cache present: the usual case) and cold (cache removed before each run);
- one scripted `ai-sdlc run <story>` (backlog -> done, offline provider, a real git project,
  passing verification commands), a fresh story each time.

Bounds (issue 24): at most 60 ms more CPU per command, and at most 10% more on `status --json`
(whose cost grows with the backlog).
CPU is user + system of the process and the children it waited for (`os.wait4`); each figure
is the median of --repeat runs (a run: --repeat // 2 + 1).

    python bench/bench_simplify.py [--compare REF] [--stories 5000] [--repeat 9] [--strict]

REF defaults to the parent of the commit that deleted `src/ai_sdlc/cli/fastrun.py`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
# sibling scripts: bench_run's git project, bench_status's stories
import bench_run
import bench_status

REPO = Path(__file__).resolve().parents[1]
LIMIT_MS = 60.0
STATUS_LIMIT = 0.10


@dataclass(frozen=True)
class Version:
    name: str
    src: Path

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "ai_sdlc", *args]

    def env(self) -> dict[str, str]:
        return {**bench_run.cli_env(), "PYTHONPATH": str(self.src)}


def default_ref() -> str:
    gone = subprocess.run(
        ["git", "log", "-1", "--diff-filter=D", "--format=%H", "--", "src/ai_sdlc/cli/fastrun.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not gone:
        raise SystemExit("fastrun.py was never deleted here: give the old commit with --compare")
    return f"{gone}^"


def unpack(ref: str, into: Path) -> Path:
    """`src/` of `ref`, as git holds it, under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "src"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def measure(version: Version, argv: list[str], check: Callable[[str], None] | None = None) -> float:
    """CPU seconds of one run of `argv` (it must exit 0)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv, env=version.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        if code != 0:
            tail = err.read().decode("utf-8", "replace")[-800:]
            raise SystemExit(f"{version.name}: {' '.join(argv[3:])} exited {code}\n{tail}")
    if check is not None:
        check(stdout)
    return usage.ru_utime + usage.ru_stime


def check_source(version: Version) -> None:
    """The child really imports this version's code (not the installed one)."""
    probe = "import ai_sdlc, sys; sys.stdout.write(ai_sdlc.__file__)"
    got = subprocess.run(
        [sys.executable, "-c", probe], env=version.env(), capture_output=True, text=True
    ).stdout
    if not got.startswith(str(version.src)):
        raise SystemExit(f"{version.name}: imports {got}, not {version.src}")


def add_story(version: Version, project: Path, title: str) -> str:
    proc = subprocess.run(
        version.argv("--project", str(project), "add", title),
        env=version.env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{version.name}: add failed: {proc.stderr}")
    return proc.stdout.strip()


def run_project(root: Path) -> Path:
    """A git project with an origin and passing verification commands (a Python script that
    does nothing: the sandbox lets verification write only inside the worktree), no stories."""
    root.mkdir()
    command = root / "verify.py"
    command.write_text("")
    return bench_run.make_project(root, 0, command, root / "unused.log")


def interleaved(
    versions: list[Version], repeat: int, one: Callable[[Version], float]
) -> dict[str, float]:
    """Median CPU per version, the versions taking turns."""
    runs: dict[str, list[float]] = {v.name: [] for v in versions}
    for _ in range(repeat):
        for version in versions:
            runs[version.name].append(one(version))
    return {name: statistics.median(values) for name, values in runs.items()}


def row(label: str, old: float, new: float, *, limit_ms: float = 0, share: float = 0) -> bool:
    """One line of the table; True when within its bound (`limit_ms` more, or `share` more)."""
    delta = (new - old) * 1000
    pct = (new - old) / old * 100 if old else 0.0
    ok = delta <= limit_ms if limit_ms else pct <= share * 100
    bound = f"<= +{limit_ms:.0f} ms" if limit_ms else f"<= +{share:.0%}"
    print(
        f"  {label:<26} {old * 1000:8.1f} ms {new * 1000:8.1f} ms {delta:+8.1f} ms "
        f"{pct:+6.1f}%   {bound:<18} {'ok' if ok else 'OVER'}"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", default=None, help="the old commit (default: see above)")
    parser.add_argument("--stories", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a bound is exceeded")
    options = parser.parse_args()
    ref = options.compare or default_ref()
    repeat = options.repeat
    with tempfile.TemporaryDirectory(prefix="bench-simplify-") as tmp:
        scratch = Path(tmp)
        old = Version("before", unpack(ref, scratch / "old"))
        new = Version("after", REPO / "src")
        versions = [old, new]
        for version in versions:
            check_source(version)
        print(f"before: {ref} ({old.src}); after: {new.src}")
        import typer

        print(f"python {sys.version.split()[0]}, typer {typer.__version__}; CPU medians")

        # --version
        for version in versions:
            measure(version, version.argv("--version"))  # bytecode compiled, page cache warm
        version_cpu = interleaved(versions, repeat, lambda v: measure(v, v.argv("--version")))

        # status --json at N stories (a copy per version: each writes its own listing cache)
        started = time.perf_counter()
        template = scratch / "listing"
        bench_status.generate(template, options.stories)
        listing = {}
        for version in versions:
            listing[version.name] = scratch / f"listing-{version.name}"
            shutil.copytree(template, listing[version.name], symlinks=True)
        check = bench_status.expect_stories(options.stories)

        def status(version: Version, *, cold: bool) -> float:
            root = listing[version.name]
            if cold:
                shutil.rmtree(root / ".ai-sdlc" / ".cache", ignore_errors=True)
            return measure(version, version.argv("--project", str(root), "status", "--json"), check)

        for version in versions:
            status(version, cold=False)  # builds the listing cache
        warm = interleaved(versions, repeat, lambda v: status(v, cold=False))
        cold = interleaved(versions, repeat // 2 + 1, lambda v: status(v, cold=True))
        for version in versions:
            status(version, cold=False)
        took = time.perf_counter() - started
        print(f"  ({options.stories} stories generated and listed in {took:.0f} s)")

        # one scripted run, a fresh story each time (a project per version)
        template = run_project(scratch / "run-template")
        projects = {}
        for version in versions:
            copy = scratch / f"run-{version.name}"
            shutil.copytree(template.parent, copy, symlinks=True)
            projects[version.name] = copy / "proj"
            # the copy's origin is still the template's: point it at the copy's own
            bench_run.git(copy / "proj", "remote", "set-url", "origin", str(copy / "origin.git"))

        def one_run(version: Version) -> float:
            project = projects[version.name]
            sid = add_story(version, project, "Greet the user")
            return measure(version, version.argv("--project", str(project), "run", sid))

        for version in versions:
            one_run(version)
        runs = interleaved(versions, repeat // 2 + 1, one_run)

        print(f"\n  {'command':<26} {'before':>11} {'after':>11} {'change':>11} {'':>7}   bound")
        n = options.stories
        ok = [
            row("--version", version_cpu["before"], version_cpu["after"], limit_ms=LIMIT_MS),
            row(f"status --json ({n}, warm)", warm["before"], warm["after"], share=STATUS_LIMIT),
            row(f"status --json ({n}, cold)", cold["before"], cold["after"], share=STATUS_LIMIT),
            row("run <story> (scripted)", runs["before"], runs["after"], limit_ms=LIMIT_MS),
        ]
    if options.strict and not all(ok):
        sys.exit(1)


if __name__ == "__main__":
    main()
