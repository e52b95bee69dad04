"""The board (`status`) as a person sees it in a real terminal: at 80 columns the blocked reason
is whole under the board instead of `↳ Implementat…`, at 50 columns the columns are stacked
(no `Backl… │ Rea…` headers), and `--hide-done` leaves done stories off, saying how many."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_sdlc.cli.storyrows import cell_len
from tests.cli.test_board import BOX, REASON, note_lines, on_terminal, write_story
from tests.conftest import CliRunner
from tests.support.git_support import git_env

__all__ = ["git_env"]

pytestmark = pytest.mark.e2e


@pytest.fixture
def blocked(project: Path) -> Path:
    write_story(project, "S-0001", title="Meter the power", status="blocked", blocked_reason=REASON)
    write_story(project, "S-0002", title="Read the meter", status="ready", priority=1)
    write_story(project, "S-0003", title="Chart the readings", status="backlog")
    return project


def test_at_50_columns_the_board_is_stacked_and_nothing_is_cut(blocked: Path) -> None:
    code, lines, stderr = on_terminal(blocked, "status", columns=50)
    assert code == 0, stderr
    assert lines and all(cell_len(line) <= 50 for line in lines), lines
    screen = "\n".join(lines)
    assert not BOX & set(screen) and "…" not in screen  # no table of cut headers
    for header in ("Backlog (1)", "Ready (1)", "In progress (0)", "Blocked (1)", "Done (0)"):
        assert header in lines
    # wrapped whole: a word longer than the screen continues on the next line
    reason = note_lines(lines, "      reason: ")
    assert "".join(" ".join(reason).split()) == "reason:" + "".join(REASON.split())


def test_list_at_50_columns_puts_each_title_whole_under_its_story(project: Path) -> None:
    """`list` at 50 columns left 2 columns for the title (`A…`): each title now goes whole,
    wrapped, on the lines under its story's fields; at 80 columns it stays on the line."""
    title = "Make the power meter readable on small screens without scrolling sideways"
    write_story(project, "S-0001", title=title, status="ready")
    write_story(project, "S-0002", title="Read the meter", status="backlog")
    code, lines, stderr = on_terminal(project, "list", columns=50)
    assert code == 0, stderr
    assert all(cell_len(line) <= 50 for line in lines), lines
    assert lines[0].split() == ["ID", "STATUS", "PRI", "TYPE", "EPIC", "DEPS", "REC"]
    assert lines[1].split()[0] == "S-0001" and "…" not in "\n".join(lines)
    under = []
    for line in lines[2:]:
        if not line.startswith("    "):
            break
        under.append(line.strip())
    assert " ".join(under) == title
    assert "Read the meter" in lines[lines.index(next(x for x in lines if "S-0002" in x)) + 1]
    code, wide, stderr = on_terminal(project, "list", columns=80)
    assert code == 0 and wide[0].split()[-1] == "TITLE" and len(wide) == 3, wide


def test_at_80_columns_the_reason_is_whole_under_the_board(blocked: Path) -> None:
    code, lines, stderr = on_terminal(blocked, "status", columns=80)
    assert code == 0, stderr
    assert all(cell_len(line) <= 80 for line in lines), lines
    assert "│" in "\n".join(lines)  # the table still fits six columns
    assert not any("↳ Implementat" in line for line in lines)
    reason = note_lines(lines, "■ S-0001 blocked: ")
    assert " ".join(reason).split() == ["■", "S-0001", "blocked:", *REASON.split()]


def test_done_stories_can_be_hidden(cli: CliRunner, project: Path) -> None:
    write_story(project, "S-0001", title="Still open", status="blocked", blocked_reason="why")
    done = [f"S-{n:04d}" for n in range(2, 21)]
    for sid in done:
        write_story(project, sid, title=f"Finished {sid}", status="done")

    code, full, stderr = on_terminal(project, "status", columns=80)
    assert code == 0, stderr
    assert all(any(sid in line for line in full) for sid in done)

    code, lines, stderr = on_terminal(project, "status", "--hide-done", columns=80)
    assert code == 0, stderr
    screen = "\n".join(lines)
    assert "(19 hidden)" in screen and "S-0001" in screen
    assert not any(sid in screen for sid in done)
    assert len(lines) < 15 < len(full)

    piped = cli("status", "--hide-done", env={"COLUMNS": "80"})
    assert piped.returncode == 0, piped.output
    assert "Done (19 hidden)" in piped.stdout.splitlines()
    assert not any(sid in piped.stdout for sid in done)
    # the data keeps every story: hiding is a view
    as_json = cli("status", "--hide-done", "--json")
    assert '"total": 20' in as_json.stdout


@pytest.mark.usefixtures("git_env")
def test_a_conflict_is_named_whole_under_the_board(tmp_path: Path) -> None:
    from tests.git.test_sibling_conflicts import _two_siblings_one_merged

    p, one, two = _two_siblings_one_merged(tmp_path)
    code, lines, stderr = on_terminal(p.root, "status", columns=80)
    assert code == 0, stderr
    assert all(cell_len(line) <= 80 for line in lines), lines
    assert any("⚠ conflicts: below" in line for line in lines), lines
    note = note_lines(lines, f"⚠ {two} conflicts: ")
    assert " ".join(note) == f"⚠ {two} conflicts: shared.txt (ai-sdlc run {two})"
    assert not any(line.startswith(f"⚠ {one}") for line in lines)
