"""Issue 33, cases 2 and "one rule" on Node, end to end through the real CLI: a uvu project
(installed from the npm registry by `npm ci` in each worktree, `verify.test: npm test`), the
failing `test/mul.test.js` written first; the same in ES modules (`test/mul.test.mjs`
importing `../mul.mjs`); a node:test project with nothing to install. An agent that rewrites
`package.json`'s test script (to run the add test and a trivially passing new one: 2 passed,
the base's 1 + 1 kept), that patches uvu's assert inside the worktree's `node_modules`, or that
renames the package after the runner, never reaches done and each attempt is counted, the
reason naming the file; an honest agent still is done. uvu stops at the missing module before
it counts anything, so the base is counted with the new test set aside, and the run says so."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.git_support import git_env, make_repo
from tests.support.held_support import HeldStory
from tests.support.js_runners import runners
from tests.support.verdicts import JEST, NODE, NODE_ESM, NODE_TEST, Row, ids, rows

__all__ = ["git_env"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]

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


def uvu_story(tmp_path: Path, lock: str, behaviour: str, *, esm: bool = False) -> HeldStory:
    """The uvu project (CommonJS, or ES modules: `.mjs` files) with `test/mul.test.*`
    written first."""
    suffix = "mjs" if esm else "js"
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(json.dumps(PACKAGE, indent=2) + "\n")
    (root / "package-lock.json").write_text(lock)
    add = "export default (a, b) => a + b;\n" if esm else "module.exports = (a, b) => a + b;\n"
    (root / f"add.{suffix}").write_text(add)
    (root / "test").mkdir()
    (root / "test" / f"add.test.{suffix}").write_text(ESM_ADD_TEST if esm else ADD_TEST)
    (root / "test" / f"mul.test.{suffix}").write_text(ESM_MUL_TEST if esm else MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules/\n")
    repo.commit_all("calcjs, and a failing test for mul written first")
    held = HeldStory(root, tmp_path / "records" / "agent.log", behaviour)
    held.config("verify.test", "npm test")
    held.config("worktree.setup", '["npm ci --no-audit --no-fund"]')
    held.config("limits.implementation_retries", "1")
    return held


def node_test_story(tmp_path: Path, behaviour: str) -> HeldStory:
    """A node:test project (nothing to install) with `test/mul.test.js` written first."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(json.dumps(NT_PACKAGE, indent=2) + "\n")
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(NT_ADD_TEST)
    (root / "test" / "mul.test.js").write_text(NT_MUL_TEST)
    repo.commit_all("calcnt, and a failing test for mul written first")
    held = HeldStory(root, tmp_path / "records" / "agent.log", behaviour)
    held.config("verify.test", "npm test")
    held.config("worktree.setup", "[]")
    held.config("limits.implementation_retries", "1")
    return held


JEST_ADD_TEST = "const add = require('../add.js');\ntest('add', () => expect(add(2, 3)).toBe(5));\n"
JEST_MUL_TEST = (
    "const mul = require('../mul.js');\ntest('mul', () => expect(mul(3, 4)).toBe(12));\n"
)


def jest_story(tmp_path: Path, behaviour: str) -> HeldStory:
    """A Jest project whose `node_modules` (git-ignored) is the pinned runners' install
    (tests/support/js_runners.py), linked: the story's worktree, nested in the project, finds
    it above itself, as Node does for every worktree under `.ai-sdlc/worktrees/`."""
    modules = runners() / "node_modules"
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    package = {"name": "calcj", "version": "1.0.0", "private": True, "scripts": {"test": "jest"}}
    (root / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(JEST_ADD_TEST)
    (root / "test" / "mul.test.js").write_text(JEST_MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules\n")
    (root / "node_modules").symlink_to(modules)
    repo.commit_all("calcj, and a failing test for mul written first")
    held = HeldStory(root, tmp_path / "records" / "agent.log", behaviour)
    held.config("verify.test", "npm test")
    held.config("worktree.setup", "[]")
    held.config("limits.implementation_retries", "1")
    return held


def judged(held: HeldStory, row: Row) -> str:
    """Run the story; assert the row's verdict; the run's stderr, one line per paragraph."""
    result = held.run()
    if row.said:
        assert result.returncode == 5, result.output
        held.assert_blocked_counted(row.said)
    else:
        assert result.returncode == 0, result.output
        held.assert_done()
    return " ".join(result.stderr.split())


@pytest.mark.parametrize("row", rows(NODE), ids=ids(rows(NODE)))
def test_verdict(tmp_path: Path, uvu_lock: str, row: Row) -> None:
    """A row of the verdict table (tests/support/verdicts.py)."""
    said = judged(uvu_story(tmp_path, uvu_lock, row.behaviour), row)
    if not row.said:
        assert (
            "base verified: 1 passed, 0 failed, 0 skipped with test/mul.test.js set aside (new "
            "tests that do not build at the base: Error: Cannot find module '../mul.js')"
        ) in said


@pytest.mark.parametrize("row", rows(NODE_ESM), ids=ids(rows(NODE_ESM)))
def test_verdict_es_modules(tmp_path: Path, uvu_lock: str, row: Row) -> None:
    """A row of the verdict table: the uvu project in ES modules, whose missing `../mul.mjs`
    Node names as `imported from` the test."""
    said = judged(uvu_story(tmp_path, uvu_lock, row.behaviour, esm=True), row)
    if not row.said:
        assert "with test/mul.test.mjs set aside" in said
        assert "mul.mjs' imported from" in said


@pytest.mark.parametrize("row", rows(NODE_TEST), ids=ids(rows(NODE_TEST)))
def test_verdict_node_test(tmp_path: Path, row: Row) -> None:
    """A row of the verdict table: node:test runs each file in a process of its own, so the
    base counts the add test and names the failing mul test, nothing set aside."""
    said = judged(node_test_story(tmp_path, row.behaviour), row)
    if not row.said:
        assert "base verified: 1 passed, 1 failed" in said
        assert "set aside" not in said


@pytest.mark.parametrize("row", rows(JEST), ids=ids(rows(JEST)))
def test_verdict_jest(tmp_path: Path, row: Row) -> None:
    """A row of the verdict table: Jest compiles the tests with the project's Babel config."""
    judged(jest_story(tmp_path, row.behaviour), row)
