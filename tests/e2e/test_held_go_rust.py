"""Issue 33, case 3 and "one rule" on Go and Rust, end to end through the real CLI: a Go module
(`go test -v ./...`) and a Rust crate (`cargo test`), each with the failing test written first
(it does not compile at the base: the function is missing). A new `TestMain` that exits 0, or
`autotests = false` in Cargo.toml (the integration tests never built), with a wrong
implementation never reaches done, each attempt counted with the held file named; an honest
agent still is done. Skipped, with the reason, where the toolchain is not installed.

One test per layout runs its rows in turn: the project built once and its honest row run
first, its baseline then reused by every held row's own copy
(tests/support/judge_rows_other.py); one held row counts both attempts, the others their one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.git_support import git_env
from tests.support.judge_rows_other import Layout, judge_rows
from tests.support.verdicts import GO, RUST, rows

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


def go_project(root: Path) -> None:
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text(GO_ADD)
    (root / "calc_test.go").write_text(GO_ADD_TEST)
    (root / "mul_test.go").write_text(GO_MUL_TEST)


def rust_project(root: Path) -> None:
    (root / "Cargo.toml").write_text(
        '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (root / "src").mkdir()
    (root / "src" / "lib.rs").write_text(RS_LIB)
    (root / "tests").mkdir()
    (root / "tests" / "mul.rs").write_text(RS_MUL_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("target/\nCargo.lock\n")


def own_state_home(tmp_path: Path) -> dict[str, str]:
    """A state home of the row's own: the agent may write into the caches every story shares
    (cargohome-rs), which no other row may then find."""
    return {"AI_SDLC_STATE_HOME": str(tmp_path / "state")}


#: The held row whose run counts both attempts (what is counted does not depend on the
#: layout or the game: every other row stops after its one attempt).
TWO_ATTEMPTS = rows(GO)[1]


def test_verdict_go(tmp_path: Path) -> None:
    """The Go module's rows of the verdict table (tests/support/verdicts.py)."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed (apt-get install golang-go)")
    made = Layout(tmp_path / "layout", go_project, {"verify.test": "go test -v ./..."})
    judge_rows(tmp_path, made, rows(GO), two_attempts=TWO_ATTEMPTS)


def test_verdict_rust(tmp_path: Path) -> None:
    """The Rust crate's rows of the verdict table, each run with a state home of its own."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    settings: dict[str, object] = {"verify.test": "cargo test --offline"}
    made = Layout(
        tmp_path / "layout", rust_project, settings, own_state_home, honest_at_implement=True
    )
    judge_rows(tmp_path, made, rows(RUST))
