"""The `resilience` section of config.yaml as the objects a run uses.

The section's vocabulary, defaults and checks belong to `config.resilience` (so that `config`
checks the whole file, with file:line errors, without importing this package); here the checked
values become retry configs, circuit breakers and the retry budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ai_sdlc.config.resilience import (
    DEFAULT_BUDGET,
    DEFAULT_POLICIES,
    POLICY_NAMES,
    RETRYABLE_KINDS,
    check_section,
)
from ai_sdlc.resilience.breaker import CircuitBreakerConfig
from ai_sdlc.resilience.budget import BudgetConfig
from ai_sdlc.resilience.classify import classify, is_transient_kind
from ai_sdlc.resilience.retry import RetryConfig

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_POLICIES",
    "POLICY_NAMES",
    "RETRYABLE_KINDS",
    "Policy",
    "ResilienceSettings",
    "breaker_counts_failure",
    "load_settings",
]


class Policy(msgspec.Struct, frozen=True):
    """A named policy: how to retry, and the breaker around each attempt (None: no breaker)."""

    name: str
    retry: RetryConfig
    breaker: CircuitBreakerConfig | None


class ResilienceSettings(msgspec.Struct, frozen=True):
    """The policies and retry budget a run uses, read once from config."""

    policies: dict[str, Policy]
    #: None when `resilience.budget.enabled` is false.
    budget: BudgetConfig | None


def breaker_counts_failure(exc: BaseException) -> bool:
    """Policy breakers count only errors that say the service is unwell (transient kinds)."""
    return is_transient_kind(classify(exc).kind)


def load_settings(
    section: Mapping[str, Any] | None, *, source: str | None = None
) -> ResilienceSettings:
    """Validate the `resilience` section (may be None or {}) over the defaults."""
    checked = check_section(section, source=source)
    policies: dict[str, Policy] = {}
    for name, values in checked["policies"].items():
        retry = dict(values["retry"])
        retry["retryable_errors"] = tuple(retry["retryable_errors"])
        retry["retryable_statuses"] = frozenset(retry["retryable_statuses"])
        breaker = values["breaker"]
        policies[name] = Policy(
            name,
            RetryConfig(**retry),
            None
            if breaker is None
            else CircuitBreakerConfig(**breaker, is_failure=breaker_counts_failure),
        )
    budget = checked["budget"]
    return ResilienceSettings(policies, None if budget is None else BudgetConfig(**budget))
