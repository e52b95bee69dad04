"""Token usage → cost in USD, from prices the user puts in config (we ship no price list).

Prices change faster than releases, so a price is only known when `ai.prices.<model>` says so:

    ai:
      prices:
        gpt-4.1-mini: {input_per_mtok: 0.40, output_per_mtok: 1.60}

Without a price, usage still counts tokens (`limits.story_tokens` works) and `cost_usd` stays
None. The runner checks budgets before each call; `estimate_call` gives it a pessimistic
figure for the call it is about to make.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.providers.base import Usage

#: Rough characters per token for English prose and code; used only for estimates.
CHARS_PER_TOKEN = 4.0


class Price(msgspec.Struct, frozen=True):
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidInputError(
            f"{where} must be a number >= 0 (USD per million tokens), got {value!r}",
            hint="e.g. ai.prices.my-model: {input_per_mtok: 3, output_per_mtok: 15}",
        )
    return float(value)


def price_for(settings: Mapping[str, Any], model: str | None) -> Price | None:
    """The configured price of `model` (exact name), or None when not configured."""
    if not model:
        return None
    prices = settings.get("prices")
    if not isinstance(prices, Mapping):
        return None
    entry = prices.get(model)
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise InvalidInputError(
            f"ai.prices.{model} must be a mapping with input_per_mtok and output_per_mtok"
        )
    return Price(
        input_per_mtok=_number(entry.get("input_per_mtok", 0), f"ai.prices.{model}.input_per_mtok"),
        output_per_mtok=_number(
            entry.get("output_per_mtok", 0), f"ai.prices.{model}.output_per_mtok"
        ),
    )


def priced(usage: Usage, price: Price | None) -> Usage:
    """`usage` with `cost_usd` filled from `price` (unchanged when no price is known)."""
    if price is None:
        return usage
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=price.cost(usage.input_tokens, usage.output_tokens),
    )


def tokens_for_chars(chars: int) -> int:
    """A rough token count for `chars` characters (no tokenizer dependency)."""
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def estimate_tokens(text: str) -> int:
    """A rough token count for `text`."""
    return tokens_for_chars(len(text))


def estimate_call(
    settings: Mapping[str, Any],
    model: str | None,
    *,
    prompt: str,
    system_prompt: str = "",
    max_output_tokens: int | None = None,
) -> Usage:
    """What one more call will cost at most-ish: the prompt in, a full answer out.

    For the runner's budget check before a call: `used + estimate > limit` blocks the story
    before money is spent, instead of after.
    """
    out = max_output_tokens if max_output_tokens is not None else max_output(settings)
    usage = Usage(
        input_tokens=estimate_tokens(system_prompt) + estimate_tokens(prompt), output_tokens=out
    )
    return priced(usage, price_for(settings, model))


def max_output(settings: Mapping[str, Any]) -> int:
    """`ai.max_output_tokens` (default 8192): the answer size we ask the API for."""
    value = settings.get("max_output_tokens", 8192)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"ai.max_output_tokens must be an integer >= 1, got {value!r}")
    return value
