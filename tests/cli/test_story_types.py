"""Issue 26 item 4: open story types. The TypeScript tool's real backlogs carry types beyond its
own union (`refactor`, `documentation`, `enhancement`); such files load unchanged in `status`,
`show` and `run`, `add`/`set` accept any lowercase word, and the agents get a line of guidance
for the known types and a neutral one for any other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ai_sdlc.workflow.engine.agents import NEUTRAL_GUIDANCE, TYPE_GUIDANCE
from tests.conftest import allow_unverified, run_cli
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "ts_types"
TYPES = {"S-0051": "refactor", "S-0052": "documentation", "S-0053": "enhancement"}


def ts_project(tmp_path: Path) -> Path:
    """A project holding the TypeScript tool's story files, never touched by `init`."""
    root = tmp_path / "ts"
    stories = root / ".ai-sdlc" / "stories"
    stories.mkdir(parents=True)
    for sid in TYPES:
        shutil.copytree(FIXTURES / sid, stories / sid)
    return root


def test_status_and_show_load_the_typescript_types_and_show_them(tmp_path: Path) -> None:
    root = ts_project(tmp_path)
    before = {sid: (FIXTURES / sid / "story.md").read_bytes() for sid in TYPES}
    board = run_cli(root, "status")
    assert board.returncode == 0, board.output
    for sid, kind in TYPES.items():
        assert f"{sid}  " in board.output and f"[{kind}]" in board.output, board.output
    listed = json.loads(run_cli(root, "status", "--json").stdout)
    assert {s["id"]: s["type"] for s in listed["stories"]} == TYPES
    for sid, kind in TYPES.items():
        shown = run_cli(root, "show", sid)
        assert shown.returncode == 0, shown.output
        assert f"  type:      {kind}\n" in shown.output
    shown = run_cli(root, "show", "S-0052")
    assert "dependencies: S-0051" in shown.output and "epic:      E-04" in shown.output
    for sid in TYPES:  # loaded unchanged: reading writes nothing to the story files
        assert (root / ".ai-sdlc" / "stories" / sid / "story.md").read_bytes() == before[sid]


def test_a_refactor_story_runs_to_done_with_its_guidance_in_the_prompt(tmp_path: Path) -> None:
    root = ts_project(tmp_path)
    allow_unverified(root)  # the project's config says stories may be done unverified
    preview = run_cli(root, "run", "S-0051", "--provider", "dry-run")
    assert preview.returncode == 0, preview.output
    assert f"Story type: refactor: {TYPE_GUIDANCE['refactor']}" in preview.output
    done = run_cli(root, "run", "S-0051")
    assert done.returncode == 0, done.output
    shown = json.loads(run_cli(root, "show", "S-0051", "--json").stdout)
    assert shown["frontmatter"]["status"] == "done"
    assert shown["frontmatter"]["type"] == "refactor"
    text = (root / ".ai-sdlc" / "stories" / "S-0051" / "story.md").read_text()
    assert "estimated_effort: medium" in text and "content_type: code" in text  # kept


def test_any_lowercase_word_is_a_type_with_neutral_guidance(project: Path) -> None:
    added = run_cli(project, "add", "Move to the new queue", "--type", "migration")
    assert added.returncode == 0, added.output
    shown = json.loads(run_cli(project, "show", "S-0001", "--json").stdout)
    assert shown["type"] == shown["frontmatter"]["type"] == "migration"
    preview = run_cli(project, "run", "S-0001", "--provider", "dry-run")
    assert f"Story type: migration: {NEUTRAL_GUIDANCE}" in preview.output, preview.output
    for kind in ("documentation", "enhancement", "refactor"):
        assert run_cli(project, "add", f"A {kind}", "-t", kind).returncode == 0
    assert "[documentation]" in run_cli(project, "status").output


def test_a_type_that_is_not_a_word_is_refused(project: Path) -> None:
    for bad in ("two words", "-x", ""):  # `Refactor` is lowercased (test_small_wording)
        result = run_cli(project, "add", "A story", "--type", bad)
        assert result.returncode == 2, (bad, result.output)
        assert "not a story type" in result.stderr, result.stderr
        assert "Traceback" not in result.output
    assert not any((project / ".ai-sdlc" / "stories").iterdir())
    story = project / ".ai-sdlc" / "stories" / "S-0001"
    assert run_cli(project, "add", "A story").returncode == 0
    text = (story / "story.md").read_text().replace("type: feature", "type: Big Refactor")
    (story / "story.md").write_text(text)
    board = run_cli(project, "status")
    assert board.returncode == 3 and "not a story type" in board.stderr, board.output
