"""Which provider runs, with which model, for how long: the precedence rules in one place.

Provider: `--provider` flag > `AI_SDLC_PROVIDER` > `ai.provider` in config > auto-detect:
a `claude` binary (configured `ai.claude.binary`, on PATH, or bundled with the
claude-agent-sdk extra) → `claude`; else `ANTHROPIC_API_KEY` with the anthropic package →
`anthropic`; else `OPENAI_BASE_URL`/`OPENAI_API_KEY` (or `ai.openai.base_url`) with the openai
package → `openai`; else none (`NO_PROVIDER`): the run stops before it touches anything (exit
4, with what `doctor` says fixes it). The offline `scripted` provider is never a silent
stand-in: it runs only when named (`--provider scripted`, `ai.provider: scripted`,
`AI_SDLC_PROVIDER=scripted`, the demo), so a forgotten `export` cannot turn a backlog into
simulated "done" stories. Auto-detection takes only a provider whose client library imports
(what `doctor` calls usable); a key seen without its package is named with the install command.
A provider chosen by name whose package is missing stops the command (exit 4, install command),
and so does one whose own pre-flight (`Provider.status`: a key, a binary) fails: before any
worktree, attempt number or event, so a failed start leaves the story as it was.

Model: the request's model > `AI_SDLC_MODEL` > `ai.<provider>.model` > `ai.model` > the
provider's default. Phase limits: `ai.max_turns` (a number, or a mapping phase → number) and
`ai.timeouts.<phase>` (seconds; the lower of it and the runner's phase timeout applies).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ai_sdlc.errors import InvalidInputError, ProviderUnavailableError
from ai_sdlc.providers.base import Phase, Provider, ProviderRequest

Which = Callable[[str], str | None]


class HasSections(Protocol):
    """What selection reads of the effective config (`config.Config`; providers do not import
    config)."""

    def section(self, name: str) -> dict[str, Any]: ...


#: Used when no model is configured anywhere (the CLI agents pick their own default).
DEFAULT_MODELS: dict[str, str] = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-6"}
DEFAULT_MAX_TURNS = 40
DEFAULT_PHASE_TIMEOUT = 900.0

#: The name auto-detection gives when nothing is configured: not a provider, a refusal.
NO_PROVIDER = "none"
NO_AI_NOTICE = "no AI provider is configured"
#: How to get out of NO_PROVIDER: `doctor`'s fix line and the run's hint say the same.
NO_AI_FIX = (
    "set ANTHROPIC_API_KEY or OPENAI_API_KEY (or OPENAI_BASE_URL), install the claude CLI, or "
    "name a provider (ai-sdlc config ai.provider NAME); the offline simulator runs only when "
    "named: --provider scripted"
)


class Selection(msgspec.Struct, frozen=True):
    name: str
    #: Where the choice came from: "--provider", "AI_SDLC_PROVIDER", "config" or "auto".
    source: str
    provider: Provider
    notice: str | None = None


def bundled_claude() -> str | None:
    """The `claude` binary shipped inside the claude-agent-sdk wheel, if that extra is here."""
    try:
        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "_bundled" / "claude"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_claude(settings: Mapping[str, Any], which: Which = shutil.which) -> str | None:
    """Path of the `claude` executable to use, or None when there is none."""
    claude = settings.get("claude")
    configured = claude.get("binary") if isinstance(claude, Mapping) else None
    if configured:
        return which(str(configured))
    return which("claude") or bundled_claude()


def _sub(settings: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = settings.get(name)
    return value if isinstance(value, Mapping) else {}


def _evidence(name: str, settings: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """What says the user wants `name` (an environment variable or config key), or None."""
    own = _sub(settings, name)
    if name == "anthropic":
        key_env = str(own.get("api_key_env") or "ANTHROPIC_API_KEY")
        return key_env if environ.get(key_env) else None
    if name == "openai":
        key_env = str(own.get("api_key_env") or "OPENAI_API_KEY")
        for found in (key_env, "OPENAI_BASE_URL"):
            if environ.get(found):
                return found
        return "ai.openai.base_url" if own.get("base_url") else None
    return None


class Detection(msgspec.Struct, frozen=True):
    name: str
    why: str
    #: Providers the user asked for (a key is set) that cannot run: one clause each.
    skipped: tuple[str, ...] = ()


def detect(
    settings: Mapping[str, Any], environ: Mapping[str, str], which: Which = shutil.which
) -> Detection:
    """The first usable provider in the auto-detect order, and what was passed over."""
    from ai_sdlc.providers.registry import install_hint, missing_package, provider_spec

    if find_claude(settings, which):
        return Detection("claude", "a claude CLI was found")
    skipped: list[str] = []
    for name in ("anthropic", "openai"):
        seen = _evidence(name, settings, environ)
        if seen is None:
            continue
        module = missing_package(name)
        if module is None:
            return Detection(name, f"{seen} is set", tuple(skipped))
        skipped.append(
            f"{seen} is set but the {module} package is not installed "
            f"({install_hint(provider_spec(name))})"
        )
    return Detection(NO_PROVIDER, NO_AI_NOTICE, tuple(skipped))


def auto_detect(
    settings: Mapping[str, Any], environ: Mapping[str, str], which: Which = shutil.which
) -> tuple[str, str]:
    """(provider name, why) for a project that names no provider."""
    found = detect(settings, environ, which)
    return found.name, found.why


def _notice(found: Detection) -> str | None:
    """One line when nothing usable was found: that, or what was seen and which package is
    missing."""
    if found.name != NO_PROVIDER:
        return None
    if not found.skipped:
        return NO_AI_NOTICE
    return NO_AI_NOTICE + ": " + "; ".join(found.skipped)


def choose_provider_name(
    *,
    flag: str | None,
    settings: Mapping[str, Any],
    environ: Mapping[str, str],
    which: Which = shutil.which,
) -> tuple[str, str, str | None]:
    """(name, source, notice) by the precedence rules; names are not validated here."""
    if flag:
        return flag.strip().lower(), "--provider", None
    if environ.get("AI_SDLC_PROVIDER"):
        return environ["AI_SDLC_PROVIDER"].strip().lower(), "AI_SDLC_PROVIDER", None
    configured = settings.get("provider")
    if isinstance(configured, str) and configured.strip():
        return configured.strip().lower(), "config", None
    found = detect(settings, environ, which)
    return found.name, "auto", _notice(found)


def select_provider(
    *,
    flag: str | None,
    config: HasSections,
    project_root: Path,
    environ: Mapping[str, str] | None = None,
    which: Which = shutil.which,
) -> Selection:
    """Build the provider a run uses, after its pre-flight: none configured, a missing extra,
    key or binary raises `ProviderUnavailableError` (exit 4) before anything is touched."""
    from ai_sdlc.providers.registry import (
        create_provider,
        missing_package,
        missing_package_error,
        provider_spec,
    )

    env = os.environ if environ is None else environ
    settings = config.section("ai")
    name, source, notice = choose_provider_name(
        flag=flag, settings=settings, environ=env, which=which
    )
    if name == NO_PROVIDER and source == "auto":
        raise ProviderUnavailableError(notice or NO_AI_NOTICE, hint=NO_AI_FIX)
    provider_spec(name)  # an unknown name is a config error before anything else
    module = missing_package(name)
    if module is not None:  # auto-detection never picks such a provider: it was named
        raise missing_package_error(name, module, _shown_source(source))
    provider = create_provider(name, project_root=project_root, settings=settings)
    status = provider.status()
    if not status.usable:
        raise ProviderUnavailableError(
            f"the {name} provider (from {_shown_source(source)}) cannot start: {status.reason}",
            hint="nothing was changed; `ai-sdlc doctor` shows every provider usable here, "
            "or choose another with --provider / AI_SDLC_PROVIDER / ai.provider",
        )
    return Selection(name=name, source=source, provider=provider, notice=notice)


def _shown_source(source: str) -> str:
    return {"config": "ai.provider"}.get(source, source)


def resolve_model(
    provider: str,
    settings: Mapping[str, Any],
    request_model: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The model name to use, or None to let a CLI agent pick its own default."""
    env = os.environ if environ is None else environ
    for candidate in (
        request_model,
        env.get("AI_SDLC_MODEL"),
        _sub(settings, provider).get("model"),
        settings.get("model"),
        DEFAULT_MODELS.get(provider),
    ):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return None


def _positive_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidInputError(f"{where} must be a number > 0, got {value!r}")
    return float(value)


def max_turns(settings: Mapping[str, Any], phase: Phase) -> int:
    """`ai.max_turns` for `phase`: one number for all, or a mapping phase → number."""
    raw = settings.get("max_turns", DEFAULT_MAX_TURNS)
    if isinstance(raw, Mapping):
        raw = raw.get(phase.value, DEFAULT_MAX_TURNS)
        where = f"ai.max_turns.{phase.value}"
    else:
        where = "ai.max_turns"
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise InvalidInputError(f"{where} must be an integer >= 1, got {raw!r}")
    return raw


def effective_timeout(request: ProviderRequest, settings: Mapping[str, Any]) -> float:
    """Wall-clock seconds the phase may take: the lower of the runner's and `ai.timeouts`."""
    limits: list[float] = []
    if request.timeout > 0:
        limits.append(float(request.timeout))
    timeouts = _sub(settings, "timeouts")
    raw = timeouts.get(request.phase.value, timeouts.get("default"))
    if raw is not None:
        limits.append(_positive_number(raw, f"ai.timeouts.{request.phase.value}"))
    return min(limits) if limits else DEFAULT_PHASE_TIMEOUT
