"""The decision convention shared by every provider's review and refine answers.

An agent ends a review or refinement with one line ``DECISION: <X>`` followed by its feedback::

    <free text: for refine, the refined story body; for review, a summary>

    DECISION: REJECTED
    <feedback: what to fix>

Parsing is forgiving because real models decorate: the match is case-insensitive and tolerates
markdown around the key and the value (``**DECISION:** approved``, ``## Decision: `APPROVED` ``,
``- decision = rejected``). When several decision lines occur, the last one wins (models often
restate the instructions before answering). ``APPROVE``/``REJECT`` are read as
``APPROVED``/``REJECTED``; any other word is not a decision.
"""

from __future__ import annotations

import re

import msgspec

APPROVED = "APPROVED"
REJECTED = "REJECTED"
RECOVERY = "RECOVERY"
FAILED = "FAILED"

#: What a review may decide: accept, ask for changes, ask to re-implement, or give up.
REVIEW_DECISIONS: tuple[str, ...] = (APPROVED, REJECTED, RECOVERY, FAILED)
#: What a refinement may decide: ready, or needs another refinement iteration.
REFINE_DECISIONS: tuple[str, ...] = (APPROVED, REJECTED)

_ALIASES = {"APPROVE": APPROVED, "REJECT": REJECTED}

_MARKUP = r"[*_`~]*"
_DECISION_LINE = re.compile(
    rf"^[ \t]*(?:[#>\-+*][ \t]*)*{_MARKUP}decision{_MARKUP}[ \t]*[:=][ \t]*{_MARKUP}[ \t]*"
    rf"(?P<word>[A-Za-z_]+){_MARKUP}[ \t]*[.!]?(?P<rest>[^\n]*)$",
    re.IGNORECASE | re.MULTILINE,
)


class DecisionParts(msgspec.Struct, frozen=True):
    """A decided answer split in three: the text before the decision line, the decision, and
    the feedback after it (including anything after the decision word on the same line)."""

    before: str
    decision: str | None
    feedback: str


def _canonical(word: str) -> str | None:
    upper = word.upper()
    upper = _ALIASES.get(upper, upper)
    return upper if upper in REVIEW_DECISIONS else None


def split_decision(text: str) -> DecisionParts:
    """Split `text` at its last valid decision line; without one, everything is `before`."""
    last: re.Match[str] | None = None
    for match in _DECISION_LINE.finditer(text):
        if _canonical(match.group("word")) is not None:
            last = match
    if last is None:
        return DecisionParts(before=text.strip(), decision=None, feedback="")
    rest = last.group("rest").strip(" \t-:—–")
    after = text[last.end() :].strip()
    feedback = "\n".join(part for part in (rest, after) if part)
    return DecisionParts(
        before=text[: last.start()].strip(),
        decision=_canonical(last.group("word")),
        feedback=feedback,
    )


def parse_decision(text: str) -> tuple[str | None, str]:
    """(decision, feedback) of an agent's answer; (None, whole text) when it decided nothing."""
    parts = split_decision(text)
    if parts.decision is None:
        return None, parts.before
    return parts.decision, parts.feedback


def format_decision(decision: str, feedback: str, *, before: str = "") -> str:
    """The text an agent following the convention would write (used by the scripted provider)."""
    head = f"{before.strip()}\n\n" if before.strip() else ""
    tail = f"\n{feedback.strip()}" if feedback.strip() else ""
    return f"{head}DECISION: {decision}{tail}\n"
