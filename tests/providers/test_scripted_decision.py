"""The DECISION line convention shared by every provider."""

from __future__ import annotations

import pytest

from ai_sdlc.providers.decision import format_decision, parse_decision, split_decision


@pytest.mark.parametrize(
    ("text", "decision", "feedback"),
    [
        ("DECISION: APPROVED", "APPROVED", ""),
        ("Looks fine.\n\nDECISION: approved\nShip it.", "APPROVED", "Ship it."),
        ("**DECISION:** REJECTED\n- fix the test", "REJECTED", "- fix the test"),
        ("**Decision**: `RECOVERY`\nnothing changed", "RECOVERY", "nothing changed"),
        ("## Decision: Failed\ncannot be done", "FAILED", "cannot be done"),
        ("> decision = reject\nbad", "REJECTED", "bad"),
        ("- DECISION: APPROVE.", "APPROVED", ""),
        ("DECISION: REJECTED - tests fail\nsee log", "REJECTED", "tests fail\nsee log"),
    ],
)
def test_parses_decorated_decisions(text: str, decision: str, feedback: str) -> None:
    assert parse_decision(text) == (decision, feedback)


def test_last_occurrence_wins() -> None:
    text = (
        "You must answer with DECISION: APPROVED or REJECTED.\n"
        "DECISION: APPROVED\n"
        "on second thought\n"
        "DECISION: REJECTED\n"
        "missing tests"
    )
    assert parse_decision(text) == ("REJECTED", "missing tests")


def test_no_decision_returns_the_whole_text() -> None:
    assert parse_decision("  I could not decide.\n") == (None, "I could not decide.")


def test_unknown_words_are_not_decisions() -> None:
    text = "DECISION: APPROVED\nwell\nDecision: pending further review"
    assert parse_decision(text) == ("APPROVED", "well\nDecision: pending further review")


def test_split_keeps_the_text_before_the_line() -> None:
    parts = split_decision("# Refined story\n\nBody.\n\nDECISION: REJECTED\nclarify scope\n")
    assert parts.before == "# Refined story\n\nBody."
    assert parts.decision == "REJECTED"
    assert parts.feedback == "clarify scope"


def test_format_round_trips() -> None:
    text = format_decision("RECOVERY", "redo it", before="summary")
    assert text == "summary\n\nDECISION: RECOVERY\nredo it\n"
    assert split_decision(text).before == "summary"
    assert parse_decision(text) == ("RECOVERY", "redo it")
