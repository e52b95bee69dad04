"""Listing: fast loader + cache give exactly what the round-trip parser gives, and stay fresh.

Also, each in its own section below: the foreign documents `add --from` reads (store.foreign),
story ids and references (store.ids) and the archive (store.archive).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ai_sdlc.errors import BusyError, InvalidInputError, UsageError
from ai_sdlc.store import StoryStore, archive, ids, schema
from ai_sdlc.store.cache import FILE_NAME
from ai_sdlc.store.foreign import MAX_BYTES, Draft, documents, read_draft
from ai_sdlc.store.values import strict_equal, to_plain
from tests.support.store_support import FIXTURE_IDS, OLD_NS, make_project, minimal, write_story


def cache_file(store: StoryStore) -> Path:
    return store.cache_dir / FILE_NAME


def cached_ids(store: StoryStore) -> list[str]:
    return sorted(json.loads(cache_file(store).read_text())["entries"])


def assert_matches_roundtrip(store: StoryStore) -> None:
    listed = store.list()
    assert [s.id for s in listed] == sorted(s.id for s in listed)
    for story in listed:
        reference = store.get(story.id)
        assert strict_equal(to_plain(story.frontmatter), to_plain(reference.frontmatter)), story.id
        assert story.to_json() == reference.to_json()
        json.dumps(story.to_json(), allow_nan=False)
        assert story.body == reference.body


def test_cold_and_warm_listing_equal_the_roundtrip_parse(tmp_path: Path) -> None:
    store = make_project(tmp_path)
    assert not cache_file(store).exists()
    assert_matches_roundtrip(store)  # cold: fast loader (+ ruamel for S-0033)
    assert cached_ids(store) == FIXTURE_IDS
    assert_matches_roundtrip(store)  # warm: from the cache


def test_dates_and_odd_values_survive_the_cache(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0032", "S-0033"])
    cold = {s.id: to_plain(s.frontmatter) for s in store.list()}
    warm = {s.id: to_plain(s.frontmatter) for s in store.list()}
    assert strict_equal(cold, warm)
    assert warm["S-0032"]["created"].isoformat() == "2026-02-01"
    assert warm["S-0032"]["blocked_at"].isoformat() == "2026-02-03T17:45:12.500000+01:00"
    assert warm["S-0033"]["octal_looking"] == 777 and warm["S-0033"]["answer"] == "yes"


def test_edit_with_the_same_size_invalidates_the_entry(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0012"])
    assert store.list()[0].counter("retry_count") == 1
    assert cached_ids(store) == ["S-0012"]
    path = store.stories_dir / "S-0012" / "story.md"
    size = path.stat().st_size
    with store.edit("S-0012") as story:
        story.increment("retry_count")
    assert path.stat().st_size == size
    assert store.list()[0].counter("retry_count") == 2


def test_in_place_rewrite_with_same_size_and_inode_is_seen_by_mtime(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", minimal(retry_count="1"))
    assert store.list()[0].counter("retry_count") == 1
    inode = path.stat().st_ino
    with open(path, "r+b") as handle:  # same inode, same size, like an editor saving in place
        data = handle.read()
        handle.seek(0)
        handle.write(data.replace(b"retry_count: 1", b"retry_count: 7"))
    os.utime(path, ns=(OLD_NS + 1, OLD_NS + 1))
    assert path.stat().st_ino == inode
    assert store.list()[0].counter("retry_count") == 7


def test_freshly_modified_files_are_not_cached(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal(), age=False)
    assert [s.id for s in store.list()] == ["S-0001"]
    assert cached_ids(store) == []
    later = StoryStore(tmp_path, now_ns=lambda: time.time_ns() + 10 * 10**9)
    assert [s.id for s in later.list()] == ["S-0001"]
    assert cached_ids(store) == ["S-0001"]


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b"[]",
        b'{"format": "ai-sdlc/story-cache", "version": 999, "entries": {}}',
        b"\x00\xff",
    ],
)
def test_corrupt_or_old_cache_is_ignored_and_rebuilt(tmp_path: Path, content: bytes) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0020"])
    store.cache_dir.mkdir()
    cache_file(store).write_bytes(content)
    assert_matches_roundtrip(store)
    assert cached_ids(store) == ["S-0003", "S-0020"]


def test_foreign_or_tampered_entries_are_not_trusted(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    store.list()
    raw = json.loads(cache_file(store).read_text())
    entry = raw["entries"]["S-0003"]
    entry[3]["fm"]["title"] = "forged"
    moved = dict(raw, stories_dir="/elsewhere/.ai-sdlc/stories")
    cache_file(store).write_text(json.dumps(moved))
    assert store.list()[0].title == "Export the board as CSV"
    entry[3] = {"fm": {"$date": 5}, "plain": False}
    cache_file(store).write_text(json.dumps(raw))
    assert store.list()[0].title == "Export the board as CSV"


def test_unwritable_cache_location_still_lists(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    store.cache_dir.write_text("a file where the cache folder should be")
    assert [s.id for s in store.list()] == ["S-0003"]
    assert store.cache_dir.read_text().startswith("a file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_project_still_lists(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    os.chmod(store.ai_dir, 0o555)
    try:
        assert [s.id for s in store.list()] == ["S-0003"]
    finally:
        os.chmod(store.ai_dir, 0o755)


def test_deleted_stories_leave_the_cache_and_odd_folders_are_ignored(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0012"])
    store.list()
    (store.stories_dir / "S-0012" / "story.md").unlink()
    for name in ("S-1", "S-00012", "notes", "S-0013"):
        (store.stories_dir / name).mkdir()
    (store.stories_dir / "S-1" / "story.md").write_text(minimal("S-1"))
    assert [s.id for s in store.list()] == ["S-0003"]
    assert cached_ids(store) == ["S-0003"]


def test_ids_sort_numerically_past_9999(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    for story_id in ("S-10000", "S-9999", "S-0002"):
        write_story(store, story_id, minimal(story_id))
    assert [s.id for s in store.list()] == ["S-0002", "S-9999", "S-10000"]
    assert store.add("Next one").id == "S-10001"


def _probe(root: Path) -> dict[str, bool]:
    code = (
        "import sys, json; from pathlib import Path; from ai_sdlc.store import StoryStore;"
        f"StoryStore(Path({str(root)!r})).list();"
        "print(json.dumps({m: m in sys.modules for m in ('ruamel.yaml', 'yaml', 'ai_sdlc.locks')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def test_listing_keeps_heavy_imports_out(tmp_path: Path) -> None:
    make_project(tmp_path, [i for i in FIXTURE_IDS if i != "S-0033"])
    cold = _probe(tmp_path)
    assert cold == {"ruamel.yaml": False, "yaml": True, "ai_sdlc.locks": False}
    warm = _probe(tmp_path)
    assert warm == {"ruamel.yaml": False, "yaml": False, "ai_sdlc.locks": False}


def test_recursive_alias_is_refused_by_both_loaders(tmp_path: Path) -> None:
    # A value that contains itself expands without end: over the alias-expansion limit.
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal(loop="&x {b: *x}", items="&y [1, *y]"))
    scan = store.scan()
    assert scan.stories == []
    assert len(scan.errors) == 1 and "contains itself" in scan.errors[0].message
    with pytest.raises(InvalidInputError, match="contains itself"):
        store.get("S-0001")


# --- Foreign documents (`add --from`): what a markdown file written elsewhere becomes -------------


def write_doc(folder: Path, text: str | bytes, name: str = "doc.md") -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def draft_of(folder: Path, text: str | bytes) -> Draft:
    return read_draft(write_doc(folder, text))


def refusal(path: Path) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as caught:
        read_draft(path)
    assert caught.value.path == str(path)
    return caught.value


def refusal_of(folder: Path, text: str | bytes) -> InvalidInputError:
    return refusal(write_doc(folder, text))


def test_a_yaml_document_maps_every_known_field(tmp_path: Path) -> None:
    path = write_doc(
        tmp_path,
        "---\ntitle: '  Export \t the   board '\nlabels: [reporting, ' two   words ', 3, csv, "
        "reporting]\ntags: [ignored-when-labels-given]\npriority: 5\ntype: bug\nstatus: ready\n"
        "dependencies: [S-0002, S-0001, S-0002]\nepic: E-01\nid: S-0007\nowner: ann\n5: five\n"
        "---\nExport the board.\n",
    )
    assert read_draft(path) == Draft(
        path=path,
        title="Export the board",
        body="Export the board.\n",
        labels=("reporting", "two words", "3", "csv"),
        priority=5,
        type="bug",
        status="ready",
        dependencies=("S-0002", "S-0001"),
        epic="E-01",
        source_id="S-0007",
        ignored=("5", "owner"),  # a canonical `id` is used: it maps the dependencies
    )


def test_toml_and_json_frontmatter_are_read_too(tmp_path: Path) -> None:
    toml = draft_of(
        tmp_path, '+++\ntitle = "Import TOML"\nlabels = ["toml"]\npriority = 7\n+++\nBody\n'
    )
    assert (toml.title, toml.labels, toml.priority, toml.body) == (
        "Import TOML",
        ("toml",),
        7,
        "Body\n",
    )
    json_doc = draft_of(tmp_path, '{\n"title": "From JSON",\n"tags": "a, b"\n}\nJSON body\n')
    assert (json_doc.title, json_doc.labels, json_doc.body) == (
        "From JSON",
        ("a", "b"),
        "JSON body\n",
    )


def test_a_plain_document_takes_its_first_heading_as_title(tmp_path: Path) -> None:
    path = write_doc(tmp_path, "Intro line\n\n#   Just a heading ##  \n\nText")
    assert read_draft(path) == Draft(
        path=path, title="Just a heading", body="Intro line\n\n#   Just a heading ##  \n\nText\n"
    )
    # A title field wins over the heading; an empty or null frontmatter falls back to it.
    assert draft_of(tmp_path, "---\ntitle: From field\n---\n# From heading\n").title == "From field"
    assert draft_of(tmp_path, "---\n---\n# Empty frontmatter\n").title == "Empty frontmatter"
    assert draft_of(tmp_path, "---\ntitle: null\n---\n# Null title\n").title == "Null title"


def test_line_breaks_bom_and_leading_blank_lines_are_normalised(tmp_path: Path) -> None:
    crlf = draft_of(tmp_path, "\ufeff# Title\r\n\r\nline\rnext\r\n")
    assert (crlf.title, crlf.body) == ("Title", "# Title\n\nline\nnext\n")
    late = draft_of(tmp_path, "\n\n---\ntitle: Late start\n---\n\n\n   indented code\nend\n\n")
    assert (late.title, late.body) == ("Late start", "   indented code\nend\n\n")
    # Only newlines are stripped before the frontmatter and the body, no other character.
    assert draft_of(tmp_path, "  indented\n# Title\n").body == "  indented\n# Title\n"
    assert (
        draft_of(tmp_path, "X marks the spot\n# Treasure\n").body
        == "X marks the spot\n# Treasure\n"
    )
    assert draft_of(tmp_path, "---\ntitle: T\n---\nXY\n").body == "XY\n"


def test_a_blank_body_becomes_the_title_heading(tmp_path: Path) -> None:
    assert draft_of(tmp_path, "---\ntitle: Only a title\n---\n  \n\n").body == "# Only a title\n"
    assert draft_of(tmp_path, "---\ntitle: T\n---\nno newline").body == "no newline\n"


def test_type_and_status_are_kept_only_when_ours(tmp_path: Path) -> None:
    def shape(fields: str) -> tuple[str, str]:
        found = draft_of(tmp_path, f"---\ntitle: T\n{fields}---\n")
        return found.type, found.status

    assert shape("") == ("feature", "backlog")
    assert shape("type: refactor\nstatus: ready\n") == ("refactor", "ready")
    assert shape("type: Bug Fix\nstatus: shipped\n") == ("feature", "backlog")
    assert shape("type: 5\nstatus: blocked\n") == ("feature", "backlog")
    assert shape("status: done\n") == ("feature", "done")


def test_only_a_canonical_story_id_names_the_document(tmp_path: Path) -> None:
    def source(value: str) -> str | None:
        return draft_of(tmp_path, f"---\ntitle: T\n{value}---\n").source_id

    assert source("id: S-0012\n") == "S-0012"
    assert source("id: S-12345\n") == "S-12345"
    assert source("id: S-3\n") is None
    assert source("id: 5\n") is None
    assert source("") is None


def test_priority_must_be_a_whole_number_in_range(tmp_path: Path) -> None:
    def priority(value: str) -> int | None:
        return draft_of(tmp_path, f"---\ntitle: T\npriority: {value}\n---\n").priority

    assert priority("0") == 0
    assert priority(str(schema.MAX_COUNTER)) == schema.MAX_COUNTER
    assert priority("null") is None
    for bad, shown in (
        ("-1", "-1"),
        (str(schema.MAX_COUNTER + 1), str(schema.MAX_COUNTER + 1)),
        ("true", "True"),
        ("5.5", "5.5"),
        ("high", "'high'"),
    ):
        error = refusal_of(tmp_path, f"---\ntitle: T\npriority: {bad}\n---\n")
        assert error.message.endswith(
            f": priority must be a whole number from 0 to 1,000,000,000, not {shown}"
        ), bad
        assert error.hint is None


def test_labels_from_a_list_or_one_comma_separated_line(tmp_path: Path) -> None:
    def labels(value: str) -> tuple[str, ...]:
        return draft_of(tmp_path, f"---\ntitle: T\n{value}\n---\n").labels

    assert labels("labels: 'a, b ,, a,  c  d '") == ("a", "b", "c d")
    assert labels("tags: [x, 2]") == ("x", "2")
    assert labels("labels: null") == ()
    assert labels("labels: []") == ()
    assert labels("tags: one") == ("one",)


@pytest.mark.parametrize("value", ["{a: 1}", "[x, {a: 1}]", "5", "[[x]]"])
def test_labels_that_are_not_words_are_refused(tmp_path: Path, value: str) -> None:
    error = refusal_of(tmp_path, f"---\ntitle: T\nlabels: {value}\n---\n")
    assert error.message.endswith(
        ": labels/tags must be a list of words (or one comma-separated line)"
    )
    assert error.hint is None


def test_unprintable_labels_and_titles_are_refused(tmp_path: Path) -> None:
    label = refusal_of(tmp_path, '{\n"title": "T",\n"labels": ["ok", "bell\\u0007"]\n}\n')
    assert label.message.endswith(": labels must be printable one-line words")
    title = refusal_of(tmp_path, '{\n"title": "Bell\\u0007"\n}\n')
    assert title.message.endswith(": the title must be printable text")
    assert label.hint is None and title.hint is None


@pytest.mark.parametrize(
    "text",
    [
        "---\nlabels: [x]\n---\nno heading here\n",
        "---\ntitle: 5\n---\n# A heading does not replace a bad title\n",
        "---\ntitle: '   '\n---\n",
        "#\n",
        "",
    ],
)
def test_a_document_without_a_title_is_refused(tmp_path: Path, text: str) -> None:
    path = write_doc(tmp_path, text)
    error = refusal(path)
    assert error.message == f"{path}: has no title"
    assert error.hint == "give it a `title:` field or a first line like `# Export the board as CSV`"


def test_graph_fields_are_checked_as_story_files_check_them(tmp_path: Path) -> None:
    none = draft_of(tmp_path, "---\ntitle: T\ndependencies: null\nepic: null\n---\n")
    assert (none.dependencies, none.epic) == ((), None)
    for fields, message, hint in (
        (
            "dependencies: [nope]",
            "`dependencies` has 'nope', which is not a story id",
            "write e.g. dependencies: [S-0003, S-0004]",
        ),
        (
            "dependencies: S-0001",
            "`dependencies` must be a list of story ids, not 'S-0001'",
            "write e.g. dependencies: [S-0003, S-0004]",
        ),
        (
            "epic: 'a b'",
            "`epic` must be an epic id (letters, digits, '.', '_', '-'), not 'a b'",
            "write e.g. epic: E-01",
        ),
    ):
        path = write_doc(tmp_path, f"---\ntitle: T\n{fields}\n---\n")
        error = refusal(path)
        assert (error.message, error.hint) == (f"{path}: {message}", hint)


@pytest.mark.parametrize(
    ("text", "delimiter"),
    [("---\ntitle: T\n", "---"), ("+++\ntitle = 'T'\n", "+++"), ('{\n"title": "T"\n', "{")],
)
def test_an_unclosed_frontmatter_is_refused(tmp_path: Path, text: str, delimiter: str) -> None:
    path = write_doc(tmp_path, text)
    error = refusal(path)
    assert error.message == f"{path}: the {delimiter} frontmatter is never closed"
    assert error.hint == "end it with a line holding only the same delimiter"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('+++\ntitle = "x\n+++\nbody\n', "bad frontmatter: Illegal character"),
        ('{\n"title": 1,,\n}\nbody\n', "bad frontmatter: Expecting property name"),
        ("---\ntitle: T\nwhen: 2020-13-45\n---\n", "bad frontmatter: month must be in 1..12"),
        ("---\ntitle: [unclosed\n---\nbody\n", "3:1: bad YAML frontmatter: did not find expected"),
        ("---\n- a\n- b\n---\nbody\n", "the frontmatter is not a mapping of fields"),
    ],
)
def test_bad_frontmatter_is_refused_naming_the_file(tmp_path: Path, text: str, reason: str) -> None:
    path = write_doc(tmp_path, text)
    error = refusal(path)
    yaml = reason[0].isdigit()  # a YAML mistake is named file:line:column, with a hint
    assert error.message.startswith(f"{path}:{'' if yaml else ' '}{reason}"), error.message
    assert "\n" not in error.message and "  " not in error.message
    assert error.hint == (
        "fix the YAML between the --- lines (a value may be quoted)" if yaml else None
    )


def test_a_long_yaml_error_is_cut_to_200_characters(tmp_path: Path) -> None:
    prefix = "bad YAML frontmatter: "
    whole: list[str] = []
    cut: list[str] = []
    for size in range(140, 165):
        path = write_doc(tmp_path, f"---\ntitle: !{'t' * size} x\n---\n")
        reason = refusal(path).message.removeprefix(f"{path}:2:8: ")
        assert reason.startswith(prefix + "could not determine a constructor for the tag '!tttt")
        reason = reason.removeprefix(prefix)
        (cut if reason.endswith("...") else whole).append(reason)
    assert whole and cut
    assert max(len(r) for r in whole) == 200  # up to 200 characters are shown whole
    assert {len(r) for r in cut} == {200}
    assert all(
        r.startswith(f"could not determine a constructor for the tag '!{'t' * 100}") for r in cut
    )


def test_size_and_encoding_limits(tmp_path: Path) -> None:
    head = "# Big\n"
    largest = write_doc(tmp_path, head + "a" * (MAX_BYTES - len(head) - 1) + "\n", "big.md")
    assert read_draft(largest).title == "Big"
    too_big = write_doc(tmp_path, head + "a" * (MAX_BYTES - len(head)) + "\n", "bigger.md")
    error = refusal(too_big)
    assert error.message == f"{too_big}: is 1,000,001 bytes; a story document is at most 1,000,000"
    binary = write_doc(tmp_path, b"# Title \xff\xfe\n")
    error = refusal(binary)
    assert (error.message, error.hint) == (
        f"{binary}: is not UTF-8 text (byte 8)",
        "save it as UTF-8",
    )


def test_an_unreadable_document_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "folder.md"
    folder.mkdir()
    error = refusal(folder)
    assert (error.message, error.hint) == (f"{folder}: cannot be read: Is a directory", None)


def test_documents_of_a_folder_are_its_markdown_files_in_name_order(tmp_path: Path) -> None:
    for name in ("b.md", "a.md", "notes.txt", "UPPER.MD"):
        write_doc(tmp_path, "# x\n", name)
    (tmp_path / "folder.md").mkdir()
    (tmp_path / "sub").mkdir()
    write_doc(tmp_path / "sub", "# nested\n", "c.md")
    assert documents(tmp_path) == [tmp_path / "a.md", tmp_path / "b.md"]
    assert documents(tmp_path / "notes.txt") == [tmp_path / "notes.txt"]


def test_documents_refuse_an_empty_folder_and_a_missing_path(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    write_doc(empty, "x", "readme.txt")
    with pytest.raises(InvalidInputError) as caught:
        documents(empty)
    assert (caught.value.message, caught.value.path, caught.value.hint) == (
        f"{empty}: holds no *.md file",
        str(empty),
        "point --from at a markdown file or folder",
    )
    missing = tmp_path / "nope.md"
    with pytest.raises(InvalidInputError) as caught:
        documents(missing)
    assert (caught.value.message, caught.value.path, caught.value.hint) == (
        f"{missing}: does not exist",
        str(missing),
        None,
    )


# --- Story ids, slugs and references (store.ids) --------------------------------------------------


REF_HINT = "use a story id such as S-0001 (or s-1) or the story's slug"


def test_canonical_folder_names_have_a_number() -> None:
    assert [ids.id_number(n) for n in ("S-0007", "S-12345", "S-0000")] == [7, 12345, 0]
    # Not canonical: too few digits, padding past four digits, lowercase, anything else.
    for name in ("S-7", "S-007", "S-00012", "s-0007", "S-0007x", "xS-0007", "S-", "notes"):
        assert ids.id_number(name) is None, name
    assert [ids.any_id_number(n) for n in ("S-7", "S-00012", "S-0007")] == [7, 12, 7]
    for name in ("s-7", "S-", "S-7a", "T-7", "notes"):
        assert ids.any_id_number(name) is None, name


def test_a_reference_is_an_id_or_a_slug() -> None:
    assert ids.parse_ref("S-0003") == ("S-0003", None)
    assert ids.parse_ref(" s-3 ") == ("S-0003", None)
    assert ids.parse_ref("S-123456789") == ("S-123456789", None)
    assert ids.parse_ref("export-the-board") == (None, "export-the-board")
    assert ids.parse_ref("42") == (None, "42")
    assert ids.canonical_id("s-12") == "S-0012"


def refused_ref(ref: str) -> UsageError:
    with pytest.raises(UsageError) as caught:
        ids.parse_ref(ref)
    assert caught.value.hint == REF_HINT
    return caught.value


@pytest.mark.parametrize("ref", ["a\0b", "a/b", "a\\b", "..", "x..y", "~user", "/etc"])
def test_a_reference_that_looks_like_a_path_is_refused(ref: str) -> None:
    assert refused_ref(ref).message == f"{ref!r} is not a story reference: it looks like a path"


def test_empty_and_malformed_references_are_refused() -> None:
    assert refused_ref("  ").message == "'  ' is not a story reference: it is empty"
    for ref in ("Export", "S-1234567890", "-lead", "a b", "x" * 101, "a.b"):
        assert refused_ref(ref).message == (
            f"{ref!r} is not a story reference: ids look like S-0001, slugs use a-z, 0-9 and '-'"
        ), ref
    with pytest.raises(UsageError) as caught:
        ids.canonical_id("export-the-board")
    assert caught.value.message == (
        "'export-the-board' is not a story reference: expected a story id such as S-0001"
    )
    assert caught.value.hint == REF_HINT


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Café Crème: Über-Export!", "cafe-creme-uber-export"),
        ("!!Leading and trailing!!", "leading-and-trailing"),
        ("日本語", "story"),
        ("", "story"),
        ("a" * 49 + " tail", "a" * 49),
        ("x" * 60, "x" * 50),
        ("!" + "x" * 60, "x" * 50),  # separators go before the cut, not after it
    ],
)
def test_slugs_are_ascii_lowercase_words_of_at_most_50(title: str, slug: str) -> None:
    assert ids.slugify(title) == slug


def test_artifact_names_stay_plain_file_names() -> None:
    assert ids.check_artifact_name("plan.md") == "plan.md"
    assert ids.check_artifact_name("review_2.v1-final.txt") == "review_2.v1-final.txt"
    for name in ("a..b", "../x", "a/b", ".hidden", "", "x" * 129):
        with pytest.raises(UsageError) as caught:
            ids.check_artifact_name(name)
        assert caught.value.message == f"{name!r} is not an artifact name", name
        assert caught.value.hint == "use a plain file name such as plan.md (no folders, no '..')"


# --- The archive (store.archive): moved out of the backlog, still readable by its id -----------


def test_an_archived_story_is_found_by_its_id_and_read_whole(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003", "S-0012"])
    before = store.get("S-0003")
    assert archive.archived_path(store, "S-0003") is None
    moved = archive.move_to_archive(store, "S-0003")
    assert moved == store.ai_dir / "archive" / "S-0003"
    assert not (store.stories_dir / "S-0003").exists()
    assert archive.archived_path(store, "s-3") == moved / "story.md"
    story = archive.get_archived(store, " s-0003 ")
    assert (story.id, story.path) == ("S-0003", moved / "story.md")
    assert story.to_json() == before.to_json() and story.body == before.body
    assert strict_equal(to_plain(story.frontmatter), to_plain(before.frontmatter))
    # A second story joins the same archive folder; both numbers stay taken.
    assert archive.move_to_archive(store, "S-0012") == store.ai_dir / "archive" / "S-0012"
    assert sorted(archive.archived_numbers(store)) == [3, 12]
    assert [s.id for s in store.list()] == []


def test_a_broken_archived_story_is_refused_naming_its_archived_file(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    path = archive.move_to_archive(store, "S-0003") / "story.md"
    path.write_text(minimal("S-0003", priority="-1"))
    with pytest.raises(InvalidInputError) as caught:
        archive.get_archived(store, "S-0003")
    assert (caught.value.path, caught.value.line) == (str(path), 5)
    assert caught.value.message.startswith(f"{path}:5:1: `priority` must be a whole number")


def test_what_is_not_archived_is_not_found(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    assert archive.archived_numbers(store) == []
    with pytest.raises(FileNotFoundError) as caught:
        archive.get_archived(store, "S-0003")
    assert caught.value.args == ("S-0003",)
    real = tmp_path / "elsewhere" / "S-0009"
    shutil.copytree(store.stories_dir / "S-0003", real)
    (store.ai_dir / "archive").mkdir()
    (store.ai_dir / "archive" / "S-0009").symlink_to(real, target_is_directory=True)
    (store.ai_dir / "archive" / "S-0010" / "story.md").mkdir(parents=True)
    assert archive.archived_path(store, "S-0009") is None  # a link could lead anywhere
    assert archive.archived_path(store, "S-0010") is None  # not a file
    with pytest.raises(UsageError):
        archive.archived_path(store, "../S-0003")


def test_archiving_refuses_to_overwrite_and_waits_for_the_story_lock(tmp_path: Path) -> None:
    store = make_project(tmp_path, ["S-0003"])
    target = store.ai_dir / "archive" / "S-0003"
    target.mkdir(parents=True)
    with pytest.raises(InvalidInputError) as caught:
        archive.move_to_archive(store, "S-0003")
    assert (caught.value.message, caught.value.hint) == (
        f"{target}: cannot archive S-0003: the archive already holds a folder of that id",
        "move that folder away first",
    )
    target.rmdir()
    impatient = StoryStore(tmp_path, lock_timeout=0)
    with store.edit("S-0003"), pytest.raises(BusyError) as busy:
        archive.move_to_archive(impatient, "S-0003")
    assert busy.value.message.startswith("story S-0003 is locked by another ai-sdlc process")
    assert (store.stories_dir / "S-0003" / "story.md").is_file() and not target.exists()
