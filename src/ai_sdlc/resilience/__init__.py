"""Resilience engine: retries with backoff, circuit breakers, named policies, a run-wide retry
budget and persisted metrics around every external call (LLM APIs, GitHub, tools, checks).

Typical use (one `PolicyManager` per run):

    manager = PolicyManager.from_config(config.section("resilience"), source=str(config.path),
                                        project_root=root)
    text = manager.execute_with_policy("llm", lambda: provider.execute(request),
                                       on_retry=record_api_retry)
"""

from ai_sdlc.resilience.backoff import apply_jitter, base_delay, jitter_bounds
from ai_sdlc.resilience.breaker import (
    BreakerSnapshot,
    BreakerStats,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitState,
)
from ai_sdlc.resilience.budget import BudgetConfig, BudgetStats, RetryBudget
from ai_sdlc.resilience.classify import Classification, classify, retry_after_from_headers
from ai_sdlc.resilience.clock import ManualClock
from ai_sdlc.resilience.config import (
    DEFAULT_POLICIES,
    POLICY_NAMES,
    Policy,
    ResilienceSettings,
    load_settings,
)
from ai_sdlc.resilience.errors import AttemptTimeoutError, CircuitBreakerOpenError
from ai_sdlc.resilience.persistence import (
    BreakerStore,
    MetricsStore,
    PersistentBreaker,
    StateDir,
)
from ai_sdlc.resilience.policy import PolicyManager
from ai_sdlc.resilience.report import metrics_report
from ai_sdlc.resilience.retry import (
    CallAttempt,
    RetryConfig,
    RetryEngine,
    RetryHook,
    RetryResult,
)

__all__ = [
    "DEFAULT_POLICIES",
    "POLICY_NAMES",
    "AttemptTimeoutError",
    "BreakerSnapshot",
    "BreakerStats",
    "BreakerStore",
    "BudgetConfig",
    "BudgetStats",
    "CallAttempt",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "CircuitBreakerOpenError",
    "CircuitState",
    "Classification",
    "ManualClock",
    "MetricsStore",
    "PersistentBreaker",
    "Policy",
    "PolicyManager",
    "ResilienceSettings",
    "RetryBudget",
    "RetryConfig",
    "RetryEngine",
    "RetryHook",
    "RetryResult",
    "StateDir",
    "apply_jitter",
    "base_delay",
    "classify",
    "jitter_bounds",
    "load_settings",
    "metrics_report",
    "retry_after_from_headers",
]
