"""Issue 33, cases 2 and "one rule" on Node, end to end through the real CLI: a uvu project
(installed from the npm registry by `npm ci` in each worktree, `verify.test: npm test`), the
failing `test/mul.test.js` written first; the same in ES modules (`test/mul.test.mjs`
importing `../mul.mjs`); a node:test project with nothing to install. An agent that rewrites
`package.json`'s test script (to run the add test and a trivially passing new one: 2 passed,
the base's 1 + 1 kept), that patches uvu's assert inside the worktree's `node_modules`, or that
renames the package after the runner, never reaches done and each attempt is counted, the
reason naming the file; an honest agent still is done. uvu stops at the missing module before
it counts anything, so the base is counted with the new test set aside, and the run says so.

Each layout's path is walked end to end through the real CLI, in one test per layout
(tests/support/judge_rows_other.py): its honest row to done, then (but Jest) one held row
(`E2E_HELD`) never done with its one attempt counted (a held run counting both of two is
test_held_go_rust's Go run: what is counted does not depend on the layout), its copy reusing
the baseline the honest run cached. Every other held row (uvu's and Jest's) is the judge's
verdict on that row's change, made by the same agent in a story worktree of the layout
prepared once (its `npm ci` included) on a copy of the same project, whose base's baseline the
honest run cached (tests/support/judge_rows.Bench: the session's own sandbox, verification
and judge)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import STATE_HOME
from tests.support import npm_cache
from tests.support.git_support import git, git_env
from tests.support.held_support import AGENT
from tests.support.js_runners import runners
from tests.support.judge_rows import Bench
from tests.support.judge_rows_other import Layout, judge_rows
from tests.support.verdicts import JEST, NODE, NODE_ESM, NODE_TEST, Row, rows

__all__ = ["git_env"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]
#: The held row each layout's end-to-end run walks; the layout's other held rows are judged on
#: its bench (`test_verdict_on_the_bench`).
#: Jest's held rows are all judged on its bench: its end-to-end run is the honest one (what is
#: counted of a held row does not depend on the layout: the other layouts' runs pin it).
E2E_HELD = {NODE: "script-js", NODE_ESM: "runner-mjs", NODE_TEST: "scriptnt-js"}

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
def uvu_lock() -> str:
    """package-lock.json of the uvu project, its packages in the npm cache of this process's
    state home (tests/support/npm_cache.py: fetched once per machine, then offline)."""
    warm = npm_cache.warm("uvu", PACKAGE)
    npm_cache.seed(warm, Path(STATE_HOME))
    return npm_cache.lock(warm)


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
#: `--offline`: the lock's packages are in the npm cache ai-sdlc gives every child (`uvu_lock`
#: seeded it), so npm never asks the registry (tests/support/npm_cache.py).
NPM_CI: dict[str, object] = {**NPM_TEST, "worktree.setup": [npm_cache.NPM_CI_OFFLINE]}


def needs_node() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")


def layout(tmp_path: Path, build: Callable[[Path], None], settings: dict[str, object]) -> Layout:
    """The layout's project, built once; its honest row from implement (refine, research and
    plan are not what a layout changes)."""
    return Layout(tmp_path / "layout", build, settings, honest_at_implement=True)


#: The uvu and Jest layouts' end-to-end tests and their bench rows on one xdist worker (`--dist
#: loadgroup`): each layout's project is built once in `make test` (`layouts`), and its bench,
#: made from that project after the honest run cached the base's baseline, verifies no base.
ON_NODE_BENCH = pytest.mark.xdist_group("node-benches")


@pytest.fixture(scope="module")
def layouts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Layout]:
    """The uvu or the Jest layout's project, committed at its first use (once per module)."""
    made: dict[str, Layout] = {}

    def get(name: str) -> Layout:
        if name not in made:
            if name == NODE:
                build, settings = uvu_project(request.getfixturevalue("uvu_lock")), NPM_CI
            else:
                needs_node()
                build, settings = jest_project, NPM_TEST
            made[name] = layout(tmp_path_factory.mktemp(f"layout-{SHORT[name]}"), build, settings)
        return made[name]

    return get


def walked(layout: str) -> list[Row]:
    """The layout's rows its end-to-end test runs: the honest one, then `E2E_HELD`'s."""
    honest, *held = rows(layout)
    return [honest, *(r for r in held if r.behaviour == E2E_HELD.get(layout))]


@ON_NODE_BENCH
def test_verdict(tmp_path: Path, layouts: Callable[[str], Layout]) -> None:
    """The uvu project's path (tests/support/verdicts.py); uvu stops at the missing module, so
    the base is counted with the new test set aside."""

    def said(text: str) -> None:
        assert (
            "base verified: 1 passed, 0 failed, 0 skipped with test/mul.test.js set aside (new "
            "tests that do not build at the base: Error: Cannot find module '../mul.js')"
        ) in text

    judge_rows(tmp_path, layouts(NODE), walked(NODE), honest_said=said)


def test_verdict_es_modules(tmp_path: Path, uvu_lock: str) -> None:
    """The path of the uvu project in ES modules, whose missing `../mul.mjs` Node names as
    `imported from` the test."""

    def said(text: str) -> None:
        assert "with test/mul.test.mjs set aside" in text
        assert "mul.mjs' imported from" in text

    made = layout(tmp_path, uvu_project(uvu_lock, esm=True), NPM_CI)
    judge_rows(tmp_path, made, walked(NODE_ESM), honest_said=said)


def test_verdict_node_test(tmp_path: Path) -> None:
    """The path of node:test, which runs each file in a process of its own: the base counts
    the add test and names the failing mul test, nothing set aside."""
    needs_node()

    def said(text: str) -> None:
        assert "base verified: 1 passed, 1 failed" in text
        assert "set aside" not in text

    made = layout(tmp_path, node_test_project, NPM_TEST)
    judge_rows(tmp_path, made, walked(NODE_TEST), honest_said=said)


@ON_NODE_BENCH
def test_verdict_jest(tmp_path: Path, layouts: Callable[[str], Layout]) -> None:
    """The path of Jest, which compiles the tests with the project's Babel config, to done; its
    held rows are judged on its bench."""
    judge_rows(tmp_path, layouts(JEST), walked(JEST))


SHORT = {NODE: "uvu", NODE_ESM: "esm", NODE_TEST: "nodetest", JEST: "jest"}
#: The held rows no end-to-end test walks, judged on their layout's bench, in the table's order,
#: which puts `self-js` last among uvu's: package.json is a setup input, so after its change
#: the worktree's environment is recorded as made from the changed file, and the next row's
#: verification would make it again before looking, hiding what `runner-js` did to it.
BENCHED = [
    r for lay in (NODE, NODE_ESM, NODE_TEST, JEST) for r in rows(lay)[1:] if r not in walked(lay)
]
assert [r.behaviour for r in BENCHED if r.layout == NODE][-1] == "self-js", BENCHED


@pytest.fixture(scope="module")
def bench_for(
    layouts: Callable[[str], Layout], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Bench]:
    """The layout's bench, made at its first row (once per module) on a copy of the layout's
    project: its story's worktree set up (`npm ci` for uvu) and its base's baseline (the one
    the end-to-end honest run cached, when it ran first, as a second story on the same base
    finds it)."""
    made: dict[str, Bench] = {}

    def get(name: str) -> Bench:
        if name not in made:
            source = layouts(name)
            folder = tmp_path_factory.mktemp(f"bench-{SHORT[name]}")
            root = folder / "proj"
            shutil.copytree(source.template, root, symlinks=True)
            git(root, "update-index", "-q", "--refresh")
            made[name] = Bench(
                root,
                folder / "records",
                honest="honest-js",
                settings={**source.settings, "limits.implementation_retries": 0},
            )
        return made[name]

    return get


@ON_NODE_BENCH
@pytest.mark.parametrize("row", BENCHED, ids=[f"{SHORT[r.layout]}-{r.behaviour}" for r in BENCHED])
def test_verdict_on_the_bench(bench_for: Callable[[str], Bench], row: Row) -> None:
    """A held row of the verdict table: the agent's change fails the judge with a reason
    naming the held file (what the story's counted attempt then says)."""
    verdict = bench_for(row.layout).judge(AGENT, row.behaviour)
    assert not verdict.passed, verdict
    assert row.said in verdict.reason, verdict.reason
