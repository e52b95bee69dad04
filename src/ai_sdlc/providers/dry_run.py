"""The `dry-run` provider: shows what would be sent to an agent and changes nothing.

It makes no call (so it needs no guard), writes no file and never touches the network. Its
answer is a readable description of the request; long prompts keep their head and tail so the
interesting ends (instructions, story) stay visible. It makes no decision: a dry run is for
reading, and `changes_nothing` tells the runner to write nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ai_sdlc.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResult,
    ProviderStatus,
    Usage,
)

#: Characters of a prompt shown in full; longer prompts show this many split over head + tail.
PROMPT_PREVIEW_CHARS = 4000
CONTEXT_VALUE_CHARS = 200


def truncate_middle(text: str, limit: int) -> str:
    """`text` itself when short, else its head and tail around a marker saying what was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters not shown ...]\n{text[-tail:]}"


def _context_line(key: str, value: Any) -> str:
    if isinstance(value, str):
        shown = json.dumps(truncate_middle(value, CONTEXT_VALUE_CHARS), ensure_ascii=False)
    else:
        shown = truncate_middle(repr(value), CONTEXT_VALUE_CHARS)
    return f"  {key}: {shown}"


class DryRunProvider(Provider):
    name: ClassVar[str] = "dry-run"
    simulated: ClassVar[bool] = True
    #: The runner writes nothing (story, artifacts, counters) when the provider says so.
    changes_nothing: ClassVar[bool] = True

    def __init__(self, project_root: Path, settings: Mapping[str, Any] | None = None) -> None:
        self.project_root = project_root
        self.settings = dict(settings or {})

    def status(self) -> ProviderStatus:
        return ProviderStatus(
            self.name, True, "built in: shows requests, sends and changes nothing"
        )

    def execute(self, request: ProviderRequest) -> ProviderResult:
        return ProviderResult(text=describe_request(request), usage=Usage())


def describe_request(request: ProviderRequest) -> str:
    """What an agent would receive for `request`, as plain text."""
    estimate = (len(request.system_prompt) + len(request.prompt)) // 4
    lines = [
        f"DRY RUN: nothing was sent and nothing was changed ({request.phase.value} phase).",
        f"story: {request.story_id}",
        f"phase: {request.phase.value} (attempt {request.attempt})",
        f"access: {request.access.value}",
        f"workspace: {request.workspace}",
        f"timeout: {request.timeout:g}s",
        f"model: {request.model or '(provider default)'}",
        f"size: {len(request.system_prompt)} + {len(request.prompt)} characters "
        f"(about {estimate} tokens)",
    ]
    if request.context:
        lines.append("context:")
        lines.extend(_context_line(str(k), v) for k, v in sorted(request.context.items()))
    lines += [
        "",
        "--- system prompt ---",
        truncate_middle(request.system_prompt, PROMPT_PREVIEW_CHARS),
        "--- prompt ---",
        truncate_middle(request.prompt, PROMPT_PREVIEW_CHARS),
        "--- end ---",
    ]
    return "\n".join(lines) + "\n"
