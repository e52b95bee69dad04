"""The story store: `.ai-sdlc/stories/<id>/story.md` files, read fast and edited safely.

    from ai_sdlc.store import StoryStore
    store = StoryStore(project_root)
    with store.edit("S-0001") as story:
        story.increment("retry_count")

Workflow state (recoveries, blocks, phases) is changed only through the state owner,
`ai_sdlc.workflow.state.transitions.StoryState`.

See `StoryStore` and `Story` for the full API. Importing this package is cheap (no YAML library
is loaded until a story file actually has to be parsed).
"""

from ai_sdlc.store.schema import (
    COUNTER_FIELDS,
    FLAG_FIELDS,
    RECOVERY_KINDS,
    STATUSES,
    STORY_TYPES,
)
from ai_sdlc.store.store import StoryStore
from ai_sdlc.store.story import Story, StoryScan

__all__ = [
    "COUNTER_FIELDS",
    "FLAG_FIELDS",
    "RECOVERY_KINDS",
    "STATUSES",
    "STORY_TYPES",
    "Story",
    "StoryScan",
    "StoryStore",
]
