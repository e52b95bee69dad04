"""Issue 26 items 1 and 9 through the real CLI: one dependency rule on every path (`run <id>`,
the next recommended action, `--batch`, `--auto`, `watch`), and no story left between phases
(every phase complete, never marked done)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import frontmatter, make_project, phases_started

pytestmark = pytest.mark.e2e

PHASES = ["refine", "research", "plan", "implement", "review"]


def set_field(root: Path, sid: str, line: str) -> None:
    """Add a frontmatter line, as a user editing the story file does."""
    path = root / ".ai-sdlc" / "stories" / sid / "story.md"
    head, body = path.read_text()[4:].split("\n---\n", 1)
    path.write_text("---\n" + head + "\n" + line + "\n---\n" + body)


def dependent_first(tmp_path: Path) -> Path:
    """S-0001 (backlog, priority 2) and S-0002 (priority 1, depends on S-0001)."""
    root = tmp_path / "p"
    make_project(root, ["Base", "Needs base"])
    set_field(root, "S-0002", "dependencies: [S-0001]")
    path = root / ".ai-sdlc" / "stories" / "S-0002" / "story.md"
    text = path.read_text()
    path.write_text(re.sub(r"(?m)^priority: .*$", "priority: 0", text, count=1))
    assert "priority: 0" in path.read_text()
    return root


def test_run_id_refuses_a_story_whose_dependency_is_not_done(tmp_path: Path) -> None:
    root = dependent_first(tmp_path)
    result = run_cli(root, "run", "S-0002")
    assert result.returncode == 1, result.output
    assert "S-0002 cannot start: it depends on S-0001 (backlog)" in result.stderr
    assert "--ignore-dependencies" in result.stderr
    assert "Traceback" not in result.output
    assert phases_started(root, "S-0002") == []
    assert frontmatter(root, "S-0002")["status"] == "backlog"


def test_run_id_names_a_blocked_dependency(tmp_path: Path) -> None:
    root = dependent_first(tmp_path)
    set_field(root, "S-0001", "blocked_reason: waiting for the vendor")
    path = root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    path.write_text(path.read_text().replace("status: backlog", "status: blocked", 1))
    result = run_cli(root, "run", "S-0002")
    assert result.returncode == 1, result.output
    assert "depends on S-0001 (blocked)" in result.stderr
    assert "ai-sdlc unblock S-0001" in result.stderr


def test_ignore_dependencies_insists(tmp_path: Path) -> None:
    root = dependent_first(tmp_path)
    result = run_cli(root, "run", "S-0002", "--ignore-dependencies")
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0002")["status"] == "done"
    assert phases_started(root, "S-0001") == []


def test_run_id_starts_once_the_dependency_is_done(tmp_path: Path) -> None:
    root = dependent_first(tmp_path)
    assert run_cli(root, "run", "S-0001").returncode == 0
    result = run_cli(root, "run", "S-0002")
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0002")["status"] == "done"


def test_next_recommended_action_skips_a_story_waiting_for_its_dependency(
    tmp_path: Path,
) -> None:
    root = dependent_first(tmp_path)
    dry = run_cli(root, "run", "--dry-run")
    assert "S-0001" in dry.output and "S-0002" not in dry.output
    result = run_cli(root, "run")
    assert result.returncode == 0, result.output
    assert phases_started(root, "S-0001") == PHASES  # the next story, taken to done
    assert phases_started(root, "S-0002") == []


def test_batch_and_watch_do_not_start_a_story_whose_dependency_is_not_done(
    tmp_path: Path,
) -> None:
    root = dependent_first(tmp_path)
    batch = run_cli(root, "run", "--batch", "S-0002")
    assert "depends on S-0001" in batch.output
    assert phases_started(root, "S-0002") == []
    path = root / ".ai-sdlc" / "stories" / "S-0002" / "story.md"
    path.write_text(path.read_text().replace("status: backlog", "status: ready", 1))
    watch = run_cli(root, "watch", "--once")
    assert watch.returncode == 0, watch.output
    assert phases_started(root, "S-0002") == []


def test_one_bare_run_finishes_a_new_story(tmp_path: Path) -> None:
    """A bare `run` takes the next story to done, as `run <id>` does (issue 36 item 9): it
    ends done, not left `in-progress` with every phase complete; then nothing is left."""
    root = tmp_path / "p"
    make_project(root, ["Only"])
    result = run_cli(root, "run")
    assert result.returncode == 0, result.output
    assert "[S-0001] picked as the next story by priority" in result.stderr
    assert phases_started(root, "S-0001") == PHASES
    assert frontmatter(root, "S-0001")["status"] == "done"
    assert "Nothing to run" in run_cli(root, "run").output


def stepped_through(root: Path) -> None:
    """Every phase by `--step`: each phase complete, the story never marked done."""
    for phase in PHASES:
        assert run_cli(root, "run", "S-0001", "--step", phase).returncode == 0
    fm = frontmatter(root, "S-0001")
    assert fm["reviews_complete"] is True and fm["status"] != "done"


@pytest.mark.parametrize(
    "finisher",
    [("run",), ("run", "--auto"), ("watch", "--once"), ("run", "S-0001")],
    ids=["bare-run", "auto", "watch-once", "run-id"],
)
def test_a_story_left_between_phases_finishes_on_every_path(
    tmp_path: Path, finisher: tuple[str, ...]
) -> None:
    """Every way to leave a story with all phases complete but not done (`--step`, a bare
    `run`), and every path that must then finish it."""
    root = tmp_path / "p"
    make_project(root, ["Stepped", "Dependent"])
    set_field(root, "S-0002", "dependencies: [S-0001]")
    stepped_through(root)
    result = run_cli(root, *finisher)
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0001")["status"] == "done"
    assert phases_started(root, "S-0001") == PHASES  # finished, not run again


def test_a_gate_before_done_is_where_a_finished_story_waits(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Gated"], "gates:\n  before_done: true\n")
    stepped_through(root)
    assert run_cli(root, "run").returncode == 0
    assert frontmatter(root, "S-0001")["status"] != "done"  # it waits at the gate
    assert "before_done" in run_cli(root, "status").output
    assert run_cli(root, "approve", "S-0001").returncode == 0
    assert run_cli(root, "run").returncode == 0
    assert frontmatter(root, "S-0001")["status"] == "done"
