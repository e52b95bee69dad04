"""The `anthropic` provider: the Anthropic Messages API with our agent loop.

Settings (the `ai` section of config.yaml):
    ai.anthropic.base_url     endpoint (else ANTHROPIC_BASE_URL, else Anthropic's own)
    ai.anthropic.api_key_env  environment variable holding the key (default ANTHROPIC_API_KEY)
    ai.anthropic.model        model name (see `selection.resolve_model`)
    ai.anthropic.stream       true (default) | false
    ai.max_output_tokens      max_tokens per call (default 8192)
    ai.max_turns, ai.timeouts.<phase>, ai.tools.*, ai.prices.<model>   shared settings

Overload arrives two ways: HTTP 529, or an `overloaded_error` event inside a stream that
started with 200; both become `TransientProviderError(kind="overloaded")`. The SDK is imported
only inside `execute`, with `max_retries=0`.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from typing import Any, ClassVar

from ai_sdlc.providers.agent_loop import (
    ToolCall,
    ToolResult,
    Turn,
    parse_arguments,
)
from ai_sdlc.providers.api_provider import ApiAgentProvider
from ai_sdlc.providers.base import (
    ProviderConfigError,
    ProviderRequest,
    ProviderStatus,
    Usage,
)
from ai_sdlc.providers.errors_map import map_anthropic_error, map_transport_error
from ai_sdlc.providers.pricing import max_output
from ai_sdlc.providers.tools import ToolBox, ToolSpec

DEFAULT_ENDPOINT = "https://api.anthropic.com"


def _install_anthropic() -> str:
    from ai_sdlc import install_command

    return install_command("anthropic")


def anthropic_tools(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "description": s.description, "input_schema": s.parameters} for s in specs
    ]


def _input_tokens(usage: Any) -> int:
    """Billed input: fresh tokens plus cache writes and reads."""
    total = 0
    for attr in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = getattr(usage, attr, None)
        if isinstance(value, int):
            total += value
    return total


class AnthropicChat:
    """One Messages API conversation (streaming or not)."""

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        system_prompt: str,
        prompt: str,
        tools: list[ToolSpec],
        max_tokens: int,
        stream: bool,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        self.model = model
        self.system_prompt = system_prompt
        self.tools = anthropic_tools(tools)
        self.max_tokens = max_tokens
        self.stream = stream
        self.secrets = secrets
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]

    def send(self, *, timeout: float, check_deadline: Callable[[], None]) -> Turn:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": self.messages,
            "timeout": max(timeout, 0.05),
        }
        if self.system_prompt:
            kwargs["system"] = self.system_prompt
        if self.tools:
            kwargs["tools"] = self.tools
        try:
            turn, content = (
                self._streamed(kwargs, check_deadline) if self.stream else self._whole(kwargs)
            )
        except Exception as exc:
            mapped = map_anthropic_error(exc, secrets=self.secrets) or map_transport_error(exc)
            if mapped is None:
                raise
            raise mapped from None
        self.messages.append({"role": "assistant", "content": content})
        return turn

    def add_tool_results(self, results: list[ToolResult]) -> None:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.text or "(no output)",
                "is_error": r.is_error,
            }
            for r in results
        ]
        self.messages.append({"role": "user", "content": blocks})

    # --- protocol details -------------------------------------------------------------------

    def _whole(self, kwargs: dict[str, Any]) -> tuple[Turn, list[dict[str, Any]]]:
        response = self.client.messages.create(**kwargs)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in response.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                args = block.input if isinstance(block.input, dict) else None
                calls.append(ToolCall(block.id, block.name, args, json.dumps(block.input)))
        usage = Usage(_input_tokens(response.usage), response.usage.output_tokens or 0)
        turn = Turn("".join(texts), calls, usage, response.stop_reason)
        return turn, self._content(texts, calls)

    def _streamed(
        self, kwargs: dict[str, Any], check_deadline: Callable[[], None]
    ) -> tuple[Turn, list[dict[str, Any]]]:
        stream = self.client.messages.create(stream=True, **kwargs)
        blocks: dict[int, dict[str, str]] = {}
        input_tokens = output_tokens = 0
        stop: str | None = None
        try:
            for event in stream:
                check_deadline()
                kind = event.type
                if kind == "message_start":
                    input_tokens = _input_tokens(event.message.usage)
                    output_tokens = event.message.usage.output_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        blocks[event.index] = {
                            "type": "tool_use",
                            "id": block.id,
                            "name": block.name,
                            "json": "",
                        }
                    elif block.type == "text":
                        blocks[event.index] = {"type": "text", "text": block.text or ""}
                elif kind == "content_block_delta":
                    slot = blocks.get(event.index)
                    delta = event.delta
                    if slot is None:
                        continue
                    if delta.type == "text_delta":
                        slot["text"] = slot.get("text", "") + delta.text
                    elif delta.type == "input_json_delta":
                        slot["json"] = slot.get("json", "") + delta.partial_json
                elif kind == "message_delta":
                    stop = event.delta.stop_reason or stop
                    if event.usage is not None and event.usage.output_tokens is not None:
                        output_tokens = event.usage.output_tokens
        finally:
            stream.close()
        texts: list[str] = []
        calls: list[ToolCall] = []
        for _index, slot in sorted(blocks.items()):
            if slot["type"] == "text":
                texts.append(slot["text"])
            else:
                raw = slot.get("json", "")
                calls.append(ToolCall(slot["id"], slot["name"], parse_arguments(raw), raw))
        turn = Turn("".join(texts), calls, Usage(input_tokens, output_tokens), stop)
        return turn, self._content(texts, calls)

    @staticmethod
    def _content(texts: list[str], calls: list[ToolCall]) -> list[dict[str, Any]]:
        # The API refuses empty text blocks, and wants tool inputs back as objects.
        content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts if t.strip()]
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments or {}}
            for c in calls
        ]
        return content or [{"type": "text", "text": "(no answer)"}]


class AnthropicProvider(ApiAgentProvider):
    name: ClassVar[str] = "anthropic"
    default_key_env: ClassVar[str] = "ANTHROPIC_API_KEY"
    base_url_env: ClassVar[str] = "ANTHROPIC_BASE_URL"
    default_endpoint: ClassVar[str] = DEFAULT_ENDPOINT

    def status(self) -> ProviderStatus:
        if importlib.util.find_spec("anthropic") is None:
            return ProviderStatus(
                self.name,
                False,
                f"the anthropic package is missing: {_install_anthropic()}",
            )
        if not self.api_key():
            return ProviderStatus(self.name, False, f"{self.key_env} is not set")
        return ProviderStatus(self.name, True, f"{self.key_env} is set; endpoint {self.endpoint}")

    def _client(self, timeout: float) -> tuple[Any, tuple[str, ...]]:
        key = self.api_key()
        if key is None:
            raise ProviderConfigError(
                f"the anthropic provider needs {self.key_env}",
                hint=f"export {self.key_env}=... (keys are never read from config files)",
            )
        import anthropic

        client = anthropic.Anthropic(
            api_key=key, base_url=self.base_url, max_retries=0, timeout=timeout
        )
        return client, (key,)

    def _session(
        self,
        client: Any,
        *,
        model: str,
        request: ProviderRequest,
        toolbox: ToolBox,
        secrets: tuple[str, ...],
    ) -> AnthropicChat:
        return AnthropicChat(
            client,
            model=model,
            system_prompt=request.system_prompt,
            prompt=request.prompt,
            tools=toolbox.specs,
            max_tokens=max_output(self.settings),
            stream=self.stream,
            secrets=secrets,
        )
