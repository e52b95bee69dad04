"""`make mutants`' report: mutmut's results per module and per group, the score, every survivor.

mutmut prints one line per mutant (`    ai_sdlc.store.ids.x_next_id__mutmut_3: survived`); this
groups them by module and by the four groups issue 24 names (state owner, store, resilience,
stop conditions). Caught = killed by a test (a timeout or a crash of the mutated code counts) or
rejected by strict mypy (`type_check_command`: such a mutant cannot pass `make verify`). The
score is caught / checked: `no tests` and survivors count against it, equivalent ones included;
`not checked` does not count but fails the report. A survivor is *explained* when its exact name
is in docs/testing.md's list of equivalent mutants; an unexplained survivor fails the report
too. Run from the project folder after `mutmut run`; exits 1 when a group is under `--min`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

BY_TESTS = {"killed", "timeout", "segfault", "suspicious"}
BY_MYPY = {"caught by type check"}
UNCHECKED = {"not checked", "skipped", "check was interrupted by user"}
GROUPS = {
    "ai_sdlc.workflow.state.": "state owner",
    "ai_sdlc.store.": "store",
    "ai_sdlc.resilience.": "resilience",
    "ai_sdlc.workflow.runs.": "stop conditions",
}
LINE = re.compile(r"^\s*(?P<name>[\w.]+?)\.x[_ǁ]\S*__mutmut_\d+: (?P<status>.+?)\s*$")
MUTANT = re.compile(r"^\s*(?P<mutant>\S+__mutmut_\d+): (?P<status>.+?)\s*$")
EXPLAINED = re.compile(r"^- `(?P<mutant>[^`]+__mutmut_\d+)`", re.MULTILINE)


def collect(text: str) -> tuple[dict[str, Counter[str]], dict[str, list[str]]]:
    """(status counts per module, surviving or untested mutants per module)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    for raw in text.splitlines():
        line, mutant = LINE.match(raw), MUTANT.match(raw)
        if not line or not mutant:
            continue
        module, status = line["name"], line["status"]
        counts[module][status] += 1
        if status in ("survived", "no tests"):
            survivors[module].append(mutant["mutant"])
    return counts, survivors


def group_of(module: str) -> str:
    return next((g for prefix, g in GROUPS.items() if module.startswith(prefix)), "other")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--min", type=float, default=90.0, help="the score to reach (percent)")
    parser.add_argument("--docs", type=Path, default=Path("docs/testing.md"))
    args = parser.parse_args()
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    counts, survivors = collect(done.stdout)
    explained = set(EXPLAINED.findall(args.docs.read_text(encoding="utf-8")))
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    total = Counter[str]()
    print(_header())
    for module in sorted(counts):
        c = counts[module] + Counter(equivalent=_count_in(survivors[module], explained))
        groups[group_of(module)].update(c)
        total.update(c)
        print(_row(module, c))
    print()
    for group in sorted(groups):
        print(_row(group, groups[group]))
    print(_row("TOTAL", total))
    failures = [g for g, c in groups.items() if (_score(c) or 0.0) < args.min]
    unexplained = {m: [s for s in survivors[m] if s not in explained] for m in survivors}
    for module in sorted(m for m in unexplained if unexplained[m]):
        print(f"\n{module}: {len(unexplained[module])} not killed and not explained")
        for name in unexplained[module]:
            print(f"  {name}")
    n_unexplained = sum(len(v) for v in unexplained.values())
    n_unchecked = sum(n for s, n in total.items() if s in UNCHECKED)
    print(
        f"\n{len(failures)} group(s) under {args.min:g}%, {n_unexplained} survivor(s) not "
        f"explained in {args.docs}, {n_unchecked} mutant(s) not checked"
    )
    return 1 if failures or n_unexplained or n_unchecked else 0


def _count_in(names: list[str], explained: set[str]) -> int:
    return sum(1 for name in names if name in explained)


def _score(c: Counter[str]) -> float | None:
    checked = sum(n for s, n in c.items() if s not in UNCHECKED and s != "equivalent")
    caught = sum(n for s, n in c.items() if s in BY_TESTS | BY_MYPY)
    return 100.0 * caught / checked if checked else None


def _header() -> str:
    return (
        f"{'module':<46} {'mutants':>7} {'tests':>6} {'mypy':>5} {'surv.':>5} {'equiv':>5} "
        f"{'no t.':>5} {'unchk':>5} {'score':>6}"
    )


def _row(module: str, c: Counter[str]) -> str:
    by_tests = sum(n for s, n in c.items() if s in BY_TESTS)
    by_mypy = sum(n for s, n in c.items() if s in BY_MYPY)
    unchecked = sum(n for s, n in c.items() if s in UNCHECKED)
    score = _score(c)
    shown = f"{score:5.1f}%" if score is not None else "    -"
    mutants = sum(n for s, n in c.items() if s != "equivalent")
    return (
        f"{module:<46} {mutants:>7} {by_tests:>6} {by_mypy:>5} {c['survived']:>5} "
        f"{c['equivalent']:>5} {c['no tests']:>5} {unchecked:>5} {shown:>6}"
    )


if __name__ == "__main__":
    sys.exit(main())
