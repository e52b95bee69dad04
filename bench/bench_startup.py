"""Benchmark the start-up cost of `ai-sdlc --version` against a bare `python -c pass`.

Target (from issue 10): the CPU time of `ai-sdlc --version` at most 4x that of `python -c pass`
started from the same interpreter in the same run (the floor: what any Python CLI pays before
running a line of its own). `--version` must import neither typer nor rich nor any command
module; `--help` may import typer but no command module — both are checked here too, from the
interpreter's own `-X importtime` report.

Each figure is the median of N runs of a real subprocess; CPU is user + system time of the child
(from `os.wait4`), wall is the time from start to exit.

    python bench/bench_startup.py [--repeat 21] [--strict]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ai_sdlc.cli.app import COMMAND_MODULES

LIMIT = 4.0


def entry_point() -> list[str]:
    """The installed console script, or `python -m ai_sdlc` when there is none."""
    script = Path(sys.executable).with_name("ai-sdlc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ai_sdlc"]


def measure(argv: list[str]) -> tuple[float, float]:
    """(cpu seconds, wall seconds) of one run of `argv` with its output discarded."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def median_of(argv: list[str], repeat: int) -> tuple[float, float]:
    runs = [measure(argv) for _ in range(repeat)]
    return statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs)


def imported(args: list[str]) -> set[str]:
    """Modules `python -m ai_sdlc <args>` imports, from `-X importtime`."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ai_sdlc", *args],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    floor_argv = [sys.executable, "-c", "pass"]
    version_argv = [*entry_point(), "--version"]
    help_argv = [*entry_point(), "--help"]
    # One warm-up run each (page cache, .pyc files), then the median of N each.
    for argv in (floor_argv, version_argv, help_argv):
        measure(argv)
    floor_cpu, floor_wall = median_of(floor_argv, args.repeat)
    version_cpu, version_wall = median_of(version_argv, args.repeat)
    help_cpu, help_wall = median_of(help_argv, args.repeat)
    ratio = version_cpu / floor_cpu if floor_cpu > 0 else float("inf")
    ok = ratio <= LIMIT

    print(f"start-up, median of {args.repeat} runs (CPU = user + sys of the process)")
    print(
        f"  python -c pass          cpu {floor_cpu * 1000:7.1f} ms  wall "
        f"{floor_wall * 1000:7.1f} ms"
    )
    print(
        f"  ai-sdlc --version       cpu {version_cpu * 1000:7.1f} ms  wall "
        f"{version_wall * 1000:7.1f} ms  {ratio:5.2f}x  target <= {LIMIT:g}x  "
        + ("PASS" if ok else "FAIL")
    )
    print(
        f"  ai-sdlc --help          cpu {help_cpu * 1000:7.1f} ms  wall {help_wall * 1000:7.1f} ms"
        f"  {help_cpu / floor_cpu:5.2f}x  (no target; must import no command module)"
    )

    commands = {f"ai_sdlc.cli.{name}" for name in COMMAND_MODULES}
    version_mods = imported(["--version"])
    help_mods = imported(["--help"])
    heavy = sorted(m for m in version_mods if m.split(".")[0] in ("typer", "rich", "click"))
    checks = {
        "--version imports no command module": not (version_mods & commands),
        "--version imports neither typer nor rich": not heavy,
        "--help imports no command module": not (help_mods & commands),
    }
    for label, passed in checks.items():
        print(f"  {label:45s} {'PASS' if passed else 'FAIL'}")
    all_ok = ok and all(checks.values())
    print("\nStart-up target:", "PASS" if all_ok else "FAIL")
    if args.strict and not all_ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
