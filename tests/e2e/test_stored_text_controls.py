"""Stored agent text carries no terminal control sequences: an agent that prints an OSC 52
clipboard write, a window title, cursor and colour codes (7-bit and C1) into its answers leaves
none of them in story.md, research.md, plan.md, review.md or events.jsonl, while plain text,
tabs, newlines and printable unicode stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import make_project, write_rules

#: YAML double-quoted escapes: ESC is \e, BEL \a; \x9b and \x9d are the C1 CSI and OSC.
HOSTILE = (
    r"\e]52;c;cm0gLXJmIH4K\a\e]0;pwned\e\\\e[2J\e[1;1H\e[31m\x9b6n\x9d2;t\x9c"
    r"\x07\x00\x7f\rclip"
)
RULES = f"""rules:
  - phase: refine
    attempt: 1
    respond: ""
    decision: REJECTED
    feedback: "Too vague {HOSTILE} refine-feedback"
  - phase: refine
    respond: "Refined body {HOSTILE}\\n\\tindented line, café ✓\\n"
    decision: APPROVED
  - phase: research
    respond: "Research notes {HOSTILE} research-end"
  - phase: plan
    respond: "Plan steps {HOSTILE} plan-end"
  - phase: review
    respond: "Review text {HOSTILE} review-end"
    decision: APPROVED
    feedback: "Fine {HOSTILE} review-feedback"
"""


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.e2e
def test_agent_control_sequences_never_reach_the_stored_files(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root, ["Hostile answers"], config='verify:\n  test: "true"\n')
    write_rules(root, RULES)
    result = run_cli(root, "run", "S-0001")
    assert result.returncode == 0, result.output
    folder = root / ".ai-sdlc" / "stories" / "S-0001"
    stored = {
        name: (folder / name).read_text(encoding="utf-8")
        for name in ("story.md", "research.md", "plan.md", "review.md", "events.jsonl")
    }
    for name, text in stored.items():
        assert _controls(text) == [], (name, _controls(text))
        assert "\\u001b" not in text and "\\u009b" not in text, name
        assert "52;c;" not in text and "pwned" not in text, name
    assert "Refined body clip\n\tindented line, café ✓" in stored["story.md"]
    assert "Research notes clip research-end" in stored["research.md"]
    assert "Plan steps clip plan-end" in stored["plan.md"]
    assert "review-end" in stored["review.md"]
    assert "Too vague clip refine-feedback" in stored["events.jsonl"]
