"""`resilience.*` in config.yaml: defaults, overrides and clear validation errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.resilience import POLICY_NAMES, load_settings
from tests.conftest import run_cli


def test_defaults_follow_the_usual_practice() -> None:
    settings = load_settings(None)
    assert tuple(settings.policies) == POLICY_NAMES
    llm = settings.policies["llm"]
    assert llm.retry.max_attempts == 3
    assert (llm.retry.initial_delay, llm.retry.max_delay) == (1.0, 30.0)
    assert (llm.retry.strategy, llm.retry.jitter) == ("exponential", 0.1)
    assert llm.retry.retryable_statuses == frozenset({429, 500, 502, 503, 504, 529})
    assert llm.breaker is not None
    assert (llm.breaker.failure_threshold, llm.breaker.open_timeout) == (5, 60.0)
    verification = settings.policies["verification"]
    assert verification.breaker is None
    assert verification.retry.retryable_errors == ("timeout",)
    assert verification.retry.retryable_statuses == frozenset()
    assert settings.budget is not None and settings.budget.ratio == 0.2


def test_overrides_merge_over_defaults_including_the_breaker() -> None:
    settings = load_settings(
        {
            "policies": {
                "llm": {"max_attempts": 5, "jitter": "full", "breaker": {"open_timeout": 120}},
                "github": {"breaker": False},
                "verification": {"breaker": True},
            },
            "budget": {"enabled": False},
        }
    )
    llm = settings.policies["llm"]
    assert llm.retry.max_attempts == 5 and llm.retry.jitter == "full"
    assert llm.retry.max_delay == 30.0
    assert llm.breaker is not None
    assert (llm.breaker.open_timeout, llm.breaker.failure_threshold) == (120.0, 5)
    assert settings.policies["github"].breaker is None
    assert settings.policies["verification"].breaker is not None
    assert settings.budget is None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"policies": {"llm": {"max_attempts": "x"}}},
            "resilience.policies.llm.max_attempts must be an integer >= 1, got 'x'",
        ),
        (
            {"policies": {"llm": {"max_attempts": True}}},
            "resilience.policies.llm.max_attempts must be an integer >= 1, got true",
        ),
        (
            {"policies": {"tool": {"initial_delay": -1}}},
            "resilience.policies.tool.initial_delay must be a number >= 0, got -1",
        ),
        (
            {"policies": {"llm": {"initial_delay": 10, "max_delay": 5}}},
            "resilience.policies.llm.max_delay must be >= initial_delay (10), got 5",
        ),
        (
            {"policies": {"llm": {"strategy": "random"}}},
            "resilience.policies.llm.strategy must be one of exponential, linear, fixed, "
            "decorrelated, got 'random'",
        ),
        (
            {"policies": {"llm": {"jitter": 2}}},
            "resilience.policies.llm.jitter must be one of none, full, equal or a factor",
        ),
        (
            {"policies": {"llm": {"retryable_errors": ["auth"]}}},
            "resilience.policies.llm.retryable_errors cannot list an error kind that is never "
            "retried, got 'auth'",
        ),
        (
            {"policies": {"llm": {"retryable_statuses": [429, 700]}}},
            "resilience.policies.llm.retryable_statuses must be a list of HTTP status codes "
            "(100-599), got [429, 700]",
        ),
        (
            {"policies": {"llm": {"overall_timeout": 0}}},
            "resilience.policies.llm.overall_timeout must be a number of seconds > 0 or null",
        ),
        (
            {"policies": {"llm": {"breaker": {"success_threshold": 3}}}},
            "resilience.policies.llm.breaker.success_threshold must be <= half_open_max_calls",
        ),
        (
            {"policies": {"llm": {"breaker": {"window": "count", "window_size": 2.5}}}},
            "resilience.policies.llm.breaker.window_size must be an integer >= 1, got 2.5",
        ),
        (
            {"policies": {"llm": {"breaker": {"failure_rate_threshold": 5}}}},
            "resilience.policies.llm.breaker.failure_rate_threshold must be a number in (0, 1]",
        ),
        ({"budget": {"ratio": 3}}, "resilience.budget.ratio must be a number between 0 and 1"),
        ({"policies": {"llm": 3}}, "resilience.policies.llm must be a mapping of settings"),
    ],
)
def test_bad_values_name_the_key_and_the_value(section: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_settings(section, source=".ai-sdlc/config.yaml")
    assert str(caught.value).startswith(f".ai-sdlc/config.yaml: {message}")


@pytest.mark.parametrize(
    ("section", "unknown", "suggestion"),
    [
        (
            {"policies": {"llm": {"max_attempt": 2}}},
            "resilience.policies.llm.max_attempt",
            "max_attempts",
        ),
        ({"policies": {"lm": {}}}, "resilience.policies.lm", "llm"),
        (
            {"policies": {"llm": {"breaker": {"open_timout": 1}}}},
            "resilience.policies.llm.breaker.open_timout",
            "open_timeout",
        ),
        ({"polices": {}}, "resilience.polices", "policies"),
    ],
)
def test_unknown_keys_get_a_suggestion(
    section: dict[str, Any], unknown: str, suggestion: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_settings(section)
    assert caught.value.message == f"unknown setting {unknown}"
    assert caught.value.hint == f"did you mean '{suggestion}'?"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        pytest.param(
            "resilience:\n  policies:\n    tool:\n      multiplier: 0.5\n",
            4,
            "resilience.policies.tool.multiplier must be a number >= 1, got 0.5",
            id="model-bound",
        ),
        pytest.param(
            "resilience:\n  budget:\n    burst: .inf\n",
            3,
            "resilience.budget.burst must be a number >= 1, got inf",
            id="model-finite",
        ),
        pytest.param(
            "resilience:\n  policies:\n    llm:\n      breaker:\n        window: hour\n",
            5,
            "resilience.policies.llm.breaker.window must be one of time, count, got 'hour'",
            id="model-choice",
        ),
    ],
)
def test_a_bad_resilience_value_in_the_file_names_file_line_key_and_type(
    project: Path, text: str, line: int, words: str
) -> None:
    """Checked by the models (PolicyKeys, BreakerKeys, BudgetKeys) through the real CLI."""
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text() + text)
    line += len(config.read_text().splitlines()) - len(text.splitlines())
    result = run_cli(project, "status")
    assert result.returncode == 3, result.output
    assert f"{config}:{line}: {words}" in result.stderr, result.stderr


def test_resilience_values_from_the_file_read_as_their_models_types(project: Path) -> None:
    """A float or int written by `config` (ruamel's ScalarFloat/ScalarInt when read back) is
    checked and used as the model's plain type."""
    for key, value in (("initial_delay", "0.5"), ("max_attempts", "4"), ("max_delay", "2")):
        result = run_cli(project, "config", f"resilience.policies.llm.{key}", value)
        assert result.returncode == 0, result.output
    result = run_cli(project, "status")
    assert result.returncode == 0, result.output
    from ai_sdlc.config import load_config

    section = load_config(project, environ={}).data["resilience"]
    llm = load_settings(section).policies["llm"].retry
    assert (llm.initial_delay, llm.max_attempts, llm.max_delay) == (0.5, 4, 2.0)
