"""The board and the list for a terminal (`status`, `list`), `show` in full, `log --full`.

Widths are checked as a user sees them: the real CLI with stdout on a pseudo-terminal of 80 and
120 columns (rich draws the board there), and piped with `COLUMNS` set (plain lines)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from ai_sdlc.cli.storyrows import cell_len, clip
from tests.conftest import CliRunner, cli_environment

REASON = (
    "Implementation failed verification 4 times (limit 3 retries): tests/test_power.py::"
    "test_meter_reads_zero_when_idle failed with AssertionError: expected 0 watts, got 12; run "
    "`ai-sdlc unblock S-0001 --reset-retries` once the implementation is fixed by hand, or "
    "split the story into smaller ones so each attempt has less to get right"
)
LONG_TITLE = "Make the power meter readable on small screens without scrolling sideways"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = set("─│┃━┏┓┗┛┡┩╇╋┼├┤┬┴╭╮╰╯")


def write_story(project: Path, sid: str, **fields: object) -> Path:
    """A story file with these frontmatter fields (YAML values as JSON: a subset of YAML)."""
    body = fields.pop("body", f"# {fields.get('title', sid)}\n\nSome text.\n")
    lines = [f"id: {sid}"] + [f"{k}: {json.dumps(v)}" for k, v in fields.items()]
    path = project / ".ai-sdlc" / "stories" / sid / "story.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n" + "\n".join(lines) + f"\n---\n{body}", encoding="utf-8")
    return path


@pytest.fixture
def backlog(project: Path) -> Path:
    """Four stories: a blocked one with a long reason, an epic, dependencies and labels."""
    write_story(
        project,
        "S-0001",
        title=LONG_TITLE,
        status="blocked",
        priority=2,
        type="bug",
        epic="E-01",
        dependencies=["S-0002", "S-0003"],
        labels=["ui", "power"],
        blocked_reason=REASON,
        total_recovery_attempts=3,
        recovery_breakdown={"implementation_retry": 3},
        implementation_retry_count=3,
        updated="2026-01-05",
    )
    write_story(
        project,
        "S-0002",
        title="Read the meter",
        status="ready",
        priority=1,
        type="feature",
        epic="E-01",
        labels=["power"],
        updated="2026-01-09",
    )
    write_story(
        project, "S-0003", title="Tidy the build", status="done", type="chore", updated="2026-01-01"
    )
    write_story(
        project,
        "S-0004",
        title="Spike: a new chart",
        status="backlog",
        priority=5,
        type="spike",
        labels=["ui"],
        updated="2026-01-07",
    )
    return project


def on_terminal(project: Path, *args: str, columns: int) -> tuple[int, list[str], str]:
    """`ai-sdlc <args>` with stdout on a pseudo-terminal `columns` wide: (exit code, the screen's
    lines without ANSI codes, stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = cli_environment({"COLUMNS": str(columns), "TERM": "xterm-256color"})
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), *args],
        stdout=slave,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    code = proc.wait(timeout=60)
    screen = ANSI.sub("", b"".join(chunks).decode("utf-8").replace("\r\n", "\n"))
    return code, screen.splitlines(), stderr


def note_lines(lines: list[str], start: str) -> list[str]:
    """A note under the board: its first line (starting with `start`) and the indented lines
    that continue it."""
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    out = [lines[first]]
    for line in lines[first + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line.strip())
    return out


@pytest.mark.parametrize("columns", [80, 120])
def test_board_fits_the_terminal(backlog: Path, columns: int) -> None:
    code, lines, stderr = on_terminal(backlog, "status", columns=columns)
    assert code == 0, stderr
    assert lines and all(cell_len(line) <= columns for line in lines), lines
    screen = "\n".join(lines)
    assert "│" in screen  # rich's table, not the plain lines
    for header in ("Backlog", "Ready", "Blocked", "Done"):
        assert header in screen
    assert "(1)" in screen and "S-0001" in screen and "S-0004" in screen
    # the card points below the board, where the reason is whole, wrapped on words
    assert "■ why: below" in screen
    reason = note_lines(lines, "■ S-0001 blocked: ")
    assert len(reason) > 1 and "…" not in " ".join(reason)
    assert " ".join(reason).split() == ["■", "S-0001", "blocked:", *REASON.split()]
    # the compact hint: priority, type, epic at least on the wider screen
    if columns >= 120:
        assert "p2 [bug] ◆E-01" in screen


def test_board_piped_is_plain_and_fits_columns(cli: CliRunner, backlog: Path) -> None:
    result = cli("status", env={"COLUMNS": "80"})
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert not BOX & set(result.stdout)
    blocked = lines.index("Blocked (1)")
    assert lines[blocked + 1].startswith("  S-0001  Make the power meter")
    assert lines[blocked + 2].split() == ["p2", "[bug]", "◆E-01", "⇠S-0002,S-0003", "↻3/10"]
    # the reason wrapped whole under the story, never cut
    reason = note_lines(lines, "      reason: ")
    assert " ".join(reason).split() == ["reason:", *REASON.split()]
    assert lines[blocked + 3 + len(reason)].startswith("Done")
    # without a width the whole text (a script reading the pipe gets everything)
    whole = cli("status", env={"COLUMNS": ""}).stdout
    assert REASON in whole and LONG_TITLE in whole


def test_clip_wraps_on_words_and_marks_the_cut() -> None:
    assert clip("one two three", 20) == ["one two three"]
    assert clip("one two three four", 9, 2) == ["one two", "three…"]
    assert clip("alpha beta", 5, 1) == ["alph…"]  # cut words are never continued
    assert clip("abcdefghijkl mn", 6, 2) == ["abcde…"]
    assert clip("ab cd ef", 5, 2) == ["ab cd", "ef"]
    assert clip("  spaced\n\nout ", 20) == ["spaced out"]
    assert clip("全角の文字列です とても長い", 10, 1) == ["全角の文…"]
    for width in range(2, 30):
        for line in clip(REASON, width, 2):
            assert cell_len(line) <= width


def listed(cli: CliRunner, *args: str) -> list[str]:
    result = cli("list", *args)
    assert result.returncode == 0, result.output
    return [line.split()[0] for line in result.stdout.splitlines()[1:]]


def test_list_filters_and_sorts(cli: CliRunner, backlog: Path) -> None:
    assert listed(cli) == ["S-0001", "S-0002", "S-0003", "S-0004"]
    assert listed(cli, "--status", "ready") == ["S-0002"]
    assert listed(cli, "--status", "ready", "-s", "done") == ["S-0002", "S-0003"]
    assert listed(cli, "--blocked") == ["S-0001"]
    assert listed(cli, "--blocked", "--status", "backlog") == ["S-0001", "S-0004"]
    assert listed(cli, "--label", "ui") == ["S-0001", "S-0004"]
    assert listed(cli, "--label", "ui", "--label", "power") == ["S-0001"]
    assert listed(cli, "--epic", "E-01") == ["S-0001", "S-0002"]
    assert listed(cli, "--epic", "E-01", "--status", "ready") == ["S-0002"]
    assert listed(cli, "--sort", "priority") == ["S-0002", "S-0001", "S-0004", "S-0003"]
    assert listed(cli, "--sort", "status") == ["S-0004", "S-0002", "S-0001", "S-0003"]
    assert listed(cli, "--sort", "updated") == ["S-0002", "S-0004", "S-0001", "S-0003"]
    assert listed(cli, "--sort", "id") == ["S-0001", "S-0002", "S-0003", "S-0004"]
    none = cli("list", "--label", "nope")
    assert none.returncode == 0 and none.stdout == "" and "No stories match" in none.stderr
    bad = cli("list", "--status", "stuck")
    assert bad.returncode == 2 and "unknown status 'stuck'" in bad.stderr and bad.stdout == ""
    assert "in-progress" in bad.stderr  # the hint lists what is accepted
    wrong = cli("list", "--sort", "size")
    assert wrong.returncode == 2 and "unknown sort 'size'" in wrong.stderr


def test_list_lines_fields_and_width(cli: CliRunner, backlog: Path) -> None:
    result = cli("list", env={"COLUMNS": "80"})
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "PRI", "TYPE", "EPIC", "DEPS", "REC", "TITLE"]
    assert all(len(line) <= 80 for line in lines) and not BOX & set(result.stdout)
    first = lines[1].split()
    assert first[:7] == ["S-0001", "blocked", "2", "bug", "E-01", "S-0002,S-0003", "3/10"]
    assert lines[1].endswith("…") and "Make the power" in lines[1]
    assert lines[3].split()[:7] == ["S-0003", "done", "-", "chore", "-", "-", "0/10"]
    whole = cli("list", env={"COLUMNS": ""}).stdout
    assert LONG_TITLE in whole
    # the counter's limit is the configured one
    assert cli("config", "limits.global_recovery", "7").returncode == 0
    assert "3/7" in cli("list", "--blocked").stdout.split()


def test_list_json(cli: CliRunner, backlog: Path) -> None:
    result = cli("list", "--json", "--label", "ui")
    assert result.returncode == 0 and result.stderr == ""
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == ["S-0001", "S-0004"]
    first = rows[0]
    assert first == {
        "id": "S-0001",
        "title": LONG_TITLE,
        "status": "blocked",
        "waiting_for": None,
        "priority": 2,
        "type": "bug",
        "epic": "E-01",
        "dependencies": ["S-0002", "S-0003"],
        "labels": ["ui", "power"],
        "total_recovery_attempts": 3,
        "global_recovery_limit": 10,
        "counter": "3/10",
        "unverified": False,
        "counter_in_file": None,
        "counter_note": None,
        "blocked_reason": REASON,
        "conflicts": [],
        "conflicts_between": [],
        "conflicts_note": None,
        "created": None,
        "updated": "2026-01-05",
    }
    assert json.loads(cli("list", "--json", "--epic", "none").stdout) == []


def test_list_on_a_terminal(backlog: Path) -> None:
    code, lines, stderr = on_terminal(backlog, "list", columns=80)
    assert code == 0, stderr
    assert lines[0].split()[0] == "ID" and len(lines) == 5
    assert all(cell_len(line) <= 80 for line in lines)
    assert lines[1].rstrip().endswith("…")


def test_list_reports_a_bad_story_file(cli: CliRunner, backlog: Path) -> None:
    bad = backlog / ".ai-sdlc" / "stories" / "S-0009" / "story.md"
    bad.parent.mkdir()
    bad.write_text("---\nid: S-0009\ntitle: x\nstatus: sideways\n---\n")
    result = cli("list")
    assert result.returncode == 3
    assert "S-0001" in result.stdout and "S-0009" not in result.stdout
    assert str(bad) in result.stderr and "Traceback" not in result.stderr


def test_show_in_full(cli: CliRunner, backlog: Path) -> None:
    story = backlog / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    worktree = backlog / "wt" / "S-0001"  # `show` names a worktree only while it exists
    worktree.mkdir(parents=True)
    text = story.read_text().replace(
        "updated:",
        f'branch: "ai-sdlc/S-0001"\nworktree_path: "{worktree}"\n'
        'pr_url: "https://github.com/o/r/pull/7"\n'
        'ticket_url: "https://github.com/o/r/issues/3"\ncreated: "2026-01-02"\n'
        "usage: {input_tokens: 1200, output_tokens: 340, calls: 3, cost_usd: 0.0123}\n"
        "updated:",
    )
    story.write_text(text.replace("Some text.", "The meter must read zero when idle."))
    result = cli("show", "S-0001")
    assert result.returncode == 0 and result.stderr == ""
    out = result.stdout
    for expected in (
        f"S-0001  {LONG_TITLE}",
        "  status:    blocked",
        "  type:      bug",
        "  priority:  2",
        "  epic:      E-01",
        "  dependencies: S-0002, S-0003",
        "  labels:    ui, power",
        "  created:   2026-01-02",
        "  updated:   2026-01-05",
        "  branch:    ai-sdlc/S-0001",
        f"  worktree:  {worktree}",
        "  pr:        https://github.com/o/r/pull/7",
        "  ticket:    https://github.com/o/r/issues/3",
        "  recovery:  3/10 (3 implementation retries)",
        "    implementation_retry_count: 3",
        "  usage:     1,200 in + 340 out tokens in 3 calls, $0.0123",
        f"  blocked:   {REASON}",
    ):
        assert expected in out.splitlines(), (expected, out)
    assert "The meter must read zero" not in out
    with_body = cli("show", "S-0001", "--body").stdout
    assert with_body.startswith(out)
    assert with_body[len(out) :] == f"\n# {LONG_TITLE}\n\nThe meter must read zero when idle.\n"

    data = json.loads(cli("show", "S-0001", "--json").stdout)
    assert {k: data[k] for k in ("type", "priority", "epic", "dependencies", "labels")} == {
        "type": "bug",
        "priority": 2,
        "epic": "E-01",
        "dependencies": ["S-0002", "S-0003"],
        "labels": ["ui", "power"],
    }
    assert data["branch"] == "ai-sdlc/S-0001" and data["worktree"] == str(worktree)
    assert data["pr_url"].endswith("/pull/7") and data["ticket_url"].endswith("/issues/3")
    assert data["created"] == "2026-01-02" and data["updated"] == "2026-01-05"
    assert data["usage"] == {
        "input_tokens": 1200,
        "output_tokens": 340,
        "calls": 3,
        "cost_usd": 0.0123,
    }
    assert data["blocked_reason"] == REASON and "body" not in data
    assert json.loads(cli("show", "S-0001", "--json", "--body").stdout)["body"].startswith("# ")


def test_show_of_a_plain_story_says_what_is_missing(cli: CliRunner, backlog: Path) -> None:
    out = cli("show", "S-0003").stdout.splitlines()
    assert "  usage:     none recorded" in out
    assert not any(
        line.startswith(("  epic:", "  dependencies:", "  pr:", "  blocked:")) for line in out
    )
    data = json.loads(cli("show", "S-0003", "--json").stdout)
    assert data["epic"] is None and data["dependencies"] == [] and data["pr_url"] is None
    assert data["usage"] == {"input_tokens": 0, "output_tokens": 0, "calls": 0, "cost_usd": None}


def test_log_full_shows_the_whole_failing_output(cli: CliRunner, project: Path) -> None:
    noisy = "import sys\nfor i in range(400): print(f'check {i:03d} failed: value was wrong')\n"
    noisy += "sys.exit(1)"
    command = shlex.join([sys.executable, "-c", noisy])
    assert cli("config", "verify.test", command).returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("run", "S-0001", "--no-worktree").returncode == 5

    short = cli("log", "S-0001")
    assert short.returncode == 0
    assert "check 200 failed" not in short.stdout
    assert "ai-sdlc log S-0001 --full` shows them whole" in short.stderr

    full = cli("log", "S-0001", "--full")
    assert full.returncode == 0 and "--full" not in full.stderr
    events = [
        json.loads(line)
        for line in (project / ".ai-sdlc/stories/S-0001/events.jsonl").read_text().splitlines()
    ]
    failed = [e for e in events if e["action"] == "phase" and e["outcome"] == "failed"]
    assert len(failed) == 4 and all(e["output_file"] for e in failed)
    lines = full.stdout.splitlines()
    for event in failed:  # under each failed attempt, its whole output, every line in order
        header = lines.index(f"    output ({event['output_file']}):")
        body = [line.strip() for line in lines[header + 1 : header + 401]]
        assert body == [f"check {i:03d} failed: value was wrong" for i in range(400)]
    # the event keeps the shortened feedback (the prompt's); the whole output is beside it
    assert "lines omitted" in failed[0]["feedback"]
    kept = project / ".ai-sdlc/stories/S-0001" / failed[0]["output_file"]
    assert kept.read_text().splitlines()[:400] == body


def test_log_full_never_reads_a_file_an_event_names_elsewhere(
    cli: CliRunner, project: Path, tmp_path: Path
) -> None:
    assert cli("add", "Hostile").returncode == 0
    secret = tmp_path / "secret.txt"
    secret.write_text("do not print me")
    events = project / ".ai-sdlc/stories/S-0001/events.jsonl"
    event = {
        "time": "2026-01-01T00:00:00.000Z",
        "action": "phase",
        "phase": "implement",
        "outcome": "failed",
        "feedback": "short\nfeedback",
    }
    lines = [
        {**event, "output_file": str(secret)},
        {**event, "output_file": "attempts/../../../../secret.txt"},
        {**event, "output_file": "attempts/9.output.txt"},  # a missing file
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    full = cli("log", "S-0001", "--full")
    assert full.returncode == 0
    assert "do not print me" not in full.stdout
    assert full.stdout.count("    feedback:") == 3  # the event's own text instead


def test_a_story_at_a_gate_is_listed_as_waiting(cli: CliRunner, backlog: Path) -> None:
    write_story(
        backlog,
        "S-0005",
        title="Planned, held at the gate",
        status="in-progress",
        plan_complete=True,
    )
    assert listed(cli, "--status", "waiting") == []  # no gate configured: in progress
    assert listed(cli, "--status", "in-progress") == ["S-0005"]
    assert cli("config", "gates.before_implementation", "true").returncode == 0
    assert listed(cli, "--status", "waiting") == ["S-0005"]
    assert listed(cli, "--status", "in-progress") == ["S-0005"]  # its status is still that
    row = json.loads(cli("list", "--json", "-s", "waiting").stdout)[0]
    assert (row["status"], row["waiting_for"]) == ("in-progress", "before_implementation")
    assert cli("list", "-s", "waiting").stdout.splitlines()[1].split()[1] == "waiting"
    code, lines, stderr = on_terminal(backlog, "status", columns=80)
    assert code == 0, stderr
    assert all(cell_len(line) <= 80 for line in lines)
    assert any("↳ gate:" in line for line in lines), lines
