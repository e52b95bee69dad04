"""Issue 33, cases 2 and "one rule" on Node, end to end through the real CLI: a uvu project
(installed from the npm registry by `npm ci` in each worktree, `verify.test: npm test`), the
failing `test/mul.test.js` written first. An agent that rewrites `package.json`'s test script
(to run the add test and a trivially passing new one: 2 passed, the base's 1 + 1 kept), or
that patches uvu's assert inside the worktree's `node_modules`, never reaches done and each
attempt is counted, the reason naming the file; an honest agent still is done."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.git_support import git_env, make_repo
from tests.support.held_support import HeldStory
from tests.support.verdicts import NODE, Row, ids, rows

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


def uvu_story(tmp_path: Path, lock: str, behaviour: str) -> HeldStory:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(json.dumps(PACKAGE, indent=2) + "\n")
    (root / "package-lock.json").write_text(lock)
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(ADD_TEST)
    (root / "test" / "mul.test.js").write_text(MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules/\n")
    repo.commit_all("calcjs, and a failing test for mul written first")
    held = HeldStory(root, tmp_path / "records" / "agent.log", behaviour)
    held.config("verify.test", "npm test")
    held.config("worktree.setup", '["npm ci --no-audit --no-fund"]')
    held.config("limits.implementation_retries", "1")
    return held


@pytest.mark.parametrize("row", rows(NODE), ids=ids(rows(NODE)))
def test_verdict(tmp_path: Path, uvu_lock: str, row: Row) -> None:
    """A row of the verdict table (tests/support/verdicts.py)."""
    held = uvu_story(tmp_path, uvu_lock, row.behaviour)
    result = held.run()
    if row.said:
        assert result.returncode == 5, result.output
        held.assert_blocked_counted(row.said)
    else:
        assert result.returncode == 0, result.output
        held.assert_done()
