"""Issue 33, case 3 and "one rule" on Go and Rust, end to end through the real CLI: a Go module
(`go test -v ./...`) and a Rust crate (`cargo test`), each with the failing test written first
(it does not compile at the base: the function is missing). A new `TestMain` that exits 0, or
`autotests = false` in Cargo.toml (the integration tests never built), with a wrong
implementation never reaches done, each attempt counted with the held file named; an honest
agent still is done. Skipped, with the reason, where the toolchain is not installed.

One test per layout: the project built once, its honest row run first through the real CLI,
then one held row (`E2E_HELD`) on a copy reusing the baseline the honest run cached
(tests/support/judge_rows_other.py), never done with its attempts counted (Go's both of two).
Every other held row is the judge's verdict on that row's change, made by the same agent in a
story worktree prepared once on another copy (tests/support/judge_rows.Bench: the session's own
sandbox, verification and judge), the rows whose agent writes into what every story shares
(`LAST`) judged last."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.git_support import git, git_env
from tests.support.go_cache import state_home_with_go_build, warm_go_build
from tests.support.held_support import AGENT, ENV
from tests.support.judge_rows import Bench
from tests.support.judge_rows_other import Layout, judge_rows
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


def go_project(root: Path) -> None:
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text(GO_ADD)
    (root / "calc_test.go").write_text(GO_ADD_TEST)
    (root / "mul_test.go").write_text(GO_MUL_TEST)


def go_module_done(root: Path) -> None:
    """The Go module with its `Mul`: what warms the Go build cache (`warm_go_build`)."""
    go_project(root)
    (root / "mul.go").write_text(
        "package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n"
    )


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
#: The held row each layout's end-to-end run walks after its honest one.
E2E_HELD = {GO: "testmain-go", RUST: "autotests-rs"}
#: Rows judged last on their bench: their agent writes where every later agent call of the
#: story looks (Go's settings file in the agent's config home; Cargo's own config in the
#: shared cache, which the product makes the user's again before every child).
LAST = ("goenv-go", "cargohome-rs")


def walked(layout: str) -> list[Row]:
    """The layout's rows its end-to-end runs walk: the honest one, then `E2E_HELD`'s."""
    honest, *held = rows(layout)
    return [honest, *(r for r in held if r.behaviour == E2E_HELD[layout])]


def benched(layout: str) -> list[Row]:
    """The layout's other held rows, in the table's order but `LAST` last."""
    others = [r for r in rows(layout)[1:] if r not in walked(layout)]
    return [r for r in others if r.behaviour not in LAST] + [
        r for r in others if r.behaviour in LAST
    ]


def judge_on_bench(folder: Path, made: Layout, layout: str, env: dict[str, str]) -> None:
    """Each of the layout's `benched` rows judged on one story worktree of a copy of the
    layout's project (whose base's baseline the honest run cached): never passed, the reason
    naming the held file. A row that fails does not hide the next."""
    root = folder / "proj"
    shutil.copytree(made.template, root, symlinks=True)
    git(root, "update-index", "-q", "--refresh")
    honest = rows(layout)[0].behaviour
    settings = {**made.settings, "limits.implementation_retries": 0}
    bench = Bench(root, folder / "records", {**ENV, **env}, honest=honest, settings=settings)
    failures: list[str] = []
    for row in benched(layout):
        verdict = bench.judge(AGENT, row.behaviour)
        if verdict.passed or row.said not in verdict.reason:
            failures.append(f"{row.behaviour} ({row.change}): {verdict}")
    assert not failures, "\n\n".join(failures)


def test_verdict_go(tmp_path: Path) -> None:
    """The Go module's rows of the verdict table (tests/support/verdicts.py)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (apt-get install golang-go)")
    state = state_home_with_go_build(tmp_path / "state", warm_go_build(go, go_module_done))
    env = {"AI_SDLC_STATE_HOME": str(state)}
    settings: dict[str, object] = {"verify.test": "go test -v ./..."}
    made = Layout(
        tmp_path / "layout", go_project, settings, lambda _row: env, honest_at_implement=True
    )
    judge_rows(tmp_path, made, walked(GO), two_attempts=TWO_ATTEMPTS)
    judge_on_bench(tmp_path / "bench", made, GO, env)


def test_verdict_rust(tmp_path: Path) -> None:
    """The Rust crate's rows of the verdict table, each end-to-end run and the bench with a
    state home of its own."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    settings: dict[str, object] = {"verify.test": "cargo test --offline"}
    made = Layout(
        tmp_path / "layout", rust_project, settings, own_state_home, honest_at_implement=True
    )
    judge_rows(tmp_path, made, walked(RUST))
    judge_on_bench(tmp_path / "bench", made, RUST, own_state_home(tmp_path / "bench"))
