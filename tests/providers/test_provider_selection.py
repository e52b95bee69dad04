"""Provider selection precedence, auto-detect, model resolution, phase limits, pricing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.providers.base import Access, Phase, ProviderRequest, Usage
from ai_sdlc.providers.pricing import Price, estimate_call, price_for, priced
from ai_sdlc.providers.selection import (
    NO_AI_NOTICE,
    NO_PROVIDER,
    auto_detect,
    choose_provider_name,
    effective_timeout,
    max_turns,
    resolve_model,
)

#: Tests here drive the openai or anthropic SDK in this process (2.5 s of CPU to import
#: both, once per process): one xdist worker for all such tests pays it once.
pytestmark = pytest.mark.xdist_group("provider-sdks")


def no_binary(_name: str) -> str | None:
    return None


def has_claude(name: str) -> str | None:
    return "/usr/local/bin/claude" if name == "claude" else None


def test_flag_beats_env_beats_config_beats_auto() -> None:
    settings = {"provider": "openai"}
    env = {"AI_SDLC_PROVIDER": "anthropic"}
    assert choose_provider_name(
        flag="command", settings=settings, environ=env, which=has_claude
    ) == ("command", "--provider", None)
    assert choose_provider_name(flag=None, settings=settings, environ=env, which=has_claude) == (
        "anthropic",
        "AI_SDLC_PROVIDER",
        None,
    )
    assert choose_provider_name(flag=None, settings=settings, environ={}, which=has_claude) == (
        "openai",
        "config",
        None,
    )
    assert choose_provider_name(flag=None, settings={}, environ={}, which=has_claude) == (
        "claude",
        "auto",
        None,
    )


def test_auto_detect_order_and_offline_notice() -> None:
    assert auto_detect({}, {"OPENAI_API_KEY": "k"}, has_claude)[0] == "claude"
    assert (
        auto_detect({}, {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, no_binary)[0]
        == "anthropic"
    )
    assert (
        auto_detect({}, {"OPENAI_BASE_URL": "http://localhost:11434/v1"}, no_binary)[0] == "openai"
    )
    assert auto_detect({"openai": {"base_url": "http://x/v1"}}, {}, no_binary)[0] == "openai"
    name, source, notice = choose_provider_name(flag=None, settings={}, environ={}, which=no_binary)
    assert (name, source, notice) == (NO_PROVIDER, "auto", NO_AI_NOTICE)


def test_configured_claude_binary_must_exist() -> None:
    settings = {"claude": {"binary": "/opt/nowhere/claude"}}
    assert auto_detect(settings, {}, no_binary)[0] == NO_PROVIDER


def test_model_precedence() -> None:
    settings = {"model": "generic", "openai": {"model": "specific"}}
    assert resolve_model("openai", settings, "from-request", {"AI_SDLC_MODEL": "env"}) == (
        "from-request"
    )
    assert resolve_model("openai", settings, None, {"AI_SDLC_MODEL": "env"}) == "env"
    assert resolve_model("openai", settings, None, {}) == "specific"
    assert resolve_model("anthropic", settings, None, {}) == "generic"
    assert resolve_model("anthropic", {}, None, {}) == "claude-sonnet-4-6"
    assert resolve_model("claude", {}, None, {}) is None  # the CLI picks its own


def _request(phase: Phase, timeout: float) -> ProviderRequest:
    return ProviderRequest(
        phase=phase,
        prompt="p",
        system_prompt="s",
        workspace=Path("."),
        access=Access.READ_ONLY,
        timeout=timeout,
        story_id="S-0001",
    )


def test_phase_timeout_is_the_lower_of_runner_and_config() -> None:
    settings = {"timeouts": {"plan": 30, "default": 100}}
    assert effective_timeout(_request(Phase.PLAN, 900), settings) == 30
    assert effective_timeout(_request(Phase.REVIEW, 900), settings) == 100
    assert effective_timeout(_request(Phase.REVIEW, 50), settings) == 50
    assert effective_timeout(_request(Phase.REVIEW, 50), {}) == 50
    with pytest.raises(InvalidInputError):
        effective_timeout(_request(Phase.PLAN, 900), {"timeouts": {"plan": "soon"}})


def test_max_turns_global_or_per_phase() -> None:
    assert max_turns({}, Phase.PLAN) == 40
    assert max_turns({"max_turns": 5}, Phase.PLAN) == 5
    assert max_turns({"max_turns": {"implement": 60}}, Phase.IMPLEMENT) == 60
    assert max_turns({"max_turns": {"implement": 60}}, Phase.PLAN) == 40
    with pytest.raises(InvalidInputError):
        max_turns({"max_turns": 0}, Phase.PLAN)


def test_prices_come_only_from_config() -> None:
    settings = {"prices": {"m": {"input_per_mtok": 3, "output_per_mtok": 15}}}
    price = price_for(settings, "m")
    assert price == Price(3.0, 15.0)
    assert price_for(settings, "other") is None
    assert priced(Usage(1_000_000, 100_000), price).cost_usd == pytest.approx(4.5)
    assert priced(Usage(10, 10), None).cost_usd is None
    with pytest.raises(InvalidInputError):
        price_for({"prices": {"m": {"input_per_mtok": -1}}}, "m")


def test_estimate_call_is_prompt_plus_full_answer() -> None:
    settings = {
        "prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1}},
        "max_output_tokens": 1000,
    }
    estimate = estimate_call(settings, "m", prompt="x" * 4000, system_prompt="y" * 400)
    assert estimate.input_tokens == 1100
    assert estimate.output_tokens == 1000
    assert estimate.cost_usd == pytest.approx(2100 / 1e6)
