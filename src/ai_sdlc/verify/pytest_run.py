"""pytest as the judge, whatever the user's own pytest options.

The user's `PYTEST_ADDOPTS` reaches the verification commands (it is their environment), and
their pytest config's `addopts` is the project's. Neither may change the verdict:

- Reporting options (`-rs`, `-rA`, `-v`, `-qq`, `--tb=no`, `--no-summary`, `-p no:terminal`)
  change or remove the text the failing tests are read from (`-rs` replaces pytest's default
  `-rfE`, so its "short test summary info" has no `FAILED` line). So every verification step
  also gets `--junitxml=<our temporary file> -o junit_family=xunit1` appended to
  `PYTEST_ADDOPTS` (appended: it overrides a report the user's options or config ask for),
  and the failing tests and their assertions are read from that report (`read_report`); the
  counts still come from pytest's count line when there is one (it also counts deselected
  tests, the report does not), else from the report. A command that is not pytest ignores it.
- Options that choose, stop or replace the run (`--lf`, `-x`, `--maxfail`, `-k`, `-m`,
  `--deselect`, `--ignore`, `--co`, `--sw`, a test path, `--noconftest`, `-c`) are dropped
  from `PYTEST_ADDOPTS` for verification: they would make a failing suite pass (`--lf` after a
  passing run, `-k 'not test_mul'`), or make the base and the attempt run different tests.
  Everything else the user set (`-p` plugins, `-n 4`, `--strict-markers`, `-W error`) is kept.
  The project's own config is not touched: its test section is protected (see `verify.judge`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ai_sdlc.verify.counts import TestCounts, junit_cases, junit_counts, junit_problem

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

ADDOPTS = "PYTEST_ADDOPTS"

#: Short flags without a value (`-vx` is `-v -x`); those in `_DROP_SHORT` are dropped.
_SHORT_FLAGS = frozenset("vqslxhV")
_DROP_SHORT = frozenset("xhV")
#: Short options whose value follows (attached, `-kfoo`, or as the next word).
_SHORT_VALUED = frozenset("kmcporW")
_DROP_SHORT_VALUED = frozenset("kmc")
#: Long options dropped, without and with a value.
_DROP_LONG_FLAGS = frozenset(
    {
        "--lf",
        "--last-failed",
        "--sw",
        "--stepwise",
        "--sw-skip",
        "--stepwise-skip",
        "--exitfirst",
        "--co",
        "--collect-only",
        "--collectonly",
        "--setup-only",
        "--setup-plan",
        "--fixtures",
        "--funcargs",
        "--fixtures-per-test",
        "--markers",
        "--help",
        "--version",
        "--noconftest",
        "--pdb",
        "--trace",
    }
)
_DROP_LONG_VALUED = frozenset(
    {
        "--maxfail",
        "--deselect",
        "--ignore",
        "--ignore-glob",
        "--lfnf",
        "--last-failed-no-failures",
        "--config-file",
        "--rootdir",
        "--confcutdir",
        "--pdbcls",
        "--junitxml",
        "--junit-xml",
        "--junit-prefix",
    }
)
#: Long options known to take no value: a word after one is a test path, not its value.
_KEPT_LONG_FLAGS = frozenset(
    {
        "--verbose",
        "--quiet",
        "--strict-markers",
        "--strict-config",
        "--strict",
        "--showlocals",
        "--no-showlocals",
        "--no-header",
        "--no-summary",
        "--ff",
        "--failed-first",
        "--nf",
        "--new-first",
        "--cache-clear",
        "--sw-reset",
        "--stepwise-reset",
        "--runxfail",
        "--disable-warnings",
        "--disable-pytest-warnings",
        "--continue-on-collection-errors",
        "--setup-show",
        "--full-trace",
        "--no-fold-skipped",
        "--force-short-summary",
    }
)
#: `-o name=value` settings that choose which tests are collected.
_DROP_INI = frozenset(
    {"addopts", "testpaths", "python_files", "python_classes", "python_functions"}
    | {"norecursedirs", "junit_family", "junit_suite_name"}
)
#: Plugins the judge needs: `-p no:junitxml` would leave the report unwritten.
_NEEDED_PLUGINS = frozenset({"junitxml", "junit"})


def judge_addopts(value: str, report: Path) -> tuple[str, list[str]]:
    """(`PYTEST_ADDOPTS` for a verification step writing its report to `report`, the user's
    options it leaves out)."""
    kept, dropped = _sanitise(value)
    ours = [f"--junitxml={report}", "-o", "junit_family=xunit1"]
    return shlex.join([*kept, *ours]), dropped


def without_report(output: str, report: Path) -> str:
    """`output` without pytest's `generated xml file: <report>` line: the file is ours, and its
    random temporary path would make two runs of one failure look different."""
    if str(report) not in output:
        return output
    return "".join(ln for ln in output.splitlines(keepends=True) if str(report) not in ln)


def dropped_options(environ: Mapping[str, str]) -> list[str]:
    """The options of the user's `PYTEST_ADDOPTS` verification leaves out (for a notice)."""
    return _sanitise(environ.get(ADDOPTS, ""))[1]


def _sanitise(value: str) -> tuple[list[str], list[str]]:
    try:
        words = shlex.split(value)
    except ValueError:  # pytest could not split it either: it would stop every run
        return [], [value] if value.strip() else []
    kept: list[str] = []
    dropped: list[str] = []
    may_take_value = False  # the last kept word is an option that may take the next word
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            dropped.extend(words[index - 1 :])
            break
        if not word.startswith("-") or word == "-":
            (kept if may_take_value else dropped).append(word)
            may_take_value = False
            continue
        may_take_value = False
        if word.startswith("--"):
            name, equals, _ = word.partition("=")
            if name in _DROP_LONG_FLAGS:
                dropped.append(word)
            elif name in _DROP_LONG_VALUED or name == "--override-ini":
                option = [word]
                if not equals and index < len(words):
                    option.append(words[index])
                    index += 1
                setting = option[-1].partition("=")[2] if equals else option[-1]
                if name == "--override-ini" and not _ini_dropped(setting):
                    kept.extend(option)
                else:
                    dropped.append(" ".join(option))
            else:
                kept.append(word)
                may_take_value = not equals and name not in _KEPT_LONG_FLAGS
            continue
        short, index, drop = _short(word, words, index)
        kept.extend(short)
        if drop:
            dropped.append(drop)
        # another plugin's option alone (`-n 4`): the next word may be its value
        may_take_value = len(word) == 2 and word[1] not in _SHORT_FLAGS | _SHORT_VALUED
    return kept, dropped


def _short(word: str, words: list[str], index: int) -> tuple[list[str], int, str]:
    """(the kept part of a short-option word and the value it takes, the next index, the
    dropped part or "")."""
    flags = ""
    for position, letter in enumerate(word[1:], start=1):
        if letter in _SHORT_FLAGS:
            flags += letter
            continue
        if letter not in _SHORT_VALUED:  # another plugin's option (`-n4`): kept as it is
            return [word], index, ""
        value = word[position + 1 :]
        option = [f"-{letter}{value}"]
        if not value and index < len(words):
            value = words[index]
            option = [f"-{letter}", value]
            index += 1
        kept_flags = "".join(f for f in flags if f not in _DROP_SHORT)
        head = [f"-{kept_flags}"] if kept_flags else []
        dropped_flags = "".join(f for f in flags if f in _DROP_SHORT)
        drop = f"-{dropped_flags}" if dropped_flags else ""
        if _short_dropped(letter, value):
            return head, index, " ".join(filter(None, [drop, " ".join(option)]))
        return [*head, *option], index, drop
    kept_flags = "".join(f for f in flags if f not in _DROP_SHORT)
    dropped_flags = "".join(f for f in flags if f in _DROP_SHORT)
    return (
        [f"-{kept_flags}"] if kept_flags else [],
        index,
        f"-{dropped_flags}" if dropped_flags else "",
    )


def _short_dropped(letter: str, value: str) -> bool:
    if letter in _DROP_SHORT_VALUED:
        return True
    if letter == "p":
        return value.startswith("no:") and value[3:] in _NEEDED_PLUGINS
    if letter == "o":
        return _ini_dropped(value)
    return False


def _ini_dropped(setting: str) -> bool:
    return setting.partition("=")[0].strip() in _DROP_INI


class PytestReport(msgspec.Struct, frozen=True):
    """What the junit report of one verification step says."""

    counts: TestCounts
    #: The failing tests' node ids (`tests/test_mul.py::test_mul`, a module for a collection
    #: error), in the report's order.
    failing: tuple[str, ...] = ()
    #: The first failing test and its assertion (`tests/test_mul.py::test_mul: assert 7 == 12`).
    reason: str = ""


def read_report(path: Path) -> PytestReport | None:
    """The report pytest wrote at `path` (None: missing, too large, not XML: no pytest ran,
    or the command's own `--junitxml` overrode ours)."""
    cases = junit_cases(path)
    if cases is None:
        return None
    failing: list[str] = []
    reason = ""
    for case in cases:
        problem = junit_problem(case)
        if problem is None:
            continue
        nodeid = _nodeid(case)
        failing.append(nodeid)
        if not reason:
            detail = _detail(problem)
            reason = f"{nodeid}: {detail}" if detail else nodeid
    return PytestReport(junit_counts(cases, "pytest"), tuple(failing), reason)


def _nodeid(case: Element) -> str:
    """pytest's node id back from an xunit1 `<testcase>` (`file`, dotted `classname`)."""
    file = case.get("file") or ""
    classname = case.get("classname") or ""
    name = case.get("name") or ""
    if not file:
        return "::".join(part for part in (classname, name) if part)
    if not classname:  # a collection error: `name` is the module
        return file
    module = file.removesuffix(".py").replace("/", ".")
    if classname == module:
        return f"{file}::{name}"
    if classname.startswith(module + "."):
        classes = classname[len(module) + 1 :].split(".")
        return "::".join([file, *classes, name])
    return f"{file}::{name}"


def _detail(problem: Element) -> str:
    """The assertion (the message's first line); for a collection error, the first `E` line
    of its traceback."""
    message = (problem.get("message") or "").strip()
    if message and message != "collection failure":
        return message.splitlines()[0].strip()
    for line in (problem.text or "").splitlines():
        if line.startswith("E ") and line[1:].strip():
            return line[1:].strip()
    return message
