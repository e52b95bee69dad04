"""The one line that says why a verification failed: the failing test and its assertion.

A failed run's output ends in noise a reader cannot act on: a stack frame of the assertion
library (`at Proxy.is (…/uvu/assert/index.js:41:2)`), the runner's generic trailer (`error: test
failed, to rerun pass --lib`). `failure_reason` reads the runner's own failure report instead
(pytest, unittest, Jest, Vitest, uvu, node:test, go, cargo) and names the first failing test
with its assertion or first error line; `failing_tests` lists the failing tests' names (the
baseline records them: the tests a test-first story starts with failing).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ai_sdlc.verify.normalise import strip_ansi

#: Longest reason kept (it is one line of a report and of the story's `blocked_reason`).
REASON_LIMIT = 240


def _lines(text: str) -> list[str]:
    return strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _after(lines: list[str], start: int, pattern: re.Pattern[str], stop: int = 60) -> str:
    """The first line after `start` (within `stop` lines) matching `pattern`, stripped."""
    for line in lines[start + 1 : start + 1 + stop]:
        if pattern.search(line):
            return line.strip()
    return ""


def _details(lines: list[str], start: int, count: int = 3) -> str:
    """Up to `count` non-empty lines after `start` that are not stack frames, joined."""
    kept: list[str] = []
    for line in lines[start + 1 : start + 12]:
        text = line.strip()
        if text.startswith("at ") or text.endswith("{"):
            break
        if text:
            kept.append(text)
        if len(kept) == count:
            break
    return "; ".join(kept)


_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_PYTEST_E = re.compile(r"^E\s+(\S.*)$")


def _pytest(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for line in lines:
        hit = _PYTEST_SUMMARY.match(line)
        if hit is None:
            continue
        names.append(hit.group(2))
        if not reason:
            detail = hit.group(3) or ""
            if not detail:  # a collection error: its first `E` line says why
                detail = next(
                    (m.group(1) for m in map(_PYTEST_E.match, lines) if m is not None), ""
                )
            reason = f"{hit.group(2)}: {detail}" if detail else hit.group(2)
    return names, reason


_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR): (\S+) \(([^)]*)\)")
_EXCEPTION = re.compile(r"^\s*[A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt)\b.*")


def _unittest(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for index, line in enumerate(lines):
        hit = _UNITTEST_HEAD.match(line)
        if hit is None:
            continue
        names.append(hit.group(3))
        if not reason:
            detail = _after(lines, index, _EXCEPTION)
            reason = f"{hit.group(3)}: {detail}" if detail else hit.group(3)
    return names, reason


_ANY = re.compile(r"\S")
_JEST_HEAD = re.compile(r"^\s+● (.+)$")
_JEST_DETAIL = re.compile(r"^\s+(?:expect\(|Expected|Received|\w*Error\b|thrown:)")


def _jest(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for index, line in enumerate(lines):
        hit = _JEST_HEAD.match(line)
        if hit is None or hit.group(1).startswith("Test suite failed"):
            if hit is not None and not reason:
                reason = f"{hit.group(1)}: {_after(lines, index, _ANY)}"
            continue
        names.append(hit.group(1))
        if not reason:
            details = [ln.strip() for ln in lines[index + 1 : index + 12] if _JEST_DETAIL.match(ln)]
            reason = f"{hit.group(1)}: {'; '.join(details[:3])}" if details else hit.group(1)
    return names, reason


_VITEST_HEAD = re.compile(r"^\s*FAIL\s+(\S.* > .+)$")


def _vitest(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for index, line in enumerate(lines):
        hit = _VITEST_HEAD.match(line)
        if hit is None:
            continue
        names.append(hit.group(1).strip())
        if not reason:
            detail = _after(lines, index, _ANY, stop=3)
            reason = f"{hit.group(1).strip()}: {detail}" if detail else hit.group(1).strip()
    return names, reason


#: uvu 0.5 prints `FAIL  "name"` under the file's own heading line; older ones `FAIL  file  "name"`.
_UVU_HEAD = re.compile(r'^\s+FAIL\s+(?:(.+?)\s+)?"(.*)"\s*$')


def _uvu(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for index, line in enumerate(lines):
        hit = _UVU_HEAD.match(line)
        if hit is None:
            continue
        name = f"{hit.group(1)} > {hit.group(2)}" if hit.group(1) else hit.group(2)
        names.append(name)
        if not reason:
            detail = _details(lines, index)
            reason = f"{name}: {detail}" if detail else name
    return names, reason


_MOCHA_HEAD = re.compile(r"^\s+(\d+)\) (\S.*?)(:?)$")


def _mocha(lines: list[str]) -> tuple[list[str], str]:
    """The report after `N failing`: `1) suite` then `adds two numbers:` and the error, whose
    message may go on after a blank line (`2 !== 3`)."""
    start = next((i for i, ln in enumerate(lines) if re.match(r"^\s+\d+ failing$", ln)), None)
    if start is None:
        return [], ""
    names: list[str] = []
    reason = ""
    index = start + 1
    while index < len(lines):
        hit = _MOCHA_HEAD.match(lines[index])
        if hit is None:
            index += 1
            continue
        title = [hit.group(2)]
        if not hit.group(3):  # the title goes on, indented, up to the line ending in ":"
            for follow in lines[index + 1 : index + 6]:
                index += 1
                title.append(follow.strip().rstrip(":"))
                if follow.rstrip().endswith(":"):
                    break
        name = " ".join(title)
        names.append(name)
        if not reason:
            kept = [ln.strip() for ln in lines[index + 1 : index + 10] if ln.strip()]
            detail = "; ".join(
                ln for ln in kept[:4] if not ln.startswith(("at ", "+ expected", "-", "+"))
            )
            reason = f"{name}: {detail}" if detail else name
        index += 1
    return names, reason


_NODE_SPEC = re.compile(r"^\s*✖ (.+?)(?: \([\d.]+m?s\))?$")
_NODE_TAP = re.compile(r"^\s*not ok \d+ - (.+?)(?: # .*)?$")


def _node(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for index, line in enumerate(lines):
        spec = _NODE_SPEC.match(line)
        tap = _NODE_TAP.match(line)
        hit = spec or tap
        if hit is None or hit.group(1) == "failing tests:":
            continue
        name = hit.group(1)
        if name not in names:
            names.append(name)
        if reason:
            continue
        if spec is not None:
            detail = _details(lines, index, 2)
        else:  # TAP: the YAML block's `error:` value (inline, or the next line of a block)
            detail = ""
            for offset, text in enumerate(lines[index + 1 : index + 20]):
                found = re.match(r"^\s+error: (.*)$", text)
                if found:
                    value = found.group(1).strip().strip("'\"")
                    if value in ("|-", "|", ">-", ">"):  # a block: its first two lines
                        value = _details(lines, index + 1 + offset, 2)
                    detail = value
                    break
        reason = f"{name}: {detail}" if detail else name
    return names, reason


_GO_HEAD = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)")
_GO_LOG = re.compile(r"^\s+\S+\.go:\d+: \S")
#: A compile error of a Go file (`./is_test.go:6:6: undefined: IsPalindrome`).
GO_COMPILE = re.compile(r"^(\S+\.go):\d+:\d+: (\S.*)$")


def _go(lines: list[str]) -> tuple[list[str], str]:
    """`--- FAIL: TestX` with the test's own log line (`x_test.go:7: got …`): after it without
    `-v`, between `=== RUN   TestX` and it with `-v`; a build failure's compile error."""
    names: list[str] = []
    reason = ""
    logged: dict[str, str] = {}
    running = ""
    for index, line in enumerate(lines):
        run = _GO_RUN.match(line)
        if run is not None:
            running = run.group(1)
            continue
        if _GO_LOG.match(line) and running and running not in logged:
            logged[running] = line.strip()
            continue
        hit = _GO_HEAD.match(line)
        if hit is None:
            continue
        name = hit.group(1)
        names.append(name)
        if not reason:
            following = lines[index + 1] if index + 1 < len(lines) else ""
            detail = following.strip() if _GO_LOG.match(following) else logged.get(name, "")
            reason = f"{name}: {detail}" if detail else name
    if not names:
        found = next((ln.strip() for ln in lines if GO_COMPILE.match(ln.strip())), "")
        return [], found
    return names, reason


_CARGO_PANIC = re.compile(r"^thread '([^']+)'(?: \(\d+\))? panicked at (.*)$")


def _cargo(lines: list[str]) -> tuple[list[str], str]:
    names: list[str] = []
    reason = ""
    for index, line in enumerate(lines):
        hit = _CARGO_PANIC.match(line)
        if hit is None:
            continue
        names.append(hit.group(1))
        if reason:
            continue
        where = hit.group(2).rstrip(":")
        if where.startswith("'"):  # before Rust 1.73: panicked at 'message', file:line
            reason = f"{hit.group(1)}: {where}"
            continue
        message = [ln.strip() for ln in lines[index + 1 : index + 4]]
        message = [m for m in message if m and not m.startswith(("stack backtrace", "note:"))]
        reason = f"{hit.group(1)}: {'; '.join(message) or where} ({where})"
    if not names:  # a compile error: its first `error[…]`/`error:` line
        for line in lines:
            if re.match(r"^error(\[E\d+\])?: ", line) and "test failed, to rerun" not in line:
                return [], line.strip()
    return names, reason


#: Tried in order; the first that finds a failing test answers.
_READERS: tuple[Callable[[list[str]], tuple[list[str], str]], ...] = (
    _pytest,
    _unittest,
    _vitest,
    _jest,
    _uvu,
    _mocha,
    _node,
    _go,
    _cargo,
)


def _read(output: str) -> tuple[list[str], str]:
    lines = _lines(output)
    for reader in _READERS:
        names, reason = reader(lines)
        if names or reason:
            return names, reason
    return [], ""


def failing_tests(output: str) -> list[str]:
    """The names of the failing tests the runner reported (empty when none could be read)."""
    return list(dict.fromkeys(_read(output)[0]))


def failure_reason(output: str) -> str:
    """The first failing test and its assertion or first error line, one line; "" when the
    output holds no runner's failure report (the caller falls back to its own choice)."""
    reason = " ".join(_read(output)[1].split())
    return reason if len(reason) <= REASON_LIMIT else reason[: REASON_LIMIT - 1] + "…"


#: Lines that point elsewhere (a log file, the help) rather than say what went wrong.
_POINTERS = re.compile(
    r"(?i)complete log of this run|for more information|run '?\S+ help|^\s*help:|"
    r"to see a list of|^\s*(?:npm (?:error|ERR!)\s*)?(?:code|errno)\s+\S+\s*$|"
    r"test failed, to rerun"
)
#: Words that name a cause ("No module named pytset", "Missing script", "can only install").
_CAUSE = re.compile(
    r"(?i)\b(?:no module named|not found|no such|unknown|missing|can ?not|can only|could not|"
    r"couldn't|undefined|unrecognized|invalid|not installed|permission denied|is not)\b"
)
_ERROR = re.compile(r"(?i)\b(?:error|fatal|failed|failure)\b")


def error_line(output: str) -> str:
    """The line of a failed command's output that names the cause, for a message that quotes
    it: a line with a cause's words ("No module named pytset", "npm error Missing script:
    \"tset\"", "… can only install with an existing package-lock.json"), else the first line
    saying error, else the first line; never a pointer to a log file or to the help. "" for
    no output."""
    lines = [ln.strip() for ln in _lines(output) if ln.strip()]
    told = [ln for ln in lines if not _POINTERS.search(ln)]
    found = next((ln for ln in told if _CAUSE.search(ln)), "") or next(
        (ln for ln in told if _ERROR.search(ln)), ""
    )
    line = found or (told[0] if told else (lines[0] if lines else ""))
    return line if len(line) <= REASON_LIMIT else line[: REASON_LIMIT - 1] + "…"
