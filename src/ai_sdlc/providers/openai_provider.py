"""The `openai` provider: any OpenAI-compatible chat-completions endpoint with our agent loop.

Works with OpenAI itself, a LiteLLM proxy, or a local Ollama / llama.cpp / vLLM server.

Settings (the `ai` section of config.yaml):
    ai.openai.base_url     endpoint, e.g. http://localhost:11434/v1 (else OPENAI_BASE_URL,
                           else OpenAI's own)
    ai.openai.api_key_env  name of the environment variable holding the key (default
                           OPENAI_API_KEY); keys never live in config files. A local server
                           needs none.
    ai.openai.model        model name (see `selection.resolve_model` for the precedence)
    ai.openai.stream       true (default) | false for servers without streaming support
    ai.max_turns, ai.timeouts.<phase>, ai.tools.*, ai.prices.<model>   shared settings

The SDK is imported only inside `execute`, with `max_retries=0`: every retry is the runner's.
"""

from __future__ import annotations

import importlib.util
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
from ai_sdlc.providers.errors_map import map_openai_error, map_transport_error
from ai_sdlc.providers.pricing import estimate_tokens, tokens_for_chars
from ai_sdlc.providers.tools import ToolBox, ToolSpec

#: Sent as the key to servers that need none (the SDK insists on one).
LOCAL_PLACEHOLDER_KEY = "not-needed"
DEFAULT_ENDPOINT = "https://api.openai.com/v1"


def openai_tools(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.parameters},
        }
        for s in specs
    ]


class OpenAIChat:
    """One chat-completions conversation (streaming or not)."""

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        system_prompt: str,
        prompt: str,
        tools: list[ToolSpec],
        stream: bool,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        self.model = model
        self.tools = openai_tools(tools)
        self.stream = stream
        self.secrets = secrets
        self.messages: list[dict[str, Any]] = []
        if system_prompt:
            self.messages.append({"role": "system", "content": system_prompt})
        self.messages.append({"role": "user", "content": prompt})

    def send(self, *, timeout: float, check_deadline: Callable[[], None]) -> Turn:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "timeout": max(timeout, 0.05),
        }
        if self.tools:
            kwargs["tools"] = self.tools
        try:
            if self.stream:
                turn, message = self._streamed(kwargs, check_deadline)
            else:
                turn, message = self._whole(kwargs)
        except Exception as exc:
            mapped = map_openai_error(exc, secrets=self.secrets) or map_transport_error(exc)
            if mapped is None:
                raise
            raise mapped from None
        self.messages.append(message)
        return turn

    def add_tool_results(self, results: list[ToolResult]) -> None:
        for result in results:
            text = result.text if not result.is_error else f"ERROR: {result.text}"
            self.messages.append({"role": "tool", "tool_call_id": result.call_id, "content": text})

    # --- protocol details -------------------------------------------------------------------

    def _estimate(self, output: str) -> Usage:
        prompt_chars = sum(len(str(m.get("content") or "")) for m in self.messages)
        return Usage(
            input_tokens=tokens_for_chars(prompt_chars),
            output_tokens=estimate_tokens(output),
        )

    def _whole(self, kwargs: dict[str, Any]) -> tuple[Turn, dict[str, Any]]:
        response = self.client.chat.completions.create(**kwargs)
        choice = response.choices[0]
        message = choice.message
        text = message.content or ""
        calls = [
            ToolCall(
                id=tc.id,
                name=tc.function.name,
                arguments=parse_arguments(tc.function.arguments),
                raw_arguments=tc.function.arguments or "",
            )
            for tc in (message.tool_calls or [])
        ]
        usage = response.usage
        turn = Turn(text=text, tool_calls=calls, stop_reason=choice.finish_reason)
        if usage is not None:
            turn.usage = Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
        else:
            turn.usage, turn.usage_estimated = self._estimate(text), True
        return turn, self._assistant_message(text, calls)

    def _streamed(
        self, kwargs: dict[str, Any], check_deadline: Callable[[], None]
    ) -> tuple[Turn, dict[str, Any]]:
        stream = self.client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **kwargs
        )
        parts: list[str] = []
        pending: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: Usage | None = None
        try:
            for chunk in stream:
                check_deadline()
                if getattr(chunk, "usage", None) is not None:
                    usage = Usage(
                        chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0
                    )
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        parts.append(delta.content)
                    for tc in (delta.tool_calls if delta is not None else None) or []:
                        slot = pending.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            slot["name"] += tc.function.name or ""
                            slot["args"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
        finally:
            stream.close()
        text = "".join(parts)
        calls = [
            ToolCall(
                id=slot["id"] or f"call_{index}",
                name=slot["name"],
                arguments=parse_arguments(slot["args"]),
                raw_arguments=slot["args"],
            )
            for index, slot in sorted(pending.items())
        ]
        turn = Turn(text=text, tool_calls=calls, stop_reason=finish)
        if usage is not None:
            turn.usage = usage
        else:
            turn.usage, turn.usage_estimated = self._estimate(text), True
        return turn, self._assistant_message(text, calls)

    @staticmethod
    def _assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.raw_arguments or "{}"},
                }
                for c in calls
            ]
        return message


class OpenAIProvider(ApiAgentProvider):
    name: ClassVar[str] = "openai"
    default_key_env: ClassVar[str] = "OPENAI_API_KEY"
    base_url_env: ClassVar[str] = "OPENAI_BASE_URL"
    default_endpoint: ClassVar[str] = DEFAULT_ENDPOINT

    def status(self) -> ProviderStatus:
        if importlib.util.find_spec("openai") is None:
            from ai_sdlc import install_command

            return ProviderStatus(
                self.name, False, f"the openai package is missing: {install_command('openai')}"
            )
        if self.api_key():
            return ProviderStatus(
                self.name, True, f"{self.key_env} is set; endpoint {self.endpoint}"
            )
        if self.base_url:
            return ProviderStatus(self.name, True, f"endpoint {self.endpoint} (no key sent)")
        return ProviderStatus(
            self.name, False, f"set {self.key_env}, or OPENAI_BASE_URL / ai.openai.base_url"
        )

    def _client(self, timeout: float) -> tuple[Any, tuple[str, ...]]:
        key = self.api_key()
        if key is None and self.base_url is None:
            raise ProviderConfigError(
                f"the openai provider needs {self.key_env} or a base URL",
                hint="export OPENAI_API_KEY=..., or set ai.openai.base_url to a local server",
            )
        import openai

        client = openai.OpenAI(
            api_key=key or LOCAL_PLACEHOLDER_KEY,
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout,
        )
        return client, ((key,) if key else ())

    def _session(
        self,
        client: Any,
        *,
        model: str,
        request: ProviderRequest,
        toolbox: ToolBox,
        secrets: tuple[str, ...],
    ) -> OpenAIChat:
        return OpenAIChat(
            client,
            model=model,
            system_prompt=request.system_prompt,
            prompt=request.prompt,
            tools=toolbox.specs,
            stream=self.stream,
            secrets=secrets,
        )
