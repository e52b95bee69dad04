"""A scripted "model" for end-to-end runs: answers each phase of a story through the fake API
server the way a competent agent would (implement edits files through tool calls, review
approves), so `ai-sdlc run` can take a story from backlog to done over a real wire protocol."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from tests.support.fakes.api_server import Call, RecordedRequest, Reply, Step

_TASK = re.compile(r"## Your task \((\w+)\)")


def has_tool_results(request: RecordedRequest) -> bool:
    for message in request.body.get("messages") or []:
        if message.get("role") == "tool":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return True
    return False


@dataclass
class StoryAgent:
    """Responder for `FakeApiServer.responder`; `files` are written by the implement phase."""

    files: dict[str, str]
    phases: Counter[str] = field(default_factory=Counter)

    def __call__(self, request: RecordedRequest) -> Step:
        found = _TASK.findall(request.text())
        phase = found[-1] if found else "unknown"
        first_turn = not has_tool_results(request)
        if first_turn:
            self.phases[phase] += 1
        if phase == "refine":
            return Reply(text="A clear story with testable criteria.\nDECISION: APPROVED")
        if phase == "research":
            if first_turn:
                return Reply(calls=(Call("list_dir", {"path": "."}),))
            return Reply(text="## Findings\n\nA small greeting module is needed.")
        if phase == "plan":
            return Reply(text="## Plan\n\n1. Add hello.py with greet().\n2. Test it.")
        if phase in ("implement", "rework"):
            if first_turn:
                calls = tuple(
                    Call("write_file", {"path": path, "content": text})
                    for path, text in self.files.items()
                )
                return Reply(text="Writing the code.", calls=calls)
            return Reply(text="Implemented as planned.")
        if phase == "review":
            if first_turn:
                return Reply(calls=(Call("read_file", {"path": next(iter(self.files))}),))
            return Reply(text="Clean and tested.\n\nDECISION: APPROVED")
        return Reply(text=f"unexpected request (phase {phase})")
