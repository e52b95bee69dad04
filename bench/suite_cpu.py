"""CPU per test and per test file of the suite: a pytest plugin and its summary.

`make test-cpu` runs the whole suite with this plugin loaded (`-p bench.suite_cpu`) and prints
the files by CPU. Each test's CPU is user + system time of the test process and of every child
it waited for (`RUSAGE_CHILDREN`), over setup, call and teardown; a fixture shared by several
tests counts in the first of them. Wall time is summed too: under `-n auto` the workers share
the cores, so only CPU compares across runs on a busy machine (docs/testing.md, "Where the
time goes"). Each xdist worker appends its tests to `<folder>/<worker>.jsonl`.

    python bench/suite_cpu.py FOLDER [TOP]   # the summary of a finished run
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: The folder each worker writes into (the plugin does nothing without it).
FOLDER_VAR = "SUITE_CPU_FOLDER"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    del nextitem
    folder = os.environ.get(FOLDER_VAR)
    cpu, wall = _cpu(), time.perf_counter()
    yield
    if not folder:
        return
    record = {"id": item.nodeid, "cpu": _cpu() - cpu, "wall": time.perf_counter() - wall}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(folder) / f"{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def per_file(folder: Path) -> dict[str, dict[str, float]]:
    """file -> {"cpu", "wall", "tests"} summed over the records in `folder`."""
    files: dict[str, dict[str, float]] = {}
    for log in sorted(folder.glob("*.jsonl")):
        for line in log.read_text(encoding="utf-8").splitlines():
            record: dict[str, Any] = json.loads(line)
            entry = files.setdefault(
                record["id"].split("::")[0], dict.fromkeys(("cpu", "wall", "tests"), 0.0)
            )
            entry["cpu"] += record["cpu"]
            entry["wall"] += record["wall"]
            entry["tests"] += 1
    return files


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).is_dir():
        print("usage: python bench/suite_cpu.py FOLDER [TOP]", file=sys.stderr)
        return 2
    top = int(argv[1]) if len(argv) > 1 else 30
    files = per_file(Path(argv[0]))
    total = sum(entry["cpu"] for entry in files.values())
    tests = sum(int(entry["tests"]) for entry in files.values())
    print(f"{tests} tests, {total:.0f} s of CPU in tests (collection and start-up not included)")
    print(f"{'CPU s':>8} {'share':>6} {'wall s':>8} {'tests':>6}  file")
    ranked = sorted(files.items(), key=lambda kv: -kv[1]["cpu"])
    for name, entry in ranked[:top]:
        share = entry["cpu"] / total if total else 0.0
        cpu, wall, tests = entry["cpu"], entry["wall"], int(entry["tests"])
        print(f"{cpu:8.1f} {share:6.1%} {wall:8.1f} {tests:6d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
