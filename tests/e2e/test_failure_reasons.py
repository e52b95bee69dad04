"""Issue 33 case 10, end to end through the real CLI: a story blocked by its failing tests
says which test failed and why, read from the real runner's report, never a stack frame of
the assertion library (uvu's `at Proxy.is (…/uvu/assert/index.js…)`) or a bare test name or
package header (Go). A uvu project (uvu from the npm registry, pinned and cached:
tests/support/js_runners.py) and a Go module; each skipped, with the reason, without its tool."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.git_support import Repo, git_env, make_repo
from tests.support.held_support import start_at_implement
from tests.support.js_runners import runners
from tests.support.judge_rows_other import config_text
from tests.support.paths import FAKES
from tests.support.records import records_path

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

AGENT = FAKES / "project_agent.py"


def blocked_by(repo: Repo, tmp_path: Path, verify: str, behaviour: str) -> str:
    """Run the story (its config written whole, its earlier phases marked done, one attempt)
    with the agent `behaviour` to its block; the story's blocked reason."""
    root = repo.root
    log = records_path(root) / "agent.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    settings: dict[str, object] = {
        "verify.test": verify,
        "worktree.setup": [],
        "limits.implementation_retries": 0,
    }
    (root / ".ai-sdlc" / "config.yaml").write_text(
        config_text(log, behaviour, settings, agent=AGENT)
    )
    sid = repo.story("Change the numbers")
    start_at_implement(root, sid, status="in-progress")
    result = run_cli(root, "run", sid, env={"AI_SDLC_PROVIDER": "command"}, timeout=300)
    assert result.returncode == 5, result.output
    fm = StoryStore(root).get(sid).frontmatter
    assert fm["status"] == "blocked"
    return " ".join(str(fm["blocked_reason"]).split())


def test_uvu_a_blocked_story_names_the_failing_test_and_its_assertion(tmp_path: Path) -> None:
    folder = runners()
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(
        json.dumps({"name": "calc", "version": "1.0.0", "scripts": {"test": "uvu test"}})
    )
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(
        "const { test } = require('uvu');\nconst assert = require('uvu/assert');\n"
        "const add = require('../add.js');\n"
        "test('adds two numbers', () => { assert.is(add(2, 3), 5); });\ntest.run();\n"
    )
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules\n")
    (root / "node_modules").symlink_to(folder / "node_modules")
    repo.commit_all("calc with uvu")

    reason = blocked_by(repo, tmp_path, "npm test", "break-js")

    assert "adds two numbers: Expected values to be strictly equal: (is)" in reason, reason
    assert "uvu/assert" not in reason and "at Proxy" not in reason


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed (golang-go)")
def test_go_a_blocked_story_names_the_failing_test_and_its_message(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text("package calc\n\nfunc Add(a, b int) int { return a + b }\n")
    (root / "mul_test.go").write_text(
        'package calc\n\nimport "testing"\n\nfunc TestMul(t *testing.T) {\n'
        '\tif got := Mul(3, 4); got != 12 {\n\t\tt.Errorf("Mul(3, 4) = %d, want 12", got)\n'
        "\t}\n}\n"
    )
    repo.commit_all("a failing test for Mul written first")

    reason = blocked_by(repo, tmp_path, "go test -v ./...", "wrong-go")

    assert "TestMul: mul_test.go:7: Mul(3, 4) = 7, want 12" in reason, reason
