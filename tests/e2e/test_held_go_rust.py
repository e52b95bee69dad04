"""Issue 33, case 3 and "one rule" on Go and Rust, end to end through the real CLI: a Go module
(`go test -v ./...`) and a Rust crate (`cargo test`), each with the failing test written first
(it does not compile at the base: the function is missing). A new `TestMain` that exits 0, or
`autotests = false` in Cargo.toml (the integration tests never built), with a wrong
implementation never reaches done, each attempt counted with the held file named; an honest
agent still is done. Skipped, with the reason, where the toolchain is not installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.git_support import git_env, make_repo
from tests.support.held_support import HeldStory
from tests.support.verdicts import GO, RUST, Row, rows

__all__ = ["git_env"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]

GO_ADD = "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n"
GO_ADD_TEST = (
    'package calc\n\nimport "testing"\n\n'
    'func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("add")\n\t}\n}\n'
)
GO_MUL_TEST = (
    'package calc\n\nimport "testing"\n\n'
    "func TestMul(t *testing.T) {\n\tif got := Mul(3, 4); got != 12 {\n"
    '\t\tt.Fatalf("Mul(3, 4) = %d, want 12", got)\n\t}\n}\n'
)
RS_LIB = (
    "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\n"
    "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n"
    "        assert_eq!(super::add(2, 3), 5);\n    }\n}\n"
)
RS_MUL_TEST = "#[test]\nfn multiplies() {\n    assert_eq!(calc::mul(3, 4), 12);\n}\n"


def go_story(tmp_path: Path, behaviour: str) -> HeldStory:
    if shutil.which("go") is None:
        pytest.skip("go is not installed (apt-get install golang-go)")
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text(GO_ADD)
    (root / "calc_test.go").write_text(GO_ADD_TEST)
    (root / "mul_test.go").write_text(GO_MUL_TEST)
    repo.commit_all("calc, and a failing test for Mul written first")
    held = HeldStory(root, tmp_path / "records" / "agent.log", behaviour)
    held.config("verify.test", "go test -v ./...")
    held.config("limits.implementation_retries", "1")
    return held


def rust_story(tmp_path: Path, behaviour: str) -> HeldStory:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "Cargo.toml").write_text(
        '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (root / "src").mkdir()
    (root / "src" / "lib.rs").write_text(RS_LIB)
    (root / "tests").mkdir()
    (root / "tests" / "mul.rs").write_text(RS_MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("target/\nCargo.lock\n")
    repo.commit_all("calc, and a failing test for mul written first")
    # A state home of the test's own: the agent may write into the caches every story shares.
    state = {"AI_SDLC_STATE_HOME": str(tmp_path / "state")}
    held = HeldStory(root, tmp_path / "records" / "agent.log", behaviour, env=state)
    held.config("verify.test", "cargo test --offline")
    held.config("limits.implementation_retries", "1")
    return held


CASES = rows(GO) + rows(RUST)


@pytest.mark.parametrize("row", CASES, ids=[f"{r.layout[:4]}-{r.behaviour}" for r in CASES])
def test_verdict(tmp_path: Path, row: Row) -> None:
    """A row of the verdict table (tests/support/verdicts.py)."""
    held = (go_story if row.layout == GO else rust_story)(tmp_path, row.behaviour)
    result = held.run()
    if row.said:
        assert result.returncode == 5, result.output
        held.assert_blocked_counted(row.said)
    else:
        assert result.returncode == 0, result.output
        held.assert_done()
