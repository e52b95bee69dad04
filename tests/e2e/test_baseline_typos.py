"""Issue 33, "a base that ran nothing is not a baseline", end to end through the real CLI: a
typo after the program name in `verify.test` (`python -m pytset`, `npm run tset`, `cargo tset`,
`go tset`) counts no test and names none, so the story stops before any agent call with exit 3,
nothing counted, the command's own error line quoted (never npm's log-file pointer).

Each layout is a real project as a user has it (the src-layout Python package installed
editable into its own `.venv`; a Node package with a `test` script; a Rust crate; a Go module),
committed with a failing test written first, its set-up as `ai-sdlc init` proposes it. Rust and
Go are skipped, with the reason, where their toolchain is not installed."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.git_support import Repo, git_env, make_repo
from tests.support.paths import FAKES
from tests.support.worktree_env_support import calc_project

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

AGENT = FAKES / "project_agent.py"


def python_project(tmp_path: Path) -> Repo:
    repo = calc_project(tmp_path)
    (repo.root / "tests" / "test_mul.py").write_text(
        "from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
    )
    return repo


def node_project(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(
        json.dumps({"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}})
    )
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "mul.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const mul = require('../mul.js');\ntest('mul', () => assert.strictEqual(mul(3, 4), 12));\n"
    )
    return repo


def rust_project(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "Cargo.toml").write_text(
        '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
    )
    (root / "src").mkdir()
    (root / "src" / "lib.rs").write_text("pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n")
    (root / "tests").mkdir()
    (root / "tests" / "mul.rs").write_text(
        "#[test]\nfn mul() {\n    assert_eq!(calc::mul(3, 4), 12);\n}\n"
    )
    with open(root / ".gitignore", "a") as handle:
        handle.write("target/\n")
    return repo


def go_project(tmp_path: Path) -> Repo:
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text("package calc\n\nfunc Add(a, b int) int { return a + b }\n")
    (root / "mul_test.go").write_text(
        'package calc\n\nimport "testing"\n\nfunc TestMul(t *testing.T) {\n'
        '\tif Mul(3, 4) != 12 {\n\t\tt.Fatal("Mul(3, 4) != 12")\n\t}\n}\n'
    )
    return repo


#: layout → (project, the program it needs, the misspelt verify.test, the error line quoted)
LAYOUTS: dict[str, tuple[Callable[[Path], Repo], str, str, str]] = {
    "python": (python_project, "", ".venv/bin/python -m pytset -q", "No module named pytset"),
    "node": (node_project, "npm", "npm run tset", 'Missing script: "tset"'),
    "rust": (rust_project, "cargo", "cargo tset", "no such command: `tset`"),
    "go": (go_project, "go", "go tset", "go tset: unknown command"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_misspelt_test_command_stops_before_any_agent_call_nothing_counted(
    tmp_path: Path, layout: str
) -> None:
    make, program, command, said = LAYOUTS[layout]
    if program and shutil.which(program) is None:
        pytest.skip(f"{program} is not installed here (the {layout} toolchain)")
    repo = make(tmp_path)
    repo.commit_all("a failing test, written first")
    root = repo.root
    (root / ".ai-sdlc" / "config.yaml").unlink(missing_ok=True)
    assert run_cli(root, "init").returncode == 0
    log = tmp_path / "agent.log"
    template = [sys.executable, str(AGENT), str(log), "honest-py", "{phase}", "{prompt_file}"]
    # The file `init` wrote, edited by hand (one write, not three `ai-sdlc config` calls).
    config = root / ".ai-sdlc" / "config.yaml"
    text = config.read_text()
    agent = f"  provider: command\n  command:\n    template: {json.dumps(template)}\n"
    edits = {
        "  provider: null\n": agent,
        "  test: null\n": f"  test: {json.dumps(command)}\n",
    }
    for before, after in edits.items():
        assert text.count(before) == 1, text
        text = text.replace(before, after)
    config.write_text(text)
    sid = repo.story("Multiply numbers")

    result = run_cli(root, "run", sid, env={"AI_SDLC_PROVIDER": "command"}, timeout=300)

    assert result.returncode == 3, result.output
    message = " ".join(result.stderr.split())
    assert "verification fails before any change" in message, result.stderr
    assert "counted no test and named no failing test" in message, result.stderr
    assert said in message, result.stderr
    assert "complete log of this run" not in message
    assert "base verified" not in result.output
    assert "Traceback" not in result.output
    assert not log.exists()  # no agent was ever started
    fm = StoryStore(root).get(sid).frontmatter
    assert fm.get("total_recovery_attempts", 0) == 0
    assert not fm.get("recovery_breakdown")
    assert fm["status"] != "blocked"
    events = root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    lines = events.read_text().splitlines() if events.exists() else []
    assert not [ln for ln in lines if '"recovery"' in ln]
