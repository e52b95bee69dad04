"""What the `openai` and `anthropic` providers share: settings, key lookup, endpoint display,
and the execute template (SDK client with `max_retries=0` → our agent loop → client closed).

Subclasses say which package, which environment variables and default endpoint, how to build
the client, and how to open a chat session on it.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from ai_sdlc.providers.agent_loop import run_agent_loop
from ai_sdlc.providers.base import ConfiguredProvider, ProviderRequest, ProviderResult
from ai_sdlc.providers.errors_map import safe_url
from ai_sdlc.providers.pricing import price_for
from ai_sdlc.providers.selection import effective_timeout, max_turns, resolve_model
from ai_sdlc.providers.tools import ToolBox, toolbox_for


class ApiAgentProvider(ConfiguredProvider):
    #: Environment variable holding the key unless `ai.<name>.api_key_env` says otherwise.
    default_key_env: ClassVar[str]
    #: Environment variable with a base URL, read when `ai.<name>.base_url` is unset.
    base_url_env: ClassVar[str]
    default_endpoint: ClassVar[str]

    @property
    def key_env(self) -> str:
        return str(self.own.get("api_key_env") or self.default_key_env)

    @property
    def base_url(self) -> str | None:
        """The endpoint (may hold user:password@, so never print it: use `endpoint`)."""
        url = self.own.get("base_url") or self.environ.get(self.base_url_env)
        return str(url) if url else None

    @property
    def endpoint(self) -> str:
        return safe_url(self.base_url) if self.base_url else self.default_endpoint

    def api_key(self) -> str | None:
        return self.environ.get(self.key_env) or None

    @property
    def stream(self) -> bool:
        return self.own.get("stream", True) is not False

    @abc.abstractmethod
    def _client(self, timeout: float) -> tuple[Any, tuple[str, ...]]:
        """(SDK client built with max_retries=0, the secrets to redact from errors)."""

    @abc.abstractmethod
    def _session(
        self,
        client: Any,
        *,
        model: str,
        request: ProviderRequest,
        toolbox: ToolBox,
        secrets: tuple[str, ...],
    ) -> Any:
        """The protocol's chat session for `run_agent_loop`."""

    def execute(self, request: ProviderRequest) -> ProviderResult:
        model = resolve_model(self.name, self.settings, request.model, self.environ)
        assert model is not None  # both API providers have a default model
        timeout = effective_timeout(request, self.settings)
        client, secrets = self._client(timeout)
        toolbox = toolbox_for(request, self.settings)
        session = self._session(
            client, model=model, request=request, toolbox=toolbox, secrets=secrets
        )
        try:
            return run_agent_loop(
                session,
                toolbox,
                request,
                provider=self.name,
                model=model,
                max_turns=max_turns(self.settings, request.phase),
                timeout=timeout,
                price=price_for(self.settings, model),
            )
        finally:
            client.close()
