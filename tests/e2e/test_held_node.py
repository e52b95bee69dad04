"""Issue 33, cases 2 and "one rule" on Node, end to end through the real CLI: a uvu project
(installed from the npm registry by `npm ci` in each worktree, `verify.test: npm test`), the
failing `test/mul.test.js` written first; the same in ES modules (`test/mul.test.mjs`
importing `../mul.mjs`); a node:test project with nothing to install. An agent that rewrites
`package.json`'s test script (to run the add test and a trivially passing new one: 2 passed,
the base's 1 + 1 kept), that patches uvu's assert inside the worktree's `node_modules`, or that
renames the package after the runner, never reaches done and each attempt is counted, the
reason naming the file; an honest agent still is done. uvu stops at the missing module before
it counts anything, so the base is counted with the new test set aside, and the run says so.

One test per layout runs its rows in turn: the project built once and its honest row run
first, its baseline then reused by every held row's own copy
(tests/support/judge_rows_other.py); one held row counts both attempts, the others their one."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.git_support import git_env
from tests.support.js_runners import runners
from tests.support.judge_rows_other import Layout, judge_rows
from tests.support.verdicts import JEST, NODE, NODE_ESM, NODE_TEST, rows

__all__ = ["git_env"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]
#: The held row whose run counts both attempts (what is counted does not depend on the
#: layout or the game: every other row stops after its one attempt).
TWO_ATTEMPTS = rows(NODE_TEST)[1]

PACKAGE = {
    "name": "calcjs",
    "version": "1.0.0",
    "private": True,
    "scripts": {"test": "uvu test"},
    "devDependencies": {"uvu": "0.5.6"},
}
ADD_TEST = (
    "const { test } = require('uvu');\nconst assert = require('uvu/assert');\n"
    "const add = require('../add.js');\n"
    "test('add', () => { assert.is(add(2, 3), 5); });\ntest.run();\n"
)
MUL_TEST = (
    "const { test } = require('uvu');\nconst assert = require('uvu/assert');\n"
    "const mul = require('../mul.js');\n"
    "test('mul', () => { assert.is(mul(3, 4), 12); });\ntest.run();\n"
)

ESM_ADD_TEST = (
    "import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\n"
    "import add from '../add.mjs';\n"
    "test('add', () => { assert.is(add(2, 3), 5); });\ntest.run();\n"
)
ESM_MUL_TEST = (
    "import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\n"
    "import mul from '../mul.mjs';\n"
    "test('mul', () => { assert.is(mul(3, 4), 12); });\ntest.run();\n"
)
NT_PACKAGE = {
    "name": "calcnt",
    "version": "1.0.0",
    "private": True,
    "scripts": {"test": "node --test"},
}
NT_ADD_TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const add = require('../add.js');\ntest('add', () => assert.strictEqual(add(2, 3), 5));\n"
)
NT_MUL_TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const mul = require('../mul.js');\ntest('mul', () => assert.strictEqual(mul(3, 4), 12));\n"
)


@pytest.fixture(scope="session")
def uvu_lock(tmp_path_factory: pytest.TempPathFactory) -> str:
    """package-lock.json of the uvu project, made once by `npm install` (which also warms npm's
    cache); skipped, with the reason, where npm or its registry cannot be reached."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed")
    folder = tmp_path_factory.mktemp("uvu-template")
    (folder / "package.json").write_text(json.dumps(PACKAGE))
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund"],
            cwd=folder, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("npm install timed out: the npm registry is not reachable from here")
    if done.returncode != 0:
        pytest.skip(f"npm install failed (registry unreachable?): {done.stderr.strip()[-300:]}")
    return (folder / "package-lock.json").read_text()


def uvu_project(lock: str, *, esm: bool = False) -> Callable[[Path], None]:
    """The uvu project (CommonJS, or ES modules: `.mjs` files) with `test/mul.test.*`
    written first."""
    suffix = "mjs" if esm else "js"

    def build(root: Path) -> None:
        (root / "package.json").write_text(json.dumps(PACKAGE, indent=2) + "\n")
        (root / "package-lock.json").write_text(lock)
        add = "export default (a, b) => a + b;\n" if esm else "module.exports = (a, b) => a + b;\n"
        (root / f"add.{suffix}").write_text(add)
        (root / "test").mkdir()
        (root / "test" / f"add.test.{suffix}").write_text(ESM_ADD_TEST if esm else ADD_TEST)
        (root / "test" / f"mul.test.{suffix}").write_text(ESM_MUL_TEST if esm else MUL_TEST)
        with open(root / ".gitignore", "a") as handle:
            handle.write("node_modules/\n")

    return build


def node_test_project(root: Path) -> None:
    """A node:test project (nothing to install) with `test/mul.test.js` written first."""
    (root / "package.json").write_text(json.dumps(NT_PACKAGE, indent=2) + "\n")
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(NT_ADD_TEST)
    (root / "test" / "mul.test.js").write_text(NT_MUL_TEST)


JEST_ADD_TEST = "const add = require('../add.js');\ntest('add', () => expect(add(2, 3)).toBe(5));\n"
JEST_MUL_TEST = (
    "const mul = require('../mul.js');\ntest('mul', () => expect(mul(3, 4)).toBe(12));\n"
)


def jest_project(root: Path) -> None:
    """A Jest project whose `node_modules` (git-ignored) is the pinned runners' install
    (tests/support/js_runners.py), linked: the story's worktree, nested in the project, finds
    it above itself, as Node does for every worktree under `.ai-sdlc/worktrees/`; its
    `jest.setup.js` (a comment) runs before each test file."""
    modules = runners() / "node_modules"
    package = {
        "name": "calcj",
        "version": "1.0.0",
        "private": True,
        "scripts": {"test": "jest"},
        "jest": {"setupFilesAfterEnv": ["<rootDir>/jest.setup.js"]},
    }
    (root / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    (root / "jest.setup.js").write_text("// set-up Jest runs before each test file\n")
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(JEST_ADD_TEST)
    (root / "test" / "mul.test.js").write_text(JEST_MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules\n")
    (root / "node_modules").symlink_to(modules)


NPM_TEST: dict[str, object] = {"verify.test": "npm test", "worktree.setup": []}
NPM_CI: dict[str, object] = {**NPM_TEST, "worktree.setup": ["npm ci --no-audit --no-fund"]}


def needs_node() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")


def layout(
    tmp_path: Path,
    build: Callable[[Path], None],
    settings: dict[str, object],
    *,
    from_refine: bool = False,
) -> Layout:
    """The layout's project, built once; its honest row from refine (`from_refine`) or from
    implement."""
    return Layout(tmp_path / "layout", build, settings, honest_at_implement=not from_refine)


def test_verdict(tmp_path: Path, uvu_lock: str) -> None:
    """The uvu project's rows of the verdict table (tests/support/verdicts.py); uvu stops at
    the missing module, so the base is counted with the new test set aside."""

    def said(text: str) -> None:
        assert (
            "base verified: 1 passed, 0 failed, 0 skipped with test/mul.test.js set aside (new "
            "tests that do not build at the base: Error: Cannot find module '../mul.js')"
        ) in text

    made = layout(tmp_path, uvu_project(uvu_lock), NPM_CI)
    judge_rows(tmp_path, made, rows(NODE), honest_said=said)


def test_verdict_es_modules(tmp_path: Path, uvu_lock: str) -> None:
    """The rows of the verdict table for the uvu project in ES modules, whose missing
    `../mul.mjs` Node names as `imported from` the test."""

    def said(text: str) -> None:
        assert "with test/mul.test.mjs set aside" in text
        assert "mul.mjs' imported from" in text

    made = layout(tmp_path, uvu_project(uvu_lock, esm=True), NPM_CI)
    judge_rows(tmp_path, made, rows(NODE_ESM), honest_said=said)


def test_verdict_node_test(tmp_path: Path) -> None:
    """The rows of the verdict table for node:test, which runs each file in a process of its
    own: the base counts the add test and names the failing mul test, nothing set aside."""
    needs_node()

    def said(text: str) -> None:
        assert "base verified: 1 passed, 1 failed" in text
        assert "set aside" not in text

    made = layout(tmp_path, node_test_project, NPM_TEST, from_refine=True)
    judge_rows(tmp_path, made, rows(NODE_TEST), two_attempts=TWO_ATTEMPTS, honest_said=said)


def test_verdict_jest(tmp_path: Path) -> None:
    """The rows of the verdict table for Jest, which compiles the tests with the project's
    Babel config."""
    made = layout(tmp_path, jest_project, NPM_TEST)
    judge_rows(tmp_path, made, rows(JEST))
