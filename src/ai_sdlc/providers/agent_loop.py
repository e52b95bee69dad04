"""Our own agent loop, shared by the `openai` and `anthropic` providers.

One turn = one API call, made through `request.guard` so the runner's `llm` policy retries it
and counts every retry as `api_retry`; the SDK clients never retry by themselves. Between
turns the loop runs the model's tool calls through a confined `ToolBox`. The phase's
wall-clock limit really applies: each call gets the time left as its HTTP timeout, streams
check the deadline per event, and once it has passed the loop stops with
`TransientProviderError(kind="timeout")` instead of letting the guard retry into overtime.

Each backend only has to speak its wire protocol through `ChatSession`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ai_sdlc.providers.base import (
    ProviderError,
    ProviderRequest,
    ProviderResult,
    TransientProviderError,
    Usage,
)
from ai_sdlc.providers.pricing import Price, priced
from ai_sdlc.providers.tools import ToolBox, ToolOutcome, truncate

Clock = Callable[[], float]
_EVENT_TEXT = 500


class AgentTurnLimitError(ProviderError):
    """The agent used every allowed turn without a final answer (`ai.max_turns`)."""

    kind = "max_turns"


class PhaseDeadlineReached(ProviderError):
    """Raised inside a guarded call once the phase deadline has passed.

    A plain (non-transient) provider error, so the guard does not retry it; the loop turns it
    into the phase's `TransientProviderError(kind="timeout")` outside the guard.
    """

    kind = "deadline"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    #: Parsed arguments, or None when the model sent arguments that are not a JSON object.
    arguments: dict[str, Any] | None
    raw_arguments: str = ""


@dataclass
class Turn:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    #: True when the server reported no usage and the tokens are our estimate.
    usage_estimated: bool = False


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    text: str
    is_error: bool


class ChatSession(Protocol):
    """One conversation in one wire protocol."""

    def send(self, *, timeout: float, check_deadline: Callable[[], None]) -> Turn:
        """One API call with the conversation so far.

        Appends the assistant's message to the conversation only when the call succeeded, so
        a retried call resends the same conversation. `check_deadline` is called per
        streamed event and raises once the phase is out of time.
        """
        ...

    def add_tool_results(self, results: list[ToolResult]) -> None: ...


def parse_arguments(raw: str | None) -> dict[str, Any] | None:
    """Tool-call arguments as a dict, or None when they are not a JSON object."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class Deadline:
    """The phase's wall-clock limit, shared by every call of the phase."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.seconds = seconds
        self.started = clock()
        self.at = self.started + seconds

    def left(self) -> float:
        return self.at - self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def check(self) -> None:
        """Inside a guarded call: stop it (without a retry) once time is up."""
        if self.left() <= 0:
            raise PhaseDeadlineReached(f"phase time limit of {self.seconds:g}s reached")

    def expired_error(self, what: str) -> TransientProviderError:
        return TransientProviderError(
            f"{what} did not finish within the phase time limit of {self.seconds:g}s",
            kind="timeout",
        )


def _emit(request: ProviderRequest, name: str, data: dict[str, Any]) -> None:
    if request.on_event is not None:
        request.on_event(name, data)


def _target(call: ToolCall) -> str:
    args = call.arguments or {}
    if call.name == "run_command" and isinstance(args.get("argv"), list):
        return truncate(" ".join(str(a) for a in args["argv"]), 200)
    for key in ("path", "pattern"):
        if isinstance(args.get(key), str):
            return truncate(str(args[key]), 200)
    return ""


def _run_tool(toolbox: ToolBox, call: ToolCall, deadline: Deadline) -> ToolOutcome:
    if call.arguments is None:
        return ToolOutcome(
            f"the arguments of {call.name} were not a JSON object: "
            f"{truncate(call.raw_arguments, 200)!r}",
            is_error=True,
        )
    return toolbox.call(call.name, call.arguments, time_left=max(deadline.left(), 0.1))


def run_agent_loop(
    session: ChatSession,
    toolbox: ToolBox,
    request: ProviderRequest,
    *,
    provider: str,
    model: str,
    max_turns: int,
    timeout: float,
    price: Price | None = None,
    clock: Clock = time.monotonic,
) -> ProviderResult:
    """Turns until the model answers without tool calls; usage summed and priced."""
    deadline = Deadline(timeout, clock)
    total = Usage(cost_usd=0.0 if price is not None else None)
    _emit(
        request,
        "agent_started",
        {
            "provider": provider,
            "model": model,
            "access": request.access.value,
            "tools": [spec.name for spec in toolbox.specs],
            "max_turns": max_turns,
        },
    )
    for number in range(1, max_turns + 1):
        if deadline.left() <= 0:
            raise deadline.expired_error(f"{provider} agent")

        def one_call() -> Turn:
            deadline.check()
            return session.send(timeout=deadline.left(), check_deadline=deadline.check)

        try:
            turn = request.guard(one_call)
        except PhaseDeadlineReached:
            raise deadline.expired_error(f"{provider} agent") from None
        usage = priced(turn.usage, price)
        total.add(usage)
        _emit(
            request,
            "agent_turn",
            {
                "turn": number,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cost_usd": usage.cost_usd,
                "usage_estimated": turn.usage_estimated,
                "tool_calls": len(turn.tool_calls),
                "stop_reason": turn.stop_reason,
            },
        )
        if turn.text.strip():
            _emit(request, "agent_text", {"turn": number, "text": truncate(turn.text, _EVENT_TEXT)})
        if not turn.tool_calls:
            return ProviderResult(
                text=turn.text,
                usage=total,
                duration=deadline.elapsed(),
                files_changed=list(toolbox.files_changed),
            )
        results: list[ToolResult] = []
        for call in turn.tool_calls:
            outcome = _run_tool(toolbox, call, deadline)
            _emit(
                request,
                "tool_call",
                {
                    "turn": number,
                    "tool": call.name,
                    "target": _target(call),
                    "ok": not outcome.is_error,
                    **({"error": truncate(outcome.text, 200)} if outcome.is_error else {}),
                },
            )
            results.append(ToolResult(call.id, call.name, outcome.text, outcome.is_error))
        session.add_tool_results(results)
    raise AgentTurnLimitError(
        f"{provider} agent used all {max_turns} turns without a final answer",
        hint="raise ai.max_turns, or make the story smaller",
    )
