"""Provider names → classes, imported lazily.

`import anthropic` alone costs over a second, so nothing is imported until a provider is asked
for by name; a missing optional extra becomes a `ProviderConfigError` with the install line.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ai_sdlc.providers.base import Provider, ProviderConfigError


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    #: "package.module:ClassName"
    target: str
    #: The pip extra that brings the provider's client library, if it needs one.
    extra: str | None = None
    #: Top-level modules that extra provides (a ModuleNotFoundError for one means "install it").
    extra_modules: tuple[str, ...] = ()


PROVIDER_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec("scripted", "ai_sdlc.providers.scripted:ScriptedProvider"),
    ProviderSpec("dry-run", "ai_sdlc.providers.dry_run:DryRunProvider"),
    ProviderSpec(
        "openai", "ai_sdlc.providers.openai_provider:OpenAIProvider", "openai", ("openai",)
    ),
    ProviderSpec(
        "anthropic",
        "ai_sdlc.providers.anthropic_provider:AnthropicProvider",
        "anthropic",
        ("anthropic",),
    ),
    ProviderSpec(
        "claude",
        "ai_sdlc.providers.claude_provider:ClaudeProvider",
        "claude",
        ("claude_agent_sdk",),
    ),
    ProviderSpec("command", "ai_sdlc.providers.command_provider:CommandProvider"),
)

PROVIDER_NAMES: tuple[str, ...] = tuple(spec.name for spec in PROVIDER_SPECS)
_BY_NAME = {spec.name: spec for spec in PROVIDER_SPECS}


def provider_spec(name: str) -> ProviderSpec:
    """The spec registered under `name` (case and surrounding spaces ignored)."""
    key = name.strip().lower()
    spec = _BY_NAME.get(key)
    if spec is None:
        raise ProviderConfigError(
            f"unknown provider {name!r}; valid providers: {', '.join(PROVIDER_NAMES)}",
            hint="set ai.provider in .ai-sdlc/config.yaml (or pass --provider) to one of those",
        )
    return spec


def provider_class(name: str) -> type[Provider]:
    """Import and return the class for `name` (the client library is imported only now)."""
    spec = provider_spec(name)
    module_name, _, class_name = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise _missing_module_error(spec, exc) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ProviderConfigError(
            f"the {spec.name} provider is broken: {spec.target} is not a Provider class",
            hint="reinstall ai-sdlc",
        )
    return cls


def _missing_module_error(spec: ProviderSpec, exc: ModuleNotFoundError) -> ProviderConfigError:
    missing = (exc.name or "").split(".")[0]
    if spec.extra is not None and missing in spec.extra_modules:
        return ProviderConfigError(
            f"the {spec.name} provider needs the '{missing}' package, which is not installed",
            hint=f"pip install 'ai-sdlc[{spec.extra}]'",
        )
    return ProviderConfigError(
        f"the {spec.name} provider cannot be loaded: module {exc.name!r} is missing",
        hint="reinstall ai-sdlc (pip install --force-reinstall ai-sdlc)",
    )


def create_provider(name: str, *, project_root: Path, settings: Mapping[str, Any]) -> Provider:
    """Build the provider `name` for `project_root` with the `ai` config section `settings`."""
    cls = provider_class(name)
    # Every provider takes (project_root, settings); the ABC's signature cannot say so.
    factory: Any = cls
    try:
        provider: Provider = factory(project_root, settings)
    except ModuleNotFoundError as exc:  # a provider importing its client library lazily
        raise _missing_module_error(provider_spec(name), exc) from exc
    return provider
