"""Issue 26 item 3: commands shape the backlog graph. `add --depends-on/--epic/--body/
--body-file/--status ready`, `set <id> key=value…` (each value checked: an unknown or archived
id, a cycle, a status the workflow owns, a wrong type are refused and nothing is written),
`archive <id>` (out of the backlog, still found by `show`, never while a run holds it or a
story depends on it), `add --from` keeping `dependencies` and `epic`; every write through the
state owner (or `StoryStore.add`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.workflow.state.runlock import run_lock
from tests.conftest import run_cli
from tests.support.git_support import git, git_env  # noqa: F401 (fixture)
from tests.workflow.state.test_single_writer import recording


def fm(project: Path, sid: str) -> dict[str, Any]:
    result = run_cli(project, "show", sid, "--json")
    assert result.returncode == 0, result.output
    return dict(json.loads(result.stdout)["frontmatter"])


def story_file(project: Path, sid: str) -> Path:
    return project / ".ai-sdlc" / "stories" / sid / "story.md"


def events(project: Path, sid: str, folder: str = "stories") -> list[dict[str, Any]]:
    log = project / ".ai-sdlc" / folder / sid / "events.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()]


def add(project: Path, *args: str) -> str:
    result = run_cli(project, "add", *args)
    assert result.returncode == 0, result.output
    return result.stdout.strip()


def test_add_places_a_new_story_in_the_graph(project: Path, tmp_path: Path) -> None:
    assert add(project, "Parser") == "S-0001"
    assert add(project, "Lexer") == "S-0002"
    body = tmp_path / "body.md"
    body.write_text("# Printer\n\nPrint what the parser read.\n")
    sid = add(
        project,
        "Printer",
        "--depends-on",
        "S-0001",
        "-d",
        "s-2",
        "--epic",
        "E-07",
        "--body-file",
        str(body),
        "--status",
        "ready",
        "--type",
        "enhancement",
    )
    got = fm(project, sid)
    assert got["dependencies"] == ["S-0001", "S-0002"]
    assert (got["epic"], got["status"], got["type"]) == ("E-07", "ready", "enhancement")
    assert (
        story_file(project, sid)
        .read_text()
        .endswith("---\n# Printer\n\nPrint what the parser read.\n")
    )
    inline = add(project, "Docs", "--body", "Write the docs.", "-d", "S-0001,S-0003")
    assert fm(project, inline)["dependencies"] == ["S-0001", "S-0003"]
    assert story_file(project, inline).read_text().endswith("---\nWrite the docs.\n")
    board = run_cli(project, "status", "--json")
    ready = [s["id"] for s in json.loads(board.stdout)["stories"] if s["status"] == "ready"]
    assert ready == ["S-0003"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-d", "S-0009"), "dependency S-0009 is not a story in this backlog"),
        (("-d", "feature-x"), "not a story id"),
        (("--status", "done"), "status 'done' cannot be set by hand"),
        (("--status", "in-progress"), "cannot be set by hand"),
        (("--epic", "no spaces"), "not an epic id"),
        (("--body", "x", "--body-file", "f.md"), "--body or --body-file"),
        (("--body", "  "), "the body is empty"),
    ],
)
def test_add_refuses_a_bad_graph_value_and_creates_nothing(
    project: Path, args: tuple[str, ...], message: str
) -> None:
    assert add(project, "First") == "S-0001"
    result = run_cli(project, "add", "Second", *args)
    assert result.returncode == 2, result.output
    assert message in result.stderr, result.stderr
    assert sorted(p.name for p in (project / ".ai-sdlc" / "stories").iterdir()) == ["S-0001"]


def test_set_changes_each_settable_key_in_one_logged_transaction(project: Path) -> None:
    for title in ("One", "Two", "Three"):
        add(project, title)
    result = run_cli(
        project,
        "set",
        "S-0003",
        "dependencies=S-0001,s-2",
        "epic=E-01",
        "priority=5",
        "labels=api, urgent",
        "status=ready",
        "title=Three, renamed",
        "type=refactor",
    )
    assert result.returncode == 0, result.output
    assert "S-0003 dependencies: (none) → [S-0001, S-0002]" in result.stdout
    got = fm(project, "S-0003")
    assert got["dependencies"] == ["S-0001", "S-0002"]
    assert (got["epic"], got["priority"], got["labels"]) == ("E-01", 5, ["api", "urgent"])
    assert (got["status"], got["title"], got["type"]) == ("ready", "Three, renamed", "refactor")
    assert got["slug"] == "three"  # the slug names the branch: it stays
    edited = [e for e in events(project, "S-0003") if e["action"] == "edited"]
    assert len(edited) == 1
    assert edited[0]["changed"]["status"] == {"from": "backlog", "to": "ready"}
    assert set(edited[0]["changed"]) == {
        "dependencies",
        "epic",
        "priority",
        "labels",
        "status",
        "title",
        "type",
    }
    # Clearing, and a no-op that writes nothing.
    assert (
        run_cli(project, "set", "S-0003", "epic=", "dependencies=", "status=backlog").returncode
        == 0
    )
    got = fm(project, "S-0003")
    assert "epic" not in got and got["dependencies"] == [] and got["status"] == "backlog"
    before = story_file(project, "S-0003").read_bytes()
    same = run_cli(project, "set", "S-0003", "priority=5")
    assert same.returncode == 0 and "nothing to change" in same.stderr, same.output
    assert story_file(project, "S-0003").read_bytes() == before


def test_set_refuses_a_cycle_and_names_it(project: Path) -> None:
    add(project, "One")
    add(project, "Two")
    add(project, "Three", "--depends-on", "S-0001")
    assert run_cli(project, "set", "S-0002", "dependencies=S-0003").returncode == 0
    before = story_file(project, "S-0001").read_bytes()
    direct = run_cli(project, "set", "S-0001", "dependencies=S-0003")
    assert direct.returncode == 2, direct.output
    assert "dependency cycle S-0001 → S-0003 → S-0001" in direct.stderr, direct.stderr
    longer = run_cli(project, "set", "S-0001", "dependencies=S-0002")
    assert "S-0001 → S-0002 → S-0003 → S-0001" in longer.stderr, longer.stderr
    itself = run_cli(project, "set", "S-0001", "dependencies=S-0001")
    assert itself.returncode == 2 and "cannot depend on itself" in itself.stderr
    assert story_file(project, "S-0001").read_bytes() == before
    assert "Traceback" not in direct.output + longer.output + itself.output


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("dependencies=S-0042", "dependency S-0042 is not a story in this backlog"),
        ("status=done", "status 'done' cannot be set by hand"),
        ("status=blocked", "cannot be set by hand"),
        ("status=in-progress", "cannot be set by hand"),
        ("type=Not a word", "not a story type"),
        ("priority=-1", "priority must be a whole number"),
        ("slug=new", "'slug' cannot be set"),
        ("total_recovery_attempts=0", "cannot be set"),
        ("epic", "is not key=value"),
        ("title=", "printable text"),
    ],
)
def test_set_refuses_a_bad_value_and_writes_nothing(
    project: Path, assignment: str, message: str
) -> None:
    add(project, "One")
    before = story_file(project, "S-0001").read_bytes()
    result = run_cli(project, "set", "S-0001", assignment)
    assert result.returncode == 2, result.output
    assert message in result.stderr, result.stderr
    assert story_file(project, "S-0001").read_bytes() == before


def test_set_cannot_send_a_started_story_back_or_touch_an_unknown_one(project: Path) -> None:
    add(project, "One")
    add(project, "Two")
    assert run_cli(project, "run", "S-0001").returncode == 0
    done = run_cli(project, "set", "S-0001", "status=ready")
    assert done.returncode == 2 and "S-0001 is done" in done.stderr, done.output
    assert fm(project, "S-0001")["status"] == "done"
    text = story_file(project, "S-0002").read_text().replace("status: backlog", "status: blocked")
    story_file(project, "S-0002").write_text(text)
    blocked = run_cli(project, "set", "S-0002", "status=ready")
    assert blocked.returncode == 2 and "ai-sdlc unblock S-0002" in blocked.stderr, blocked.output
    missing = run_cli(project, "set", "S-0009", "priority=1")
    assert missing.returncode != 0 and "no story S-0009" in missing.stderr, missing.output


def test_archive_takes_a_story_out_of_the_backlog(project: Path) -> None:
    add(project, "One")
    add(project, "Two", "--depends-on", "S-0001")
    held = run_cli(project, "archive", "S-0001")
    assert held.returncode == 2, held.output
    assert "S-0001 cannot be archived: S-0002 depends on it" in held.stderr
    assert run_cli(project, "set", "S-0002", "dependencies=").returncode == 0
    archived = run_cli(project, "archive", "S-0001")
    assert archived.returncode == 0, archived.output
    folder = project / ".ai-sdlc" / "archive" / "S-0001"
    assert (folder / "story.md").is_file()
    assert not (project / ".ai-sdlc" / "stories" / "S-0001").exists()
    board = json.loads(run_cli(project, "status", "--json").stdout)
    assert [s["id"] for s in board["stories"]] == ["S-0002"]
    assert "S-0001" not in run_cli(project, "status").output
    shown = run_cli(project, "show", "S-0001")
    assert shown.returncode == 0, shown.output
    assert "archived:" in shown.output and str(folder / "story.md") in shown.output
    assert json.loads(run_cli(project, "show", "S-0001", "--json").stdout)["archived"] is True
    assert [e["action"] for e in events(project, "S-0001", "archive")][-1] == "archived"
    # Its id is never given again, and it cannot be depended on.
    assert add(project, "Three") == "S-0003"
    refused = run_cli(project, "set", "S-0003", "dependencies=S-0001")
    assert refused.returncode == 2 and "S-0001 is archived" in refused.stderr, refused.output
    for args in (("archive", "S-0001"), ("set", "S-0001", "priority=1"), ("run", "S-0001")):
        gone = run_cli(project, *args)
        assert gone.returncode != 0, (args, gone.output)
        assert f"it was archived to {folder}" in gone.stderr, (args, gone.stderr)


def test_archive_is_refused_while_a_run_holds_the_story(project: Path) -> None:
    add(project, "One")
    with run_lock(project / ".ai-sdlc", "S-0001", what="S-0001"):
        busy = run_cli(project, "archive", "S-0001", subprocess=True)
    assert busy.returncode == 1, busy.output
    assert "cannot archive S-0001" in busy.stderr and "being run" in busy.stderr, busy.stderr
    assert story_file(project, "S-0001").is_file()
    assert run_cli(project, "archive", "S-0001").returncode == 0


def test_add_from_keeps_dependencies_and_epic(project: Path, tmp_path: Path) -> None:
    add(project, "Existing")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("---\nid: S-0007\ntitle: Base\nepic: E-02\n---\nBase.\n")
    (docs / "b.md").write_text(
        "---\nid: S-0008\ntitle: On top\nepic: E-02\ndependencies: [S-0007, S-0001]\n---\nTop.\n"
    )
    result = run_cli(project, "add", "--from", str(docs))
    assert result.returncode == 0, result.output
    assert result.stdout == "S-0002\nS-0003\n"
    assert "dependencies" not in result.stderr and "epic" not in result.stderr  # not "not mapped"
    assert fm(project, "S-0002")["epic"] == "E-02"
    top = fm(project, "S-0003")
    assert top["epic"] == "E-02"
    assert top["dependencies"] == ["S-0002", "S-0001"]  # S-0007 renumbered to its new id


def test_add_from_refuses_an_unknown_dependency_and_creates_nothing(
    project: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("---\ntitle: A\n---\nA.\n")
    (docs / "b.md").write_text("---\ntitle: B\ndependencies: [S-0044]\n---\nB.\n")
    result = run_cli(project, "add", "--from", str(docs))
    assert result.returncode == 3, result.output
    assert str(docs / "b.md") in result.stderr and "S-0044" in result.stderr, result.stderr
    cyclic = tmp_path / "cyclic"
    cyclic.mkdir()
    (cyclic / "a.md").write_text("---\nid: S-0001\ntitle: A\ndependencies: [S-0002]\n---\n")
    (cyclic / "b.md").write_text("---\nid: S-0002\ntitle: B\ndependencies: [S-0001]\n---\n")
    loop = run_cli(project, "add", "--from", str(cyclic))
    assert loop.returncode == 3 and "S-0001 → S-0002 → S-0001" in loop.stderr, loop.output
    assert not any((project / ".ai-sdlc" / "stories").iterdir())


def test_shaping_the_graph_writes_story_files_only_through_the_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    assert run_cli(project, "init").returncode == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "x.md").write_text("---\nid: S-0005\ntitle: X\n---\n")
    (docs / "y.md").write_text("---\ntitle: Y\ndependencies: [S-0005]\n---\n")
    with recording(project, monkeypatch) as writes:
        add(project, "One")
        add(project, "Two", "-d", "S-0001", "--status", "ready", "--epic", "E-1")
        assert run_cli(project, "set", "S-0002", "priority=1", "dependencies=").returncode == 0
        assert run_cli(project, "add", "--from", str(docs)).returncode == 0
        assert run_cli(project, "archive", "S-0001").returncode == 0
    assert writes.outside_owner() == []
    assert writes.through("shape") >= 2 and writes.through("archive") >= 1


def test_set_status_ready_is_what_watch_runs(project: Path) -> None:
    add(project, "Waits in the backlog")
    add(project, "Made ready later", "--depends-on", "S-0001")
    idle = run_cli(project, "watch", "--once")
    assert idle.returncode == 0 and "Nothing ready to run" in idle.output, idle.output
    assert run_cli(project, "set", "S-0001", "status=ready").returncode == 0
    assert run_cli(project, "set", "S-0002", "status=ready").returncode == 0
    ran = run_cli(project, "watch", "--once")
    assert ran.returncode == 0, ran.output
    assert fm(project, "S-0001")["status"] == "done"
    assert fm(project, "S-0002")["status"] == "done"  # after its dependency
    done = next(e["time"] for e in events(project, "S-0001") if e["action"] == "done")
    began = next(e["time"] for e in events(project, "S-0002") if e["action"] == "phase_started")
    assert done <= began


@pytest.mark.usefixtures("git_env")
def test_an_archived_storys_worktree_shows_as_archived_and_is_pruned(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "start")
    assert run_cli(root, "init").returncode == 0
    add(root, "Started, then dropped")
    assert run_cli(root, "run", "S-0001", "--step", "research").returncode == 0
    assert run_cli(root, "archive", "S-0001").returncode == 0
    listed = json.loads(run_cli(root, "worktrees", "--json").stdout)
    assert [(w["story"], w["status"]) for w in listed["worktrees"]] == [("S-0001", "archived")]
    pruned = run_cli(root, "worktrees", "prune")
    assert pruned.returncode == 0, pruned.output
    assert "Removed .ai-sdlc/worktrees/S-0001-" in pruned.output
    assert not list((root / ".ai-sdlc" / "worktrees").glob("S-0001*"))
    assert "ai-sdlc/S-0001" in git(root, "branch", "--list", "ai-sdlc/*")  # the branch stays


def test_a_body_file_that_cannot_be_a_story_text_is_refused(project: Path, tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    latin = tmp_path / "latin.md"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    for path, words in (
        (fifo, "is not a regular file"),
        (latin, "is not UTF-8 text"),
        (tmp_path / "missing.md", "cannot be read"),
    ):
        result = run_cli(project, "add", "A story", "--body-file", str(path))
        assert result.returncode == 3, result.output
        assert str(path) in result.stderr and words in result.stderr, result.stderr
    assert not any((project / ".ai-sdlc" / "stories").iterdir())
