"""The test-count parsers and the failure reasons, on the real outputs of each runner
(tests/fixtures/runner_outputs: captured here for pytest, unittest, node:test and cargo; from the
documented formats for Jest, Vitest, uvu and go, which are not installed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_sdlc.verify.counts import TestCounts, parse_counts, parse_junit
from ai_sdlc.verify.failures import failing_tests, failure_reason
from tests.support.paths import FIXTURES

OUTPUTS = FIXTURES / "runner_outputs"


def output(name: str) -> str:
    return (OUTPUTS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("pytest_fail.txt", TestCounts(1, 1, 1, "pytest")),
        ("pytest_pass.txt", TestCounts(2, 0, 1, "pytest")),
        ("pytest_pass_verbose_header.txt", TestCounts(2, 0, 1, "pytest")),
        ("pytest_collection_error.txt", TestCounts(0, 1, 0, "pytest")),
        ("unittest_fail.txt", TestCounts(1, 2, 1, "unittest")),
        ("unittest_pass.txt", TestCounts(3, 0, 1, "unittest")),
        ("node_tap_fail.txt", TestCounts(1, 1, 1, "node")),
        ("node_tap_pass.txt", TestCounts(2, 0, 1, "node")),
        ("node_spec_fail.txt", TestCounts(1, 1, 1, "node")),
        ("node_spec_pass.txt", TestCounts(2, 0, 1, "node")),
        ("cargo_fail.txt", TestCounts(1, 1, 1, "cargo")),
        ("cargo_pass.txt", TestCounts(2, 0, 1, "cargo")),  # unit tests + doc tests summed
        ("jest_fail.txt", TestCounts(3, 1, 1, "jest")),
        ("vitest_fail.txt", TestCounts(3, 1, 1, "vitest")),
        ("uvu_fail.txt", TestCounts(1, 1, 0, "uvu")),
        ("go_verbose_pass.txt", TestCounts(4, 0, 1, "go")),  # subtests count
        ("go_fail.txt", None),  # without -v go prints no passing test: no floor
    ],
)
def test_counts_from_each_runners_summary(name: str, counts: TestCounts | None) -> None:
    assert parse_counts(output(name)) == counts


def test_output_without_a_summary_has_no_counts() -> None:
    assert parse_counts("boom: widget count is 3, expected 4\n") is None
    assert parse_counts("") is None
    # colour codes and CRLF do not hide a summary
    coloured = "\x1b[31m1 failed\x1b[0m, \x1b[32m2 passed\x1b[0m in 0.10s\r\n"
    assert parse_counts(coloured) == TestCounts(2, 1, 0, "pytest")


@pytest.mark.parametrize(
    ("name", "reason", "failing"),
    [
        (
            "pytest_fail.txt",
            "tests/test_mul.py::test_mul: assert 5 == 6",
            ["tests/test_mul.py::test_mul"],
        ),
        (
            "pytest_collection_error.txt",
            "tests/test_broken.py: ImportError: cannot import name 'div' from 'mul' "
            "(/tmp/cap/py/mul.py)",
            ["tests/test_broken.py"],
        ),
        (
            "unittest_fail.txt",
            "test_mul.MulTest.test_error: ValueError: bad value",
            ["test_mul.MulTest.test_error", "test_mul.MulTest.test_mul"],
        ),
        (
            "node_tap_fail.txt",
            "multiplies: Expected values to be strictly equal:; 5 !== 6",
            ["multiplies"],
        ),
        (
            "node_spec_fail.txt",
            "multiplies: AssertionError [ERR_ASSERTION]: Expected values to be strictly "
            "equal:; 5 !== 6",
            ["multiplies"],
        ),
        (
            "cargo_fail.txt",
            "tests::multiplies: assertion `left == right` failed; left: 5; right: 6 "
            "(src/lib.rs:8:23)",
            ["tests::multiplies"],
        ),
        (
            "jest_fail.txt",
            "mul › multiplies two numbers: expect(received).toBe(expected) // Object.is "
            "equality; Expected: 6; Received: 5",
            ["mul › multiplies two numbers"],
        ),
        (
            "vitest_fail.txt",
            "test/mul.test.js > mul > multiplies two numbers: AssertionError: expected 5 to be 6 "
            "// Object.is equality",
            ["test/mul.test.js > mul > multiplies two numbers"],
        ),
        (
            "uvu_fail.txt",
            "mul > multiplies two numbers: Expected values to be strictly equal: (is); "
            "++6 (Expected); --5 (Actual)",
            ["mul > multiplies two numbers"],
        ),
        (
            "go_fail.txt",
            "TestMul: mul_test.go:8: Mul(2, 3) = 5, want 6",
            ["TestMul"],
        ),
    ],
)
def test_the_reason_names_the_failing_test_and_its_assertion(
    name: str, reason: str, failing: list[str]
) -> None:
    text = output(name)
    assert failure_reason(text) == reason
    assert failing_tests(text) == failing
    # never a stack frame or the runner's generic trailer
    assert " at " not in reason.replace("at least", "")
    assert "to rerun pass" not in reason


@pytest.mark.parametrize(
    "name", ["pytest_pass.txt", "unittest_pass.txt", "node_spec_pass.txt", "cargo_pass.txt"]
)
def test_a_passing_run_has_no_reason(name: str) -> None:
    assert failure_reason(output(name)) == ""
    assert failing_tests(output(name)) == []


def test_a_cargo_compile_error_is_its_first_error_line() -> None:
    text = (
        "   Compiling calc v0.1.0 (/x)\n"
        "error[E0425]: cannot find function `mul` in this scope\n"
        " --> src/lib.rs:8:23\n"
        "error: could not compile `calc` (lib test) due to 1 previous error\n"
    )
    assert failure_reason(text) == "error[E0425]: cannot find function `mul` in this scope"


def test_a_long_reason_is_cut_to_one_line() -> None:
    text = "FAILED tests/test_x.py::test_x - assert " + "x" * 500 + "\n1 failed in 0.1s\n"
    reason = failure_reason(text)
    assert len(reason) == 240 and reason.endswith("…")


def test_junit_counts(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="s" tests="4">'
        '<testcase name="a"/><testcase name="b"><failure message="no"/></testcase>'
        '<testcase name="c"><skipped/></testcase><testcase name="d"><error/></testcase>'
        "</testsuite></testsuites>"
    )
    assert parse_junit(report) == TestCounts(1, 2, 1, "junit")
    assert parse_junit(tmp_path / "missing.xml") is None
    (tmp_path / "bad.xml").write_text("<testsuite><testcase>")
    assert parse_junit(tmp_path / "bad.xml") is None
