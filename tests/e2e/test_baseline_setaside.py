"""Issue 33 case 4, end to end through the real CLI on a real Go module and a real Rust crate:
a test-first base whose new test names a function that does not exist yet does not compile, so
its run counts nothing. The judge runs the base again in a scratch tree without that test file
for the floor (and says so), or, where no count can be had (`go test` without `-v`), says
"pass-count floor off: <why>" on stderr and in the story's log; never silently. The story's
own worktree and the user's tree are never touched by it, and an honest agent reaches done."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.git_support import Repo, git, git_env, make_repo
from tests.support.held_support import start_at_implement
from tests.support.judge_rows_other import config_text
from tests.support.paths import FAKES
from tests.support.records import records_path

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]
needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed (golang-go)")
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")

AGENT = FAKES / "project_agent.py"
RUST_MUL_TEST = "#[test]\nfn mul() {\n    assert_eq!(calc::mul(3, 4), 12);\n}\n"
MUL_TEST = (
    'package calc\n\nimport "testing"\n\nfunc TestMul(t *testing.T) {\n'
    '\tif got := Mul(3, 4); got != 12 {\n\t\tt.Errorf("Mul(3, 4) = %d, want 12", got)\n\t}\n}\n'
)


def go_project(tmp_path: Path, verify: str) -> tuple[Repo, str]:
    """A Go module with a passing TestAdd and mul_test.go written first (Mul does not exist).
    Its `verify` says `-vet=off` as a user may: `go vet`, which `go test` runs by default, is a
    third of the Go toolchain's CPU here, and a base that does not build fails at compiling."""
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text("package calc\n\nfunc Add(a, b int) int { return a + b }\n")
    (root / "calc_test.go").write_text(
        'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n'
        '\tif Add(2, 3) != 5 {\n\t\tt.Fatal("Add(2, 3) != 5")\n\t}\n}\n'
    )
    (root / "mul_test.go").write_text(MUL_TEST)
    return configured(repo, tmp_path, verify, "honest-go")


def rust_project(tmp_path: Path) -> tuple[Repo, str]:
    """A Rust crate with passing integration tests and tests/mul.rs written first."""
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "Cargo.toml").write_text(
        '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (root / "src").mkdir()
    (root / "src" / "lib.rs").write_text("pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n")
    (root / "tests").mkdir()
    (root / "tests" / "add.rs").write_text(
        "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n\n"
        "#[test]\nfn zero() {\n    assert_eq!(calc::add(0, 0), 0);\n}\n"
    )
    (root / "tests" / "mul.rs").write_text(RUST_MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("target/\n")
    return configured(repo, tmp_path, "cargo test --offline", "honest-rust")


def configured(repo: Repo, tmp_path: Path, verify: str, behaviour: str) -> tuple[Repo, str]:
    """Committed, its config written whole (the agent and `verify.test`); the story added, its
    earlier phases marked done (the base's verification and the attempt are the promise)."""
    root = repo.root
    repo.commit_all("a failing test written first")
    log = records_path(root) / "agent.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    settings: dict[str, object] = {"verify.test": verify}
    (root / ".ai-sdlc" / "config.yaml").write_text(
        config_text(log, behaviour, settings, agent=AGENT)
    )
    sid = repo.story("Multiply numbers")
    start_at_implement(root, sid, status="in-progress")
    return repo, sid


def run(repo: Repo, sid: str) -> CliResult:
    return run_cli(repo.root, "run", sid, env={"AI_SDLC_PROVIDER": "command"}, timeout=300)


def events(root: Path, sid: str, action: str) -> list[dict[str, Any]]:
    """The story's logged events (`ai-sdlc log`) of `action`."""
    log = root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    found = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e for e in found if e.get("action") == action]


@needs_go
def test_a_go_base_that_does_not_build_gets_its_floor_with_the_new_test_set_aside(
    tmp_path: Path,
) -> None:
    repo, sid = go_project(tmp_path, "go test -vet=off -v ./...")

    result = run(repo, sid)

    assert result.returncode == 0, result.output
    said = " ".join(result.stderr.split())
    assert (
        "base verified: 1 passed, 0 failed, 0 skipped with mul_test.go set aside (new tests "
        "that do not build at the base: ./mul_test.go:6:12: undefined: Mul)"
    ) in said, result.stderr
    assert "pass-count floor off" not in said
    [aside] = events(repo.root, sid, "baseline_set_aside")
    assert aside["paths"] == ["mul_test.go"]
    assert aside["reason"] == "./mul_test.go:6:12: undefined: Mul"
    assert events(repo.root, sid, "floor_off") == []
    fm = StoryStore(repo.root).get(sid).frontmatter
    assert fm["status"] == "done"
    assert fm.get("total_recovery_attempts", 0) == 0
    # the user's tree and the story's branch keep the test written first
    assert (repo.root / "mul_test.go").read_text() == MUL_TEST
    branch = str(fm["branch"])
    assert git(repo.root, "show", f"{branch}:mul_test.go") == MUL_TEST


@needs_go
def test_where_no_floor_can_be_had_the_run_says_why(tmp_path: Path) -> None:
    repo, sid = go_project(tmp_path, "go test -vet=off ./...")

    result = run(repo, sid)

    assert result.returncode == 0, result.output
    said = " ".join(result.stderr.split())
    why = (
        "with mul_test.go set aside, `go test` prints no count of passing tests without -v "
        "(add -v to verify.test)"
    )
    assert f"pass-count floor off: {why}" in said, result.stderr
    assert [e["reason"] for e in events(repo.root, sid, "floor_off")] == [why]
    assert StoryStore(repo.root).get(sid).frontmatter["status"] == "done"


@needs_cargo
def test_a_rust_base_whose_new_integration_test_does_not_build_gets_its_floor(
    tmp_path: Path,
) -> None:
    repo, sid = rust_project(tmp_path)

    result = run(repo, sid)

    assert result.returncode == 0, result.output
    said = " ".join(result.stderr.split())
    assert (
        "base verified: 2 passed, 0 failed, 0 skipped with tests/mul.rs set aside (new tests "
        "that do not build at the base: error[E0425]: cannot find function `mul` in crate "
        "`calc`)"
    ) in said, result.stderr
    assert "pass-count floor off" not in said
    assert [e["paths"] for e in events(repo.root, sid, "baseline_set_aside")] == [["tests/mul.rs"]]
    fm = StoryStore(repo.root).get(sid).frontmatter
    assert fm["status"] == "done"
    assert (repo.root / "tests" / "mul.rs").read_text() == RUST_MUL_TEST
