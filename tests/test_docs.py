"""The README and docs/ as a reader meets them: parsed by a real markdown parser (markdown-it-py,
the CommonMark parser with GFM tables), not by eye. A table whose rows do not match its header
(issue 25: the `--json` fields table spliced into the commands table), a link to a moved page or
a missing heading, a command the README forgot, timings of a particular day in Quick start:
each fails here."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tests.conftest import run_cli
from tests.support.git_support import git, git_env  # noqa: F401 (fixture)
from tests.support.paths import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 250


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _tokens(text: str) -> list[Token]:
    return _parser().parse(text)


def _cells(row: str) -> list[str]:
    """The cells of one source row of a GFM table (`\\|` is an escaped pipe, not a border)."""
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return re.split(r"(?<!\\)\|", row)


@dataclass
class Table:
    start: int  # 0-based source line of the header row
    header: list[str]
    rows: list[tuple[int, list[str]]]  # (0-based source line, cells), delimiter row excluded


def tables(text: str) -> list[Table]:
    """Every table the parser found, with its rows as written in the source. The parser itself
    pads or cuts a row to the header's width, so the widths are counted on the source lines."""
    lines = text.splitlines()
    found = []
    for token in _tokens(text):
        if token.type != "table_open" or token.map is None:
            continue
        first, end = token.map
        header = [c.strip() for c in _cells(lines[first])]
        rows = [(i, _cells(lines[i])) for i in range(first + 2, end) if lines[i].strip()]
        found.append(Table(first, header, rows))
    return found


def table_problems(text: str) -> list[str]:
    """Rows whose width differs from their header's, and pipe-led lines that are in no table
    (a table broken so badly that the parser renders it as a paragraph)."""
    problems = []
    in_tables: set[int] = set()
    for table in tables(text):
        width = len(table.header)
        in_tables.update(range(table.start, table.start + 2))
        for line_no, cells in table.rows:
            in_tables.add(line_no)
            if len(cells) != width:
                problems.append(
                    f"line {line_no + 1}: {len(cells)} cells under a {width}-column header "
                    f"{' | '.join(table.header)!r} (line {table.start + 1})"
                )
    code_lines = set()
    for token in _tokens(text):
        if token.type in ("fence", "code_block") and token.map is not None:
            code_lines.update(range(*token.map))
    for i, line in enumerate(text.splitlines()):
        if line.lstrip().startswith("|") and i not in in_tables and i not in code_lines:
            problems.append(f"line {i + 1}: a table row outside any table: {line[:60]!r}")
    return problems


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    kept = "".join(
        ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N", "M")
    )
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of every heading of a page (a repeated heading gets -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    result = set()
    tokens = _tokens(text)
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        inline = tokens[i + 1]
        words = "".join(child.content for child in inline.children or [])
        base = slug(words)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(text: str) -> list[str]:
    """Every link and image target of a page (code spans and blocks hold none)."""
    found = []
    for token in _tokens(text):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(str(child.attrs["href"]))
            elif child.type == "image":
                found.append(str(child.attrs["src"]))
    return found


def section(text: str, title: str) -> list[Token]:
    """The tokens under the heading `title` up to the next heading of the same or a higher
    level."""
    tokens = _tokens(text)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and tokens[i + 1].content == title:
            level = int(token.tag[1])
            for j in range(i + 3, len(tokens)):
                if tokens[j].type == "heading_open" and int(tokens[j].tag[1]) <= level:
                    return tokens[i + 3 : j]
            return tokens[i + 3 :]
    raise AssertionError(f"no heading {title!r}")


def cli_commands(tmp_path: Path) -> dict[str, str]:
    """Each command `ai-sdlc --help` lists, with its one-line help, read from the CLI itself."""
    result = run_cli(tmp_path, "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.output
    commands = {}
    lines = result.stdout.splitlines()
    start = lines.index("Commands:")
    name = None
    for line in lines[start + 1 :]:
        match = re.match(r"^  (\S+)\s{2,}(.*)$", line)
        if match:
            name = match.group(1)
            commands[name] = match.group(2)
        elif name is not None and line.startswith("    ") and line.strip():
            commands[name] += " " + line.strip()  # a summary wrapped under itself
        else:
            break
    assert len(commands) > 10, result.stdout
    return commands


def commands_in_table(table: Table) -> set[str]:
    """The commands a commands table lists: `ai-sdlc NAME` in the first column, and the
    aliases its rows name (`alias `details``)."""
    names = set()
    for _, cells in table.rows:
        first = cells[0]
        names.update(re.findall(r"`ai-sdlc ([a-z][a-z-]*)", first))
        for cell in cells:
            names.update(re.findall(r"alias `([a-z][a-z-]*)`", cell))
    return names


def _table_after(text: str, title: str) -> Table:
    tokens = section(text, title)
    opening = next(t for t in tokens if t.type == "table_open")
    assert opening.map is not None
    return next(t for t in tables(text) if t.start == opening.map[0])


# -- the checks themselves fail on what issue 25 found --------------------------------------


SPLICED = """\
| command | what it does |
| --- | --- |
| `ai-sdlc init` | create `.ai-sdlc/` |

`status --json` fields:

| command | field | meaning |
| --- | --- | --- |
| `status` | `counts` | stories per status |
| `ai-sdlc run` | the workflow |
"""


def test_the_table_check_catches_a_table_spliced_into_another() -> None:
    problems = table_problems(SPLICED)
    assert problems == [
        "line 10: 2 cells under a 3-column header 'command | field | meaning' (line 7)"
    ]


def test_the_table_check_catches_a_table_the_parser_does_not_see() -> None:
    broken = "| a | b |\n| c | d |\n"  # no delimiter row: a paragraph, not a table
    assert len(table_problems(broken)) == 2
    assert table_problems("| a | b |\n| --- | --- |\n| `x \\| y` | z |\n") == []


def test_slugs_follow_github() -> None:
    assert slug("Guardrail settings changed behind the tool's back") == (
        "guardrail-settings-changed-behind-the-tools-back"
    )
    assert slug("Command agents: codex, aider, gemini") == "command-agents-codex-aider-gemini"
    assert anchors("## `log`\n\n## Log\n") == {"log", "log-1"}


# -- README and docs/ -------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_row_has_its_headers_width(page: Path) -> None:
    assert table_problems(page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
            continue
        wanted = fragment and resolved.suffix == ".md"
        if wanted and fragment not in anchors(resolved.read_text()):
            broken.append(f"{target}: no heading with anchor #{fragment} in {resolved.name}")
    assert broken == []


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < MAX_README_LINES, f"README.md has {lines} lines"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in links(README.read_text())
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)
    }
    assert [page.name for page in DOCS if page.resolve() not in linked] == []


def test_quick_start_is_exactly_the_two_make_commands() -> None:
    tokens = section(README.read_text(), "Quick start")
    blocks = [t for t in tokens if t.type in ("fence", "code_block")]
    assert len(blocks) == 1
    assert blocks[0].content.splitlines() == ["make demo", "make test"]
    prose = " ".join(t.content for t in tokens if t.type == "inline")
    # figures of a particular run belong in docs/benchmarks.md
    assert not re.search(r"\d+(\.\d+)?\s*(s|ms|min|seconds|minutes)\b", prose), prose
    assert not re.search(r"\b\d{1,3}(,\d{3})+ tests|\(\d[\d,]* tests", prose), prose


def test_the_readme_holds_no_figures_of_a_particular_day() -> None:
    text = README.read_text()
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    assert "bench/" not in text


def test_the_readme_never_sends_a_user_to_the_clones_venv() -> None:
    # `.venv/bin/ai-sdlc` exists only in a clone after `make`; a user installs the command
    assert ".venv/bin/ai-sdlc" not in README.read_text()


def test_the_readme_commands_table_lists_every_command_of_the_cli(tmp_path: Path) -> None:
    cli = cli_commands(tmp_path)
    table = _table_after(README.read_text(), "Commands at a glance")
    assert table.header == ["command", "what it does"]
    listed = commands_in_table(table)
    assert sorted(set(cli) - listed) == []
    assert sorted(listed - set(cli)) == []  # and nothing the CLI does not have


def test_the_reference_commands_table_lists_every_command_of_the_cli(tmp_path: Path) -> None:
    cli = cli_commands(tmp_path)
    table = _table_after((ROOT / "docs" / "commands.md").read_text(), "Every command")
    listed = commands_in_table(table)
    assert sorted(set(cli) - listed) == []
    assert sorted(listed - set(cli)) == []


def test_the_provider_versions_are_those_the_real_agent_suite_installs() -> None:
    from tests.e2e.realcli.install import TOOLS

    text = (ROOT / "docs" / "providers.md").read_text()
    rows = {
        cells[0].strip(): cells
        for _, cells in _table_after(text, "Command agents: codex, aider, gemini").rows
    }
    by_package = {cells[1].split("`")[1]: cells[2].strip() for cells in rows.values()}
    assert by_package == {tool.package: tool.version for tool in TOOLS.values()}


def test_the_preset_table_says_how_each_preset_is_read() -> None:
    """Each `command` preset has its row, naming the output format the preset really uses."""
    from ai_sdlc.providers.command_presets import PRESETS

    text = (ROOT / "docs" / "providers.md").read_text()
    found = [t for t in tables(text) if t.header[0].strip() == "preset"]
    assert len(found) == 1
    rows = {cells[0].strip().strip("`"): cells for _, cells in found[0].rows}
    assert set(rows) == set(PRESETS)
    for name, preset in PRESETS.items():
        assert f"read as `{preset.output}`" in rows[name][2], name
        assert preset.template[0] in rows[name][1], name
    retries = [t for t in tables(text) if t.header[1].strip() == "who retries"]
    assert len(retries) == 1
    agents = {cells[0].strip() for _, cells in retries[0].rows}
    assert {f"`{name}` preset" for name in PRESETS} <= agents


def test_the_readme_names_the_versions_the_real_agent_suite_installs() -> None:
    from tests.e2e.realcli.install import TOOLS

    text = " ".join(README.read_text().split())
    names = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "aider": "Aider"}
    for key, tool in TOOLS.items():
        assert f"{names[key]} {tool.version}" in text, (names[key], tool.version)
