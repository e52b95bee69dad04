"""Issue 33, case 10's set-up half, end to end through the real CLI on a Node project laid out
as clsx is: `package-lock.json` on disk but ignored by `.gitignore`, so no story worktree has
it. `init` proposes no set-up that needs it (`npm install --no-package-lock`, not `npm ci`) and
says why; and where a user sets `npm ci` anyway, the stop quotes npm's line that names the
cause ("can only install with an existing package-lock.json"), not its log-file pointer."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.git_support import Repo, git_env, make_repo
from tests.support.paths import FAKES

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed"),
]

AGENT = FAKES / "project_agent.py"


def clsx_like(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(
        json.dumps({"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}})
    )
    (root / "package-lock.json").write_text(
        json.dumps({"name": "calc", "version": "1.0.0", "lockfileVersion": 3, "packages": {}})
    )
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules/\npackage-lock.json\n")
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const add = require('../add.js');\ntest('add', () => assert.strictEqual(add(2, 3), 5));\n"
    )
    repo.commit_all("calc, its lock file ignored")
    (root / ".ai-sdlc" / "config.yaml").unlink(missing_ok=True)
    return repo


def test_init_proposes_no_install_that_needs_an_ignored_lock_file_and_says_why(
    tmp_path: Path,
) -> None:
    repo = clsx_like(tmp_path)

    shown = run_cli(repo.root, "init")
    again = run_cli(repo.root, "init", "--json")  # already initialised: proposes nothing new

    assert shown.returncode == 0, shown.output
    said = " ".join(shown.stderr.split())
    line = (repo.root / ".gitignore").read_text().splitlines().index("package-lock.json") + 1
    assert (
        f"package-lock.json is ignored by git (.gitignore:{line}: package-lock.json), so a "
        "story worktree has none: `npm ci` is not proposed"
    ) in said, shown.stderr
    assert "worktree.setup: npm install --no-package-lock (for package.json)" in said
    config = (repo.root / ".ai-sdlc" / "config.yaml").read_text()
    assert '  setup: ["npm install --no-package-lock"]' in config
    assert "npm ci" not in config
    assert json.loads(again.stdout)["worktree_setup"] == []


def test_a_failing_setup_quotes_the_line_that_names_the_cause(tmp_path: Path) -> None:
    repo = clsx_like(tmp_path)
    root = repo.root
    assert run_cli(root, "init").returncode == 0
    log = tmp_path / "agent.log"
    template = [sys.executable, str(AGENT), str(log), "honest-js", "{phase}", "{prompt_file}"]
    for key, value in (
        ("ai.provider", "command"),
        ("ai.command.template", json.dumps(template)),
        ("verify.test", "npm test"),
        ("worktree.setup", '["npm ci"]'),  # what init proposed before
    ):
        done = run_cli(root, "config", key, value)
        assert done.returncode == 0, done.output
    sid = repo.story("Multiply numbers")

    result = run_cli(root, "run", sid, env={"AI_SDLC_PROVIDER": "command"}, timeout=300)

    assert result.returncode == 3, result.output
    first = next(ln for ln in result.stderr.splitlines() if "worktree setup failed" in ln)
    assert first.endswith(
        "`npm ci` failed: npm error The `npm ci` command can only install with an existing "
        "package-lock.json or"
    ), result.stderr
    assert "Traceback" not in result.output
    assert not log.exists()  # no agent was started
    assert StoryStore(root).get(sid).frontmatter.get("total_recovery_attempts", 0) == 0
