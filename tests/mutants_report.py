"""`make mutants`' report: mutmut's results per module, the score, and every survivor.

mutmut prints one line per mutant (`    ai_sdlc.store.ids.x_next_id__mutmut_3: survived`); this
groups them by module. Killed counts what the tests caught (a timeout or a crash of the
mutated code is caught too); the score is killed / checked. `no tests` (no selected test
reaches the function) counts against the score, `not checked` (the run did not get there)
does not. Run from the project folder after `mutmut run`; exits 1 under `--min` percent.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict

CAUGHT = {"killed", "timeout", "segfault", "suspicious", "caught by type check"}
UNCHECKED = {"not checked", "skipped", "check was interrupted by user"}
LINE = re.compile(r"^\s*(?P<name>[\w.]+?)\.x[_ǁ]\S*__mutmut_\d+: (?P<status>.+?)\s*$")
MUTANT = re.compile(r"^\s*(?P<mutant>\S+__mutmut_\d+): (?P<status>.+?)\s*$")


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
            survivors[module].append(f"{mutant['mutant']} ({status})")
    return counts, survivors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--min", type=float, default=90.0, help="the score to reach (percent)")
    args = parser.parse_args()
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    counts, survivors = collect(done.stdout)
    total = Counter[str]()
    print(f"{'module':<48} {'mutants':>7} {'killed':>6} {'surv.':>5} {'no t.':>5} "
          f"{'unchk':>5} {'score':>6}")  # fmt: skip
    for module in sorted(counts):
        c = counts[module]
        total.update(c)
        print(_row(module, c))
    print(_row("TOTAL", total))
    for module in sorted(survivors):
        print(f"\n{module}: {len(survivors[module])} not killed")
        for name in survivors[module]:
            print(f"  {name}")
    score = _score(total)
    return 0 if score is not None and score >= args.min else 1


def _score(c: Counter[str]) -> float | None:
    checked = sum(n for s, n in c.items() if s not in UNCHECKED)
    killed = sum(n for s, n in c.items() if s in CAUGHT)
    return 100.0 * killed / checked if checked else None


def _row(module: str, c: Counter[str]) -> str:
    killed = sum(n for s, n in c.items() if s in CAUGHT)
    unchecked = sum(n for s, n in c.items() if s in UNCHECKED)
    score = _score(c)
    shown = f"{score:5.1f}%" if score is not None else "    -"
    return (
        f"{module:<48} {sum(c.values()):>7} {killed:>6} {c['survived']:>5} "
        f"{c['no tests']:>5} {unchecked:>5} {shown:>6}"
    )


if __name__ == "__main__":
    sys.exit(main())
