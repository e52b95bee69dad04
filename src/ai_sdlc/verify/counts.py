"""How many tests passed, failed and were skipped, read from a test runner's own summary.

The pass-count floor (see `verify.judge`) compares these numbers between the story's base and
an attempt: an agent that deletes, skips or disables tests lowers them even when the run exits
0. Each parser reads the summary its runner prints (pytest, unittest, Jest, Vitest, uvu,
node:test in TAP or spec form, mocha, `go test -v`, `cargo test`), or a JUnit XML report. None
means no summary was recognised: no floor can be applied (`go test` without `-v` prints no
count of passing tests).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ai_sdlc.verify.normalise import strip_ansi

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

#: A JUnit report larger than this is not read (an agent could write anything there).
MAX_JUNIT_BYTES = 32 * 1024 * 1024


class TestCounts(msgspec.Struct, frozen=True):
    """Passed, failed (failures and errors) and skipped tests, and which runner said so."""

    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    runner: str = ""

    def __add__(self, other: TestCounts) -> TestCounts:
        runners = [r for r in (self.runner, other.runner) if r]
        runner = "+".join(dict.fromkeys("+".join(runners).split("+"))) if runners else ""
        return TestCounts(
            self.passed + other.passed,
            self.failed + other.failed,
            self.skipped + other.skipped,
            runner,
        )

    def shown(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"

    def to_dict(self) -> dict[str, int | str]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "runner": self.runner,
        }

    @classmethod
    def from_dict(cls, data: object) -> TestCounts | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                int(data.get("passed") or 0),
                int(data.get("failed") or 0),
                int(data.get("skipped") or 0),
                str(data.get("runner") or ""),
            )
        except (TypeError, ValueError):
            return None


def _words(text: str, names: dict[str, str]) -> dict[str, int]:
    """`3 passed, 1 failed` style pairs (number then word) → {field: count}."""
    found: dict[str, int] = {}
    for number, word in re.findall(r"(\d+) ([a-z]+)", text):
        field = names.get(word)
        if field:
            found[field] = found.get(field, 0) + int(number)
    return found


_PYTEST_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "error": "failed",
    "errors": "failed",
    "skipped": "skipped",
    "xfailed": "skipped",
    "deselected": "skipped",
}
_PYTEST_LINE = re.compile(
    r"^=*\s*((?:\d+ \w+(?:, )?)+|no tests ran) in [\d.]+s(?: \([^)]*\))?\s*=*$", re.M
)


def _pytest(text: str) -> TestCounts | None:
    lines = _PYTEST_LINE.findall(text)
    if not lines:
        return None
    found = _words(lines[-1], _PYTEST_WORDS)
    return TestCounts(**found, runner="pytest")


def _unittest(text: str) -> TestCounts | None:
    ran = re.findall(r"^Ran (\d+) tests? in [\d.]+s$", text, re.M)
    if not ran:
        return None
    total = sum(int(n) for n in ran)
    found = {"failures": 0, "errors": 0, "skipped": 0, "expected failures": 0}
    found["unexpected successes"] = 0
    for outcome in re.findall(r"^(?:OK|FAILED)(?: \(([^)]*)\))?$", text, re.M):
        for key, value in re.findall(r"([a-z ]+)=(\d+)", outcome):
            if key.strip() in found:
                found[key.strip()] += int(value)
    failed = found["failures"] + found["errors"] + found["unexpected successes"]
    skipped = found["skipped"] + found["expected failures"]
    return TestCounts(max(0, total - failed - skipped), failed, skipped, "unittest")


def _jest(text: str) -> TestCounts | None:
    lines = re.findall(r"^Tests:\s+(.*\d+ total)\s*$", text, re.M)
    if not lines:
        return None
    found = _words(
        lines[-1], {"passed": "passed", "failed": "failed", "skipped": "skipped", "todo": "skipped"}
    )
    return TestCounts(**found, runner="jest")


def _vitest(text: str) -> TestCounts | None:
    lines = re.findall(r"^\s*Tests\s+(\d+ [a-z]+(?: \| \d+ [a-z]+)*) \(\d+\)\s*$", text, re.M)
    if not lines:
        return None
    found = _words(
        lines[-1], {"passed": "passed", "failed": "failed", "skipped": "skipped", "todo": "skipped"}
    )
    return TestCounts(**found, runner="vitest")


def _node(text: str) -> TestCounts | None:
    """node:test: `# pass 2` (TAP) or `ℹ pass 2` (spec)."""
    found = dict(re.findall(r"^(?:#|ℹ) (pass|fail|skipped|todo|cancelled) (\d+)$", text, re.M))
    if "pass" not in found or "fail" not in found:
        return None
    failed = int(found["fail"]) + int(found.get("cancelled", 0))
    skipped = int(found.get("skipped", 0)) + int(found.get("todo", 0))
    return TestCounts(int(found["pass"]), failed, skipped, "node")


def _uvu(text: str) -> TestCounts | None:
    total = re.findall(r"^\s+Total:\s+(\d+)$", text, re.M)
    passed = re.findall(r"^\s+Passed:\s+(\d+)$", text, re.M)
    if not total or not passed:
        return None
    skipped = re.findall(r"^\s+Skipped:\s+(\d+)$", text, re.M)
    skip = int(skipped[-1]) if skipped else 0
    return TestCounts(int(passed[-1]), max(0, int(total[-1]) - int(passed[-1]) - skip), skip, "uvu")


def _mocha(text: str) -> TestCounts | None:
    passing = re.findall(r"^\s+(\d+) passing \(", text, re.M)
    if not passing:
        return None
    failing = re.findall(r"^\s+(\d+) failing$", text, re.M)
    pending = re.findall(r"^\s+(\d+) pending$", text, re.M)
    return TestCounts(
        int(passing[-1]),
        int(failing[-1]) if failing else 0,
        int(pending[-1]) if pending else 0,
        "mocha",
    )


def _go(text: str) -> TestCounts | None:
    """`go test -v`: one `--- PASS/FAIL/SKIP` line per test and subtest (without `-v` go
    prints no passing test: no counts)."""
    outcomes = re.findall(r"^\s*--- (PASS|FAIL|SKIP): \S", text, re.M)
    if "PASS" not in outcomes and "SKIP" not in outcomes:
        return None
    return TestCounts(outcomes.count("PASS"), outcomes.count("FAIL"), outcomes.count("SKIP"), "go")


def _cargo(text: str) -> TestCounts | None:
    results = re.findall(
        r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;", text, re.M
    )
    if not results:
        return None
    return TestCounts(
        sum(int(r[0]) for r in results),
        sum(int(r[1]) for r in results),
        sum(int(r[2]) for r in results),
        "cargo",
    )


#: Tried in order; the first that recognises its summary answers.
PARSERS: tuple[tuple[str, Callable[[str], TestCounts | None]], ...] = (
    ("pytest", _pytest),
    ("unittest", _unittest),
    ("jest", _jest),
    ("vitest", _vitest),
    ("node", _node),
    ("uvu", _uvu),
    ("mocha", _mocha),
    ("cargo", _cargo),
    ("go", _go),
)


def parse_counts(output: str) -> TestCounts | None:
    """The counts of one command's output, or None when no runner's summary is in it."""
    text = strip_ansi(output).replace("\r\n", "\n").replace("\r", "\n")
    for _name, parser in PARSERS:
        counts = parser(text)
        if counts is not None:
            return counts
    return None


def junit_cases(path: Path) -> list[Element] | None:
    """The `<testcase>` elements of a JUnit XML report; None when it is missing, too large or
    not XML. The one reader of JUnit files (the judge's counts, pytest's failing tests)."""
    import xml.etree.ElementTree as ET

    try:
        if not path.is_file() or path.stat().st_size > MAX_JUNIT_BYTES:
            return None
        root = ET.parse(path).getroot()  # expat refuses entity expansion bombs
    except (OSError, ET.ParseError):
        return None
    return list(root.iter("testcase"))


def junit_problem(case: Element) -> Element | None:
    """The `<failure>` or `<error>` child that makes a test case failed, if any."""
    return next((child for child in case if child.tag in ("failure", "error")), None)


def junit_counts(cases: list[Element], runner: str) -> TestCounts:
    """Failed (a failure or error), skipped, and the rest passed."""
    failed = skipped = 0
    for case in cases:
        if junit_problem(case) is not None:
            failed += 1
        elif any(child.tag == "skipped" for child in case):
            skipped += 1
    return TestCounts(len(cases) - failed - skipped, failed, skipped, runner)


def parse_junit(path: Path) -> TestCounts | None:
    """Counts from a JUnit XML report; None when it is missing, too large or not XML."""
    cases = junit_cases(path)
    return None if cases is None else junit_counts(cases, "junit")
