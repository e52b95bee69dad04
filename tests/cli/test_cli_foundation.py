"""Issue 2 through the real entry point: init, add, status, show, unblock, config, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import CliRunner, run_cli
from tests.support.paths import FIXTURES

#: Story files in the TypeScript tool's style (copies of shared/examples plus our own: CRLF,
#: BOM + CRLF, YAML 1.2 corner cases).
FIXTURES = FIXTURES / "stories"


def story_file(project: Path, sid: str) -> Path:
    return project / ".ai-sdlc" / "stories" / sid / "story.md"


def write_story(project: Path, sid: str, text: str) -> Path:
    path = story_file(project, sid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_version_and_help(cli: CliRunner) -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("ai-sdlc ")
    assert cli("--help").returncode == 0


def test_init_is_idempotent_and_writes_commented_config(project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    assert config.is_file()
    assert "# ai-sdlc configuration" in config.read_text()
    before = tree_bytes(project / ".ai-sdlc")
    again = run_cli(project, "init")
    assert again.returncode == 0
    assert "Already initialised" in again.stdout
    assert tree_bytes(project / ".ai-sdlc") == before


def test_commands_outside_a_project_explain_what_to_do(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "status")
    assert result.returncode == 1
    assert "ai-sdlc init" in result.stderr
    assert "Traceback" not in result.stderr


def test_add_prints_the_new_id_and_status_json_lists_it(cli: CliRunner) -> None:
    first = cli("add", "Export the board", "--label", "ux", "--priority", "3", "--type", "chore")
    assert first.returncode == 0, first.output
    assert first.stdout.strip() == "S-0001"
    assert cli("add", "Second").stdout.strip() == "S-0002"
    status = cli("status", "--json")
    assert status.returncode == 0, status.output
    data = json.loads(status.stdout)
    ids = [s["id"] for s in data["stories"]]
    assert ids == ["S-0001", "S-0002"]
    s1 = data["stories"][0]
    assert s1["title"] == "Export the board"
    assert s1["labels"] == ["ux"]
    assert s1["priority"] == 3
    assert s1["type"] == "chore"
    assert data["counts"]["backlog"] == 2
    assert data["counts"]["total"] == 2
    assert status.stderr == ""


def test_concurrent_adds_never_share_an_id(project: Path) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(lambda i: run_cli(project, "add", f"Story {i}", subprocess=True), range(8))
        )
    ids = [r.stdout.strip() for r in results]
    assert all(r.returncode == 0 for r in results), [r.output for r in results]
    assert len(set(ids)) == 8
    assert sorted(ids) == [f"S-{n:04d}" for n in range(1, 9)]


def test_add_rejects_bad_arguments_with_usage_exit(cli: CliRunner) -> None:
    bad_type = cli("add", "x", "--type", "Big Epic")
    assert bad_type.returncode == 2
    assert "not a story type" in bad_type.stderr
    assert cli("add", "   ").returncode == 2
    assert cli("status", "--bogus").returncode == 2


def test_status_board_shows_blocked_column_with_reason(cli: CliRunner, project: Path) -> None:
    cli("add", "Fine story")
    write_story(
        project,
        "S-0002",
        "---\nid: S-0002\ntitle: Stuck\nstatus: blocked\nblocked_reason: waiting for the API key\n"
        "---\nbody\n",
    )
    result = cli("status")
    assert result.returncode == 0, result.output
    assert "Blocked (1)" in result.stdout
    assert "waiting for the API key" in result.stdout
    assert "\x1b[" not in result.stdout  # no ANSI codes when not a terminal
    assert result.stderr == ""


def test_show_reports_every_counter_breakdown_and_flags(cli: CliRunner, project: Path) -> None:
    write_story(
        project,
        "S-0001",
        "---\nid: S-0001\ntitle: Counted\nstatus: in-progress\nresearch_complete: true\n"
        "implementation_retry_count: 2\ntotal_recovery_attempts: 5\n"
        "recovery_breakdown:\n  implementation_retry: 2\n  api_retry: 1\n---\nbody\n",
    )
    result = cli("show", "S-0001", "--json")
    assert result.returncode == 0, result.output
    data = json.loads(result.stdout)
    assert data["counters"] == {
        "total_recovery_attempts": 5,
        "implementation_retry_count": 2,
        "retry_count": 0,
        "refinement_count": 0,
    }
    assert data["recovery_breakdown"] == {
        "implementation_retry": 2,
        "rework": 0,
        "api_retry": 1,
        "refinement": 0,
        "pr_rework": 0,
    }
    assert data["phases"]["research_complete"] is True
    assert data["phases"]["plan_complete"] is False
    human = cli("details", "S-0001")
    assert human.returncode == 0
    assert "5/10" in human.stdout
    assert "2 unattributed" in human.stdout


@pytest.mark.parametrize(
    "ref", ["../../etc/passwd", "/etc/passwd", "S-0001/../../x", "..", "a\\b", "~root"]
)
def test_story_refs_that_could_escape_are_refused(cli: CliRunner, ref: str) -> None:
    cli("add", "Only story")
    result = cli("show", ref)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.stderr


def test_unknown_story_is_a_clear_failure(cli: CliRunner) -> None:
    result = cli("show", "S-0042")
    assert result.returncode == 1
    assert "S-0042" in result.stderr


def test_story_can_be_named_by_slug(cli: CliRunner) -> None:
    cli("add", "Export the board as CSV")
    data = json.loads(cli("show", "S-0001", "--json").stdout)
    slug = data["frontmatter"]["slug"]
    by_slug = cli("show", slug, "--json")
    assert by_slug.returncode == 0, by_slug.output
    assert json.loads(by_slug.stdout)["id"] == "S-0001"


BAD_STORIES = {
    "unquoted-colon": ("---\nid: S-0009\ntitle: Fix: crash\nstatus: backlog\n---\nbody\n", 3),
    "duplicate-key": ("---\nid: S-0009\ntitle: a\ntitle: b\nstatus: backlog\n---\nbody\n", 4),
    "list-not-mapping": ("---\n- id: S-0009\n- title: x\n---\nbody\n", 2),
    "no-frontmatter": ("# Just a heading\n\nNo frontmatter here.\n", 1),
    "counter-string": (
        '---\nid: S-0009\ntitle: x\nstatus: backlog\ntotal_recovery_attempts: "abc"\n---\nb\n',
        5,
    ),
    "counter-negative": (
        "---\nid: S-0009\ntitle: x\nstatus: backlog\ntotal_recovery_attempts: -3\n---\nb\n",
        5,
    ),
    "counter-float": (
        "---\nid: S-0009\ntitle: x\nstatus: backlog\ntotal_recovery_attempts: 2.5\n---\nb\n",
        5,
    ),
    "counter-bool": (
        "---\nid: S-0009\ntitle: x\nstatus: backlog\ntotal_recovery_attempts: true\n---\nb\n",
        5,
    ),
    "bad-status": ("---\nid: S-0009\ntitle: x\nstatus: finished\n---\nb\n", 4),
}


@pytest.mark.parametrize("case", sorted(BAD_STORIES))
def test_bad_story_input(cli: CliRunner, project: Path, case: str) -> None:
    cli("add", "A good story")
    text, line = BAD_STORIES[case]
    path = write_story(project, "S-0009", text)
    before = path.read_bytes()

    status = cli("status", "--json")
    assert status.returncode == 3, status.output
    assert [s["id"] for s in json.loads(status.stdout)["stories"]] == ["S-0001"]
    assert "S-0009" in status.stderr and "story.md" in status.stderr
    assert f"story.md:{line}" in status.stderr, status.stderr
    assert "Traceback" not in status.stderr

    for args in (["show", "S-0009"], ["run", "S-0009"], ["unblock", "S-0009"]):
        result = cli(*args)
        assert result.returncode == 3, (args, result.output)
        assert "Traceback" not in result.stderr
    assert path.read_bytes() == before


def test_unquoted_colon_error_names_line_column_and_hint(cli: CliRunner, project: Path) -> None:
    write_story(project, "S-0001", BAD_STORIES["unquoted-colon"][0])
    result = cli("show", "S-0001")
    assert result.returncode == 3
    assert "story.md:3:" in result.stderr
    assert "quote" in result.stderr.lower()


def test_wrong_typed_counter_names_the_field(cli: CliRunner, project: Path) -> None:
    write_story(project, "S-0001", BAD_STORIES["counter-string"][0])
    result = cli("show", "S-0001")
    assert result.returncode == 3
    assert "total_recovery_attempts" in result.stderr
    assert "story.md" in result.stderr


def test_unblock_keeps_counters_unless_reset(cli: CliRunner, project: Path) -> None:
    blocked = (
        "---\nid: S-0001\ntitle: Stuck\nstatus: blocked\nplan_complete: true\n"
        "blocked_reason: Global recovery limit exceeded\nblocked_at: '2026-11-01T10:00:00Z'\n"
        "implementation_retry_count: 3\nretry_count: 2\nrefinement_count: 1\n"
        "total_recovery_attempts: 10\n"
        "recovery_breakdown:\n  implementation_retry: 3\n  rework: 2\n  refinement: 1\n"
        "  api_retry: 4\n---\nbody\n"
    )
    write_story(project, "S-0001", blocked)
    result = cli("unblock", "S-0001", "--json")
    assert result.returncode == 0, result.output
    data = json.loads(cli("show", "S-0001", "--json").stdout)
    assert data["blocked"] is False
    assert data["frontmatter"]["status"] == "in-progress"
    assert data["counters"]["total_recovery_attempts"] == 10
    assert "blocked_reason" not in data["frontmatter"]

    write_story(project, "S-0001", blocked)
    reset = cli("unblock", "S-0001", "--reset-retries")
    assert reset.returncode == 0, reset.output
    data = json.loads(cli("show", "S-0001", "--json").stdout)
    assert data["counters"] == dict.fromkeys(data["counters"], 0)
    assert set(data["recovery_breakdown"].values()) == {0}
    text = story_file(project, "S-0001").read_text()
    assert text.endswith("---\nbody\n")


def test_config_get_set_keeps_comments_and_validates(cli: CliRunner, project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    assert cli("config", "limits.global_recovery").stdout.strip() == "10"
    assert cli("config", "limits.global_recovery", "7").returncode == 0
    assert cli("config", "limits.global_recovery").stdout.strip() == "7"
    text = config.read_text()
    assert "# every recovery of every kind counts" in text
    assert "global_recovery: 7" in text
    before = config.read_bytes()
    bad = cli("config", "limits.global_recovery", "many")
    assert bad.returncode == 2  # the value typed is wrong, not the file (as in `set`)
    assert "limits.global_recovery" in bad.stderr
    assert config.read_bytes() == before
    unknown = cli("config", "limits.global_recovry", "3")
    assert unknown.returncode in (2, 3)
    assert "global_recovery" in unknown.stderr  # suggestion
    assert config.read_bytes() == before
    whole = cli("config", "--json")
    assert json.loads(whole.stdout)["settings"]["limits.global_recovery"]["value"] == 7


def test_invalid_config_yaml_is_reported_with_line(cli: CliRunner, project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text("limits:\n  global_recovery: [1\n")
    result = cli("status")
    assert result.returncode == 3
    assert "config.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def _copy_examples(project: Path) -> dict[str, bytes]:
    stories = project / ".ai-sdlc" / "stories"
    originals = {}
    for src in sorted(FIXTURES.glob("*/story.md")):
        dest = stories / src.parent.name / "story.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        originals[src.parent.name] = src.read_bytes()
    return originals


def test_typescript_tool_stories_load_and_survive_an_unblock(cli: CliRunner, project: Path) -> None:
    originals = _copy_examples(project)
    status = cli("status", "--json")
    assert status.returncode == 0, status.output
    data = json.loads(status.stdout)
    by_id = {s["id"]: s for s in data["stories"]}
    assert set(by_id) == set(originals)
    assert by_id["S-0012"]["total_recovery_attempts"] == 3
    assert "\U0001f6d1" in by_id["S-0012"]["review_history"][0]["feedback"]
    assert by_id["S-0012"]["created"] == "2026-01-21"

    for sid, original in originals.items():
        result = cli("unblock", sid, "--reset-retries")
        assert result.returncode == 0, result.output
        new = story_file(project, sid).read_bytes()
        old_lines = original.splitlines(keepends=True)
        new_lines = new.splitlines(keepends=True)
        # Every original line is still there, byte for byte, unless it belongs to a key that
        # unblock --reset-retries changes (a key's continuation lines belong to it).
        touched = (
            b"total_recovery_attempts",
            b"implementation_retry_count",
            b"retry_count",
            b"refinement_count",
            b"recovery_breakdown",
            b"status",
            b"blocked_reason",
            b"blocked_at",
        )
        current = b""
        kept = []
        for ln in old_lines:
            bare = ln.lstrip(b"\xef\xbb\xbf")
            if bare[:1] not in (b" ", b"\t", b"-", b"#", b"\r", b"\n"):
                current = bare.split(b":", 1)[0]
            if current not in touched:
                kept.append(ln)
        for line in kept:
            assert line in new_lines, (sid, line)
        assert new.startswith(original[:3])  # BOM or '---' kept
        body_start = original.index(b"\n---", 3)
        assert new.endswith(original[body_start + 4 :].split(b"\n", 1)[1])


def test_json_output_is_plain_and_dates_are_strings(cli: CliRunner, project: Path) -> None:
    write_story(
        project,
        "S-0001",
        "---\nid: S-0001\ntitle: Dated\nstatus: ready\ncreated: 2026-02-03\n"
        "updated: 2026-02-04T10:11:12Z\n---\nbody\n",
    )
    data = json.loads(cli("status", "--json").stdout)
    story = data["stories"][0]
    assert story["created"] == "2026-02-03"
    assert str(story["updated"]).startswith("2026-02-04")


def test_python_module_and_console_script_agree(project: Path) -> None:
    script = Path(sys.executable).with_name("ai-sdlc")
    if not script.exists():
        pytest.skip("console script not installed in this interpreter's folder")
    proc = subprocess.run(
        [str(script), "--project", str(project), "status", "--json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"]["total"] == 0


def test_resilience_config_is_validated_and_a_broken_config_can_be_repaired(
    cli: CliRunner, project: Path
) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    before = config.read_bytes()
    bad = cli("config", "resilience.policies.llm.max_attempts", "0")
    assert bad.returncode == 3
    assert "resilience.policies.llm.max_attempts must be an integer >= 1" in bad.stderr
    typo = cli("config", "resilience.policies.llm.max_atempts", "3")
    assert typo.returncode == 3
    assert "max_attempts" in typo.stderr
    assert config.read_bytes() == before

    config.write_text(
        before.decode() + "resilience:\n  policies:\n    llm:\n      max_attempts: x\n"
    )
    status = cli("status")
    assert status.returncode == 3
    assert "config.yaml:" in status.stderr and "max_attempts" in status.stderr
    repaired = cli("config", "resilience.policies.llm.max_attempts", "5")
    assert repaired.returncode == 0, repaired.output
    assert cli("status").returncode == 0
