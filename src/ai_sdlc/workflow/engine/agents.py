"""One agent per phase: what it is told (system prompt + prompt built from the story, its
earlier artifacts, and on a retry the last failure's feedback) and which artifact it writes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ai_sdlc.providers.base import Phase

#: Upper bound for feedback fed back into a prompt (chars); the tail is kept.
FEEDBACK_LIMIT = 4000
ARTIFACT_LIMIT = 12000

ARTIFACT_OF: dict[Phase, str] = {
    Phase.RESEARCH: "research.md",
    Phase.PLAN: "plan.md",
    Phase.REVIEW: "review.md",
}

SYSTEM_PROMPTS: dict[Phase, str] = {
    Phase.REFINE: (
        "You refine a software story so that it is ready for implementation: a clear user "
        "story, concrete acceptance criteria, scope and out-of-scope. Answer with the refined "
        "story body in markdown, then a last line 'DECISION: APPROVED' when it is ready, or "
        "'DECISION: REJECTED' followed by what is missing when it is not."
    ),
    Phase.RESEARCH: (
        "You research how to implement a story in this codebase. Read the code (read-only). "
        "Answer in markdown: relevant files, existing patterns, risks, open questions."
    ),
    Phase.PLAN: (
        "You write an implementation plan for a story: small ordered steps, the files to "
        "change, the tests to add. Read-only access. Answer in markdown."
    ),
    Phase.IMPLEMENT: (
        "You implement a story in the workspace following the plan, and add or update tests. "
        "The project's own build and test commands judge your work after you finish."
    ),
    Phase.REWORK: (
        "A reviewer rejected the implementation of this story. Fix every point of the "
        "review feedback in the workspace; keep what already works."
    ),
    Phase.REVIEW: (
        "You review the implementation of a story (read-only): code quality, tests, security, "
        "and whether the acceptance criteria are met. End with one line 'DECISION: APPROVED', "
        "'DECISION: REJECTED' (with the feedback to fix), 'DECISION: RECOVERY' (the "
        "implementation changed nothing) or 'DECISION: FAILED' (cannot be done as specified)."
    ),
}


#: One line of guidance per known story type (`store.schema.STORY_TYPES`): what kind of work
#: it is and what done looks like. Any other type gets `NEUTRAL_GUIDANCE`.
TYPE_GUIDANCE: dict[str, str] = {
    "feature": "a new capability: build what the story asks for, with tests of its behaviour.",
    "bug": "a defect: reproduce it with a failing test first, then fix the cause, not the symptom.",
    "chore": "maintenance: keep behaviour unchanged; the existing tests must still pass.",
    "spike": "an investigation: find out and write down what was learned; keep code changes "
    "small and exploratory.",
    "refactor": "restructure without changing behaviour: the existing tests must pass "
    "unchanged, no new features.",
    "documentation": "documentation: change docs and comments, not behaviour; keep examples "
    "correct.",
    "enhancement": "an improvement to an existing capability: extend it without breaking its "
    "current users, with tests of the new behaviour.",
}
NEUTRAL_GUIDANCE = "do what the story asks, keeping the existing behaviour and tests intact."


class StoryView(msgspec.Struct, frozen=True):
    """What an agent may know of a story."""

    id: str
    title: str
    body: str
    artifacts: dict[str, str]
    #: The story's `type` (any lowercase word; see `TYPE_GUIDANCE`).
    type: str = "feature"


def story_view(story: Any) -> StoryView:
    """What an agent sees of a story: its text and the artifacts earlier phases wrote."""
    artifacts = {}
    for name in ("research.md", "plan.md", "review.md"):
        path = story.folder / name
        if path.is_file():
            artifacts[name] = path.read_text(encoding="utf-8", errors="replace")
    kind = story.frontmatter.get("type")
    return StoryView(
        story.id, story.title, story.body, artifacts, kind if isinstance(kind, str) else "feature"
    )


def type_line(kind: str) -> str:
    """The prompt's line about the story's type."""
    return f"Story type: {kind}: {TYPE_GUIDANCE.get(kind, NEUTRAL_GUIDANCE)}"


def dedupe_lines(text: str) -> str:
    seen: set[str] = set()
    kept: list[str] = []
    for line in text.splitlines():
        key = line.strip()
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def bound(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return "[… earlier output cut …]\n" + text[-limit:]


def build_prompt(
    phase: Phase,
    story: StoryView,
    *,
    feedback: Iterable[str] = (),
    attempt: int = 1,
    verification: str | None = None,
    change: str | None = None,
    pull_request: str | None = None,
) -> tuple[str, str]:
    """(system prompt, prompt) for one phase call; `verification` (review) says what the
    project's own build and tests concluded, or that none are configured; `change` (review) is
    the change itself (its files and diff, already capped by `workflow.work`); `pull_request`
    (a PR rework round) the reviewers' feedback and failing checks, whole."""
    parts = [f"# Story {story.id}: {story.title}", "", type_line(story.type), ""]
    parts.append(story.body.strip())
    wanted = {
        Phase.REFINE: (),
        Phase.RESEARCH: (),
        Phase.PLAN: ("research.md",),
        Phase.IMPLEMENT: ("research.md", "plan.md"),
        Phase.REWORK: ("plan.md", "review.md"),
        Phase.REVIEW: ("plan.md",),
    }[phase]
    for name in wanted:
        text = story.artifacts.get(name)
        if text:
            parts += ["", f"## {name}", "", bound(text.strip(), ARTIFACT_LIMIT)]
    if change:
        parts += ["", "## The change", "", change.strip()]
    if verification:
        parts += ["", "## Verification", "", bound(verification.strip(), FEEDBACK_LIMIT)]
    if pull_request:
        parts += ["", "## Pull request feedback", "", bound(pull_request.strip(), ARTIFACT_LIMIT)]
    notes = [f for f in feedback if f and f.strip()]
    if notes:
        merged = bound(dedupe_lines("\n\n".join(notes)), FEEDBACK_LIMIT)
        parts += [
            "",
            f"## Feedback from the previous attempt (this is attempt {attempt})",
            "",
            merged,
        ]
    parts += ["", f"## Your task ({phase.value})", "", SYSTEM_PROMPTS[phase]]
    return SYSTEM_PROMPTS[phase], "\n".join(parts).strip() + "\n"
