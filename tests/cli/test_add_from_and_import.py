"""Bringing work in: `add --from` markdown in any frontmatter flavour, and `import github`
through a stand-in `gh` on PATH that prints gh's real `issue list --json` shape."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import CliRunner, run_cli
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.runs_support import frontmatter


def story_text(project: Path, sid: str) -> str:
    return (project / ".ai-sdlc" / "stories" / sid / "story.md").read_text(encoding="utf-8")


def story_ids(project: Path) -> list[str]:
    return sorted(p.name for p in (project / ".ai-sdlc" / "stories").iterdir())


def test_add_from_yaml_toml_json_and_plain(cli: CliRunner, project: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-yaml.md").write_text(
        "---\ntitle: 'Export: CSV'\ntags: [reporting, csv]\npriority: 5\nstatus: ready\n"
        "type: bug\nowner: ann\n---\n\nExport the board.\n\n- [ ] one row per story\n"
    )
    (docs / "b-toml.md").write_text(
        '+++\ntitle = "Import TOML"\nlabels = ["toml"]\npriority = 7\nstatus = "shipped"\n+++\n'
        "Body in *markdown*.\n"
    )
    (docs / "c-json.md").write_text(
        '{\n"title": "From JSON",\n"labels": "a, b",\n"priority": 3\n}\nJSON body\n'
    )
    (docs / "d-plain.md").write_text("\ufeff# Just a heading\r\n\r\nSome text.\r\n")
    (docs / "notes.txt").write_text("not markdown")

    result = cli("add", "--from", str(docs), "--json")
    assert result.returncode == 0, result.output
    made = json.loads(result.stdout)["stories"]
    assert [s["id"] for s in made] == ["S-0001", "S-0002", "S-0003", "S-0004"]
    assert made[0]["ignored"] == ["owner"]

    yaml_fm = frontmatter(project, "S-0001")
    assert (yaml_fm["title"], yaml_fm["labels"], yaml_fm["priority"]) == (
        "Export: CSV",
        ["reporting", "csv"],
        5,
    )
    assert (yaml_fm["status"], yaml_fm["type"]) == ("ready", "bug")
    assert "owner" not in yaml_fm
    assert story_text(project, "S-0001").endswith(
        "---\nExport the board.\n\n- [ ] one row per story\n"
    )

    toml_fm = frontmatter(project, "S-0002")
    assert (toml_fm["title"], toml_fm["labels"], toml_fm["priority"]) == (
        "Import TOML",
        ["toml"],
        7,
    )
    assert toml_fm["status"] == "backlog"  # "shipped" is not one of ours
    assert story_text(project, "S-0002").endswith("---\nBody in *markdown*.\n")

    json_fm = frontmatter(project, "S-0003")
    assert (json_fm["title"], json_fm["labels"], json_fm["priority"]) == (
        "From JSON",
        ["a", "b"],
        3,
    )

    plain = frontmatter(project, "S-0004")
    assert plain["title"] == "Just a heading" and plain["status"] == "backlog"
    assert story_text(project, "S-0004").endswith("---\n# Just a heading\n\nSome text.\n")

    board = json.loads(cli("status", "--json").stdout)
    assert board["counts"]["total"] == 4 and board["errors"] == []


def test_add_from_one_file_prints_its_id(cli: CliRunner, project: Path, tmp_path: Path) -> None:
    doc = tmp_path / "one.md"
    doc.write_text("---\ntitle: Single\n---\nText\n")
    assert cli("add", "First").returncode == 0
    result = cli("add", "--from", str(doc), "--label", "extra")
    assert result.returncode == 0, result.output
    assert result.stdout == "S-0002\n"
    fm = frontmatter(project, "S-0002")
    assert fm["labels"] == ["extra"] and fm["priority"] == 20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\ntitle: [unclosed\n---\nbody\n", "bad YAML frontmatter"),
        ('+++\ntitle = "x\n+++\nbody\n', "bad frontmatter"),
        ('{\n"title": 1,,\n}\nbody\n', "bad frontmatter"),
        ("---\n- a\n- b\n---\nbody\n", "the frontmatter is not a mapping"),
        ("---\nlabels: [x]\n---\nno heading here\n", "has no title"),
        ("---\ntitle: T\npriority: high\n---\n", "priority must be a whole number"),
        ("---\ntitle: T\nlabels: {a: 1}\n---\n", "labels/tags must be a list"),
        (b"\xff\xfe bad".decode("latin-1"), "is not UTF-8 text"),
    ],
)
def test_a_bad_file_creates_nothing(
    cli: CliRunner, project: Path, tmp_path: Path, text: str, message: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-good.md").write_text("# Good one\n")
    bad = docs / "b-bad.md"
    if message == "is not UTF-8 text":
        bad.write_bytes(b"# Title \xff\xfe\n")
    else:
        bad.write_text(text)
    (docs / "c-good.md").write_text("# Another good one\n")
    result = cli("add", "--from", str(docs))
    assert result.returncode == 3, result.output
    assert str(bad) in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert story_ids(project) == []


def test_add_from_usage_errors(cli: CliRunner, project: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli("add", "--from", str(empty))
    assert result.returncode == 3 and "holds no *.md file" in result.stderr
    missing = cli("add", "--from", str(tmp_path / "nope.md"))
    assert missing.returncode == 3 and "does not exist" in missing.stderr
    both = cli("add", "Title", "--from", str(empty))
    assert both.returncode == 2 and "not both" in both.stderr
    assert cli("add").returncode == 2
    assert story_ids(project) == []


ISSUES = [
    {
        "number": 12,
        "title": "Crash when the board is empty",
        "body": "Steps:\r\n1. run status\r\n",
        "url": "https://github.com/example/project/issues/12",
        "state": "OPEN",
        "labels": ["bug", "ai-sdlc"],
    },
    {
        "number": 15,
        "title": "Export as CSV",
        "body": "",
        "url": "https://github.com/example/project/issues/15",
        "state": "OPEN",
        "labels": ["ai-sdlc", "enhancement"],
    },
    {
        "number": 9,
        "title": "Old closed thing",
        "body": "done long ago",
        "url": "https://github.com/example/project/issues/9",
        "state": "CLOSED",
        "labels": ["ai-sdlc", "Type: Documentation"],
    },
    {
        "number": 20,
        "title": "Unlabelled",
        "body": "x",
        "url": "https://github.com/example/project/issues/20",
        "state": "OPEN",
        "labels": [],
    },
]


@pytest.fixture
def gh_env(tmp_path: Path, project: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    install_gh(bin_dir)
    issues = tmp_path / "issues.json"
    issues.write_text(json.dumps(ISSUES))
    for key, value in (
        ("resilience.policies.github.initial_delay", "0.01"),
        ("resilience.policies.github.max_delay", "0.02"),
    ):
        assert run_cli(project, "config", key, value).returncode == 0
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_GH_ISSUES": str(issues),
        "FAKE_GH_LOG": str(tmp_path / "gh.log"),
    }


def test_import_github_records_tickets_and_never_twice(
    cli: CliRunner, project: Path, gh_env: dict[str, str], tmp_path: Path
) -> None:
    first = cli("import", "github", "--label", "ai-sdlc", env=gh_env)
    assert first.returncode == 0, first.output
    assert first.stdout.split() == ["S-0001", "S-0002"]
    calls = gh_calls(tmp_path / "gh.log")
    assert calls == [
        [
            "issue",
            "list",
            "--json",
            "number,title,body,labels,url,state",
            "--state",
            "open",
            "--limit",
            "100",
            "--label",
            "ai-sdlc",
        ]
    ]
    older = frontmatter(project, "S-0001")  # oldest issue first
    assert older["title"] == "Crash when the board is empty"
    assert older["labels"] == ["bug", "ai-sdlc"]
    assert older["ticket_provider"] == "github"
    assert older["ticket_id"] == "12"
    assert older["ticket_url"] == "https://github.com/example/project/issues/12"
    assert str(older["ticket_synced_at"]).endswith("Z")
    text = story_text(project, "S-0001")
    assert "ticket_id: '12'\n" in text  # a string, quoted as the TypeScript tool writes it
    assert text.endswith(
        "# Crash when the board is empty\n\nImported from "
        "https://github.com/example/project/issues/12\n\nSteps:\n1. run status\n"
    )

    again = cli("import", "github", "--state", "all", "--json", env=gh_env)
    assert again.returncode == 0, again.output
    report = json.loads(again.stdout)
    assert [s["issue"] for s in report["created"]] == [9, 20]
    assert sorted(s["issue"] for s in report["skipped"]) == [12, 15]
    assert story_ids(project) == ["S-0001", "S-0002", "S-0003", "S-0004"]
    # The labels say the type: bug → bug, enhancement → feature, documentation → chore.
    types = [frontmatter(project, sid)["type"] for sid in story_ids(project)]
    assert types == ["bug", "feature", "chore", "feature"]
    third = cli("import", "github", "--state", "all", env=gh_env)
    assert third.returncode == 0 and "Skipped 4 already imported issues." in third.stderr
    assert story_ids(project) == ["S-0001", "S-0002", "S-0003", "S-0004"]


def test_import_github_retries_under_the_github_policy(
    cli: CliRunner, project: Path, gh_env: dict[str, str], tmp_path: Path
) -> None:
    flaky = {**gh_env, "FAKE_GH_FAIL": "issue-list", "FAKE_GH_FAIL_TIMES": "1"}
    result = cli("import", "github", "--limit", "1", env=flaky)
    assert result.returncode == 0, result.output
    assert len(gh_calls(tmp_path / "gh.log")) == 2
    assert story_ids(project) == ["S-0001"]
    assert frontmatter(project, "S-0001")["ticket_id"] == "20"


def test_import_github_failures_are_clear(
    cli: CliRunner, project: Path, gh_env: dict[str, str], tmp_path: Path
) -> None:
    down = cli("import", "github", env={**gh_env, "FAKE_GH_FAIL": "issue-list"})
    assert down.returncode == 1 and "GitHub could not be reached" in down.stderr, down.output
    auth = cli(
        "import",
        "github",
        env={
            **gh_env,
            "FAKE_GH_FAIL": "issue-list",
            "FAKE_GH_FAIL_MESSAGE": "To get started with GitHub CLI, please run:  gh auth login",
        },
    )
    assert auth.returncode == 1 and "gh issue list failed" in auth.stderr, auth.output
    bad_state = cli("import", "github", "--state", "merged", env=gh_env)
    assert bad_state.returncode == 2 and "unknown state" in bad_state.stderr
    no_gh = cli("import", "github", env={**gh_env, "PATH": str(tmp_path / "empty-bin")})
    assert no_gh.returncode == 1 and "gh is not installed" in no_gh.stderr, no_gh.output
    assert "Traceback" not in down.stderr + auth.stderr + no_gh.stderr
    assert story_ids(project) == []
