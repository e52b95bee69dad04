"""Failure reasons per runner (issue 33, case 10), each read from the REAL tool's output: a
small project with one failing and one passing test is run by the runner itself (uvu, mocha,
jest, vitest from the npm registry, pinned and cached: tests/support/js_runners.py; node:test;
`go test` with and without `-v`, and a test-first Go package that does not compile; `cargo
test`, a failing assertion and an integration test that does not compile). The reason must
name the failing test and its assertion or compiler error, never a stack frame of the
assertion library or the runner's trailer; the counts must be the runner's own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ai_sdlc.verify.counts import TestCounts, parse_counts
from ai_sdlc.verify.failures import failing_tests, failure_reason
from ai_sdlc.verify.setaside import unbuilt_tests
from tests.support.js_runners import runners


def run(argv: list[str], cwd: Path) -> str:
    temp = cwd.parent / f"{cwd.name}-tmp"  # the runner's own temp files (jest's cache) go with it
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "CI": "1", "NO_COLOR": "1", "FORCE_COLOR": "0", "TMPDIR": str(temp)}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0, done.stdout + done.stderr  # one test fails
    return done.stdout + done.stderr


def js_project(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / "node_modules").symlink_to(runners() / "node_modules")
    (tmp_path / "package.json").write_text('{"private": true}\n')
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / name).write_text(text)
    return tmp_path


UVU = (
    "import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\n"
    "test('adds two numbers', () => { assert.is(1 + 1, 3); });\n"
    "test('keeps zero', () => { assert.is(0, 0); });\ntest.run();\n"
)
MOCHA = (
    "const assert = require('node:assert');\ndescribe('add', () => {\n"
    "  it('adds two numbers', () => { assert.strictEqual(1 + 1, 3); });\n"
    "  it('keeps zero', () => { assert.strictEqual(0, 0); });\n});\n"
)
JEST = (
    "describe('add', () => {\n  test('adds two numbers', () => { expect(1 + 1).toBe(3); });\n"
    "  test('keeps zero', () => { expect(0).toBe(0); });\n});\n"
)
VITEST = "import { describe, test, expect } from 'vitest';\n" + JEST
NODE = (
    "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\n"
    "test('adds two numbers', () => { assert.strictEqual(1 + 1, 3); });\n"
    "test('keeps zero', () => { assert.strictEqual(0, 0); });\n"
)


def check(output: str, name: str, detail: str, runner: str) -> None:
    assert failing_tests(output) == [name], output
    reason = failure_reason(output)
    assert reason.startswith(f"{name}: "), (reason, output)
    assert detail in reason, (reason, output)
    assert " at " not in reason and "node_modules" not in reason, reason
    assert parse_counts(output) == TestCounts(1, 1, 0, runner), output


def test_uvu_names_the_failing_test_and_its_assertion_not_a_stack_frame(tmp_path: Path) -> None:
    root = js_project(tmp_path, "add.test.mjs", UVU)
    output = run(["node_modules/.bin/uvu", "test"], root)
    assert 'FAIL  "adds two numbers"' in output  # uvu 0.5: no file on the FAIL line
    check(output, "adds two numbers", "Expected values to be strictly equal", "uvu")


def test_mocha_names_the_failing_test_and_its_assertion(tmp_path: Path) -> None:
    root = js_project(tmp_path, "add.test.js", MOCHA)
    output = run(["node_modules/.bin/mocha", "test"], root)
    check(output, "add adds two numbers", "Expected values to be strictly equal:; 2 !== 3", "mocha")


def test_jest_names_the_failing_test_and_its_expectation(tmp_path: Path) -> None:
    root = js_project(tmp_path, "add.test.js", JEST)
    output = run(["node_modules/.bin/jest", "--rootDir", "test", "--ci"], root)
    check(output, "add › adds two numbers", "Expected: 3; Received: 2", "jest")


def test_vitest_names_the_failing_test_and_its_assertion(tmp_path: Path) -> None:
    root = js_project(tmp_path, "add.test.mjs", VITEST)
    output = run(["node_modules/.bin/vitest", "run", "--root", "test"], root)
    check(output, "add.test.mjs > add > adds two numbers", "expected 2 to be 3", "vitest")


@pytest.mark.parametrize("reporter", [[], ["--test-reporter=spec"]], ids=["tap", "spec"])
def test_node_test_names_the_failing_test_and_its_assertion(
    tmp_path: Path, reporter: list[str]
) -> None:
    (tmp_path / "add.test.mjs").write_text(NODE)
    output = run(["node", "--test", *reporter, "add.test.mjs"], tmp_path)
    check(output, "adds two numbers", "2 !== 3", "node")


needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")

GO_TEST = (
    'package pal\n\nimport "testing"\n\nfunc TestIsPalindrome(t *testing.T) {\n'
    '\tif !IsPalindrome("aba") {\n\t\tt.Errorf("IsPalindrome(%q) = false, want true", "aba")\n'
    "\t}\n}\n"
)


def go_package(tmp_path: Path, implemented: bool) -> Path:
    (tmp_path / "go.mod").write_text("module example.com/pal\n\ngo 1.19\n")
    (tmp_path / "pal.go").write_text(
        "package pal\n\nfunc Reverse(s string) string { return s }\n"
        + ("\nfunc IsPalindrome(s string) bool { return false }\n" if implemented else "")
    )
    (tmp_path / "reverse_test.go").write_text(
        'package pal\n\nimport "testing"\n\nfunc TestReverse(t *testing.T) {\n'
        '\tif Reverse("aa") != "aa" {\n\t\tt.Fatal("Reverse")\n\t}\n}\n'
    )
    (tmp_path / "is_test.go").write_text(GO_TEST)
    return tmp_path


@needs_go
@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "v"])
def test_go_names_the_failing_test_and_its_message(tmp_path: Path, verbose: bool) -> None:
    root = go_package(tmp_path, implemented=True)
    output = run(["go", "test", *(["-v"] if verbose else []), "./..."], root)
    assert failing_tests(output) == ["TestIsPalindrome"], output
    assert failure_reason(output) == (
        'TestIsPalindrome: is_test.go:7: IsPalindrome("aba") = false, want true'
    ), output
    expected = TestCounts(1, 1, 0, "go") if verbose else None  # no passing test without -v
    assert parse_counts(output) == expected


@needs_go
def test_a_go_package_that_does_not_build_gives_its_compile_error(tmp_path: Path) -> None:
    root = go_package(tmp_path, implemented=False)
    output = run(["go", "test", "./..."], root)
    assert failing_tests(output) == []
    assert failure_reason(output) == "./is_test.go:6:6: undefined: IsPalindrome", output
    assert unbuilt_tests(output) == ["is_test.go"]
    assert parse_counts(output) is None


def rust_crate(tmp_path: Path) -> Path:
    (tmp_path / "Cargo.toml").write_text(
        '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib.rs").write_text(
        "pub fn add(a: i32, b: i32) -> i32 {\n    let unused = 0;\n    a + b\n}\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "add.rs").write_text(
        '#[test]\nfn adds() {\n    assert_eq!(calc::add(1, 1), 3, "one and one");\n}\n\n'
        "#[test]\nfn zero() {\n    assert_eq!(calc::add(0, 0), 0);\n}\n"
    )
    return tmp_path


@needs_cargo
def test_cargo_names_the_panicking_test_and_its_assertion(tmp_path: Path) -> None:
    root = rust_crate(tmp_path)
    output = run(["cargo", "test", "--offline", "--quiet"], root)
    assert failing_tests(output) == ["adds"], output
    reason = failure_reason(output)
    assert reason.startswith("adds: assertion `left == right` failed: one and one"), reason
    assert "tests/add.rs:3:5" in reason
    assert "to rerun" not in reason
    assert parse_counts(output) == TestCounts(1, 1, 0, "cargo")


@needs_cargo
def test_a_rust_test_that_does_not_build_gives_its_compile_error(tmp_path: Path) -> None:
    root = rust_crate(tmp_path)
    (root / "tests" / "mul.rs").write_text(
        "#[test]\nfn mul() {\n    assert_eq!(calc::mul(3, 4), 12);\n}\n"
    )
    output = run(["cargo", "test", "--offline"], root)
    assert "warning: unused variable" in output  # a warning's `-->` names no test file
    assert failure_reason(output) == "error[E0425]: cannot find function `mul` in crate `calc`"
    assert unbuilt_tests(output) == ["tests/mul.rs"]


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def node_project(tmp_path: Path, test: str, name: str = "mul.test.js") -> Path:
    (tmp_path / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / name).write_text(test)
    return tmp_path


@needs_node
def test_a_js_test_requiring_a_module_the_story_adds_is_named(tmp_path: Path) -> None:
    root = node_project(tmp_path, "const mul = require('../mul.js');\n")
    output = run(["node", "test/mul.test.js"], root)
    assert "Cannot find module '../mul.js'" in output, output
    assert unbuilt_tests(output, root) == ["test/mul.test.js"]
    assert unbuilt_tests(output) == []  # an absolute path is read only against its folder


@needs_node
def test_an_esm_test_importing_a_module_the_story_adds_is_named(tmp_path: Path) -> None:
    root = node_project(tmp_path, "import mul from '../mul.mjs';\n", "mul.test.mjs")
    output = run(["node", "test/mul.test.mjs"], root)
    assert "ERR_MODULE_NOT_FOUND" in output, output
    assert unbuilt_tests(output, root) == ["test/mul.test.mjs"]


@needs_node
def test_a_missing_package_or_a_non_test_file_is_never_set_aside(tmp_path: Path) -> None:
    """A package not installed is a broken set-up; a missing module required by the project's
    own code is not a new test: neither is a test-first base."""
    root = node_project(tmp_path, "require('left-pad-not-installed');\n")
    output = run(["node", "test/mul.test.js"], root)
    assert "Cannot find module 'left-pad-not-installed'" in output, output
    assert unbuilt_tests(output, root) == []
    (root / "index.js").write_text("require('./mul.js');\n")
    output = run(["node", "index.js"], root)
    assert "Cannot find module './mul.js'" in output, output
    assert unbuilt_tests(output, root) == []


def test_jest_names_the_requiring_test_relative_to_its_root() -> None:
    output = (
        "FAIL test/mul.test.js\n  ● Test suite failed to run\n\n"
        "    Cannot find module '../mul' from 'test/mul.test.js'\n"
    )
    assert unbuilt_tests(output) == ["test/mul.test.js"]
    assert unbuilt_tests("Cannot find module '../x' from 'node_modules/a/test/x.js'") == []
