"""Validation of `.ai-sdlc/scripted.yaml`: every mistake names the file, rule, line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_sdlc.errors import ExitCode, InvalidInputError
from ai_sdlc.providers.base import Phase
from ai_sdlc.providers.scripted import RULES_FILE, ScriptedProvider
from ai_sdlc.providers.scripted_rules import Fault, load_rules


def write_rules(project: Path, text: str) -> Path:
    path = project / RULES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_file_means_no_rules(tmp_path: Path) -> None:
    rule_set = load_rules(tmp_path / RULES_FILE)
    assert rule_set.rules == () and rule_set.digest is None


def test_full_rules_are_parsed(tmp_path: Path) -> None:
    path = write_rules(
        tmp_path,
        "# comment\n"
        "rules:\n"
        "  - phase: implement\n"
        "    story: S-0002\n"
        "    attempt: 2\n"
        "    times: 3\n"
        "    respond: done\n"
        "    files:\n"
        "      src/a.py: 'x = 1'\n"
        "  - phase: Review\n"
        "    decision: rejected\n"
        "    feedback: fix it\n"
        "  - phase: plan\n"
        "    fault: {kind: rate_limit, retry_after: 2}\n",
    )
    rules = load_rules(path).rules
    assert [r.number for r in rules] == [1, 2, 3]
    assert [r.line for r in rules] == [3, 10, 13]
    first, second, third = rules
    assert (first.phase, first.story, first.attempt, first.times) == (
        Phase.IMPLEMENT,
        "S-0002",
        2,
        3,
    )
    assert first.respond == "done" and first.files == (("src/a.py", "x = 1"),)
    assert (second.phase, second.decision, second.feedback) == (Phase.REVIEW, "REJECTED", "fix it")
    assert third.fault == Fault(kind="rate_limit", retry_after=2.0)
    assert len(load_rules(path).digest or "") == 64


def test_empty_rules_list_is_valid(tmp_path: Path) -> None:
    assert load_rules(write_rules(tmp_path, "rules: []\n")).rules == ()


INVALID = [
    ("rules:\n  - phase: plan\n    respond: Fix: crash: now\n", 3, "invalid YAML"),
    ("rules:\n  - phase: plan\n    respond: a\n    respond: b\n", 4, "invalid YAML"),
    ("", 1, "expected a mapping with a 'rules' list"),
    ("- phase: plan\n", 1, "expected a mapping"),
    ("rules: {phase: plan}\n", 1, "'rules' must be a list"),
    ("rule:\n  - phase: plan\n", 1, "unknown top-level key 'rule'"),
    ("rules:\n  - plan\n", 2, "rule 1 is not a mapping"),
    ("rules:\n  - respond: hi\n", 2, "rule 1 has no 'phase'"),
    ("rules:\n  - phase: deploy\n    respond: x\n", 2, "rule 1: unknown phase 'deploy'"),
    ("rules:\n  - phase: plan\n", 2, "rule 1 says when but not what to do"),
    (
        "rules:\n  - phase: plan\n    respond: x\n  - phase: review\n    responds: y\n",
        5,
        "rule 2: unknown key 'responds'",
    ),
    ("rules:\n  - phase: plan\n    times: 0\n    respond: x\n", 3, "'times' must be"),
    ("rules:\n  - phase: plan\n    attempt: yes\n    respond: x\n", 3, "'attempt' must be"),
    ("rules:\n  - phase: plan\n    attempt: true\n    respond: x\n", 3, "'attempt' must be"),
    ("rules:\n  - phase: plan\n    respond: 12\n", 3, "'respond' must be text"),
    ("rules:\n  - phase: plan\n    story: 7\n    respond: x\n", 3, "'story' must be"),
    ("rules:\n  - phase: plan\n    decision: APPROVED\n", 3, "a plan phase makes no decision"),
    ("rules:\n  - phase: refine\n    decision: RECOVERY\n", 3, "not a refine decision"),
    ("rules:\n  - phase: review\n    decision: MAYBE\n", 3, "not a review decision"),
    ("rules:\n  - phase: review\n    feedback: x\n", 3, "'feedback' needs a 'decision'"),
    ("rules:\n  - phase: plan\n    fault: boom\n", 3, "'fault' must be a mapping"),
    ("rules:\n  - phase: plan\n    fault: {kind: meteor}\n", 3, "unknown fault kind 'meteor'"),
    (
        "rules:\n  - phase: plan\n    fault:\n      kind: auth\n      why: x\n",
        5,
        "unknown fault key",
    ),
    (
        "rules:\n  - phase: plan\n    fault: {kind: server, retry_after: -1}\n",
        3,
        "'retry_after' must be",
    ),
    (
        "rules:\n  - phase: review\n    decision: APPROVED\n    fault: {kind: server}\n",
        4,
        "cannot be combined",
    ),
    ("rules:\n  - phase: implement\n    files: [a.py]\n", 3, "'files' must map"),
    ("rules:\n  - phase: implement\n    files:\n      a.py: 3\n", 4, "each 'files' entry"),
    ("rules:\n  - phase: implement\n    files:\n      /etc/x: 'y'\n", 4, "is absolute"),
    ("rules:\n  - phase: implement\n    files:\n      ../x: 'y'\n", 4, "climbs out"),
    ("rules:\n  - phase: implement\n    files:\n      .git/hooks/x: 'y'\n", 4, "into .git"),
]


@pytest.mark.parametrize(("text", "line", "message"), INVALID)
def test_invalid_rules_are_reported_with_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write_rules(tmp_path, text)
    with pytest.raises(InvalidInputError) as caught:
        ScriptedProvider(tmp_path, {})
    error = caught.value
    assert error.exit_code is ExitCode.INVALID_INPUT
    assert error.path == str(path)
    assert error.line == line
    assert message in error.message
    assert error.hint


def test_typo_gets_a_suggestion(tmp_path: Path) -> None:
    write_rules(tmp_path, "rules:\n  - phase: implment\n    respond: x\n")
    with pytest.raises(InvalidInputError) as caught:
        ScriptedProvider(tmp_path, {})
    assert "did you mean 'implement'" in str(caught.value)


def test_not_utf8_is_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / RULES_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"rules:\n  - phase: plan\n    respond: \xff\xfe\n")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        ScriptedProvider(tmp_path, {})
