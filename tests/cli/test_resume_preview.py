"""`run --resume RUN_ID --dry-run` (and `--continue --dry-run`) previews what resuming would do —
the stories of the run not done yet, each with its plan — and changes nothing (issue 36)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.reporting.test_report import FAST, RULES
from tests.support.runs_support import make_project, only_run, write_rules
from tests.workflow.parallel.test_parallel_runs import add_field

pytestmark = pytest.mark.e2e


def snapshot(root: Path) -> dict[str, str]:
    """Every file under .ai-sdlc/ (but the listing cache) by its content's hash."""
    ai = root / ".ai-sdlc"
    return {
        str(p.relative_to(ai)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(ai.rglob("*"))
        if p.is_file() and "cache" not in p.parts and ".locks" not in p.parts
    }


def test_a_resume_can_be_previewed_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Done first", "Blocked by rate limits", "Reworked", "Needs two"], FAST)
    write_rules(root, RULES)
    add_field(root, "S-0004", "dependencies: [S-0002]")
    assert run_cli(root, "run", "--auto").returncode == 5
    run_id = only_run(root)["run_id"]
    before = snapshot(root)

    preview = run_cli(root, "run", "--resume", run_id, "--dry-run")
    assert preview.returncode == 0, preview.output
    left = preview.stderr.split(f"Resuming run {run_id} would continue with: ", 1)[1]
    left_ids = left.splitlines()[0].split(", ")
    assert "S-0001" not in left_ids and "S-0002" in left_ids
    for sid in left_ids:
        assert sid in preview.stdout  # its plan
    assert run_cli(root, "run", "--continue", "--dry-run").stdout == preview.stdout
    assert snapshot(root) == before  # a preview writes nothing


def test_a_preview_refuses_what_the_resume_refuses(tmp_path: Path) -> None:
    """`--dry-run` answers as the command would: a completed run has nothing to resume (exit
    1, the same message; it said "would continue with: nothing", exit 0), and a project
    without runs has nothing to continue (exit 2, both ways)."""
    root = tmp_path / "p"
    make_project(root, ["Only"], FAST)
    empty = run_cli(root, "run", "--continue", "--dry-run")
    real_empty = run_cli(root, "run", "--continue")
    assert empty.returncode == real_empty.returncode == 2, (empty.output, real_empty.output)
    assert empty.stderr.splitlines()[-2:] == real_empty.stderr.splitlines()[-2:]
    assert run_cli(root, "run", "--auto").returncode == 0
    run_id = only_run(root)["run_id"]
    for command in (("--resume", run_id), ("--continue",)):
        preview = run_cli(root, "run", *command, "--dry-run")
        real = run_cli(root, "run", *command)
        assert preview.returncode == real.returncode == 1, (preview.output, real.output)
        said = f"error: run {run_id} completed; there is nothing to resume"
        assert said in preview.stderr and said in real.stderr
        assert "would continue with" not in preview.output
