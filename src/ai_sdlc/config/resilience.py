"""The `resilience` section: its vocabulary, defaults and checks, as plain validated values.

`resilience/config.py` turns the checked values into its retry, breaker and budget objects;
this module imports nothing from `resilience` so that `config` can check the whole file (with
file:line errors) before anything runs. Every bad value is reported naming its dotted key, the
expected form and the value found, e.g. "resilience.policies.llm.max_attempts must be an
integer >= 1, got 'x'". Unknown keys get a did-you-mean suggestion.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NoReturn

import msgspec

from ai_sdlc.errors import TRANSIENT_KINDS, InvalidInputError
from ai_sdlc.settingkey import key

#: Kinds never retried (`resilience.classify.NEVER_RETRY_KINDS`) and the backoff vocabulary
#: (`resilience.backoff`), here so that config can check the section without importing
#: `resilience` (a test holds the copies equal).
NEVER_RETRY_KINDS = frozenset({"auth", "config", "request", "limit", "blocked", "halted"})
STRATEGIES: tuple[str, ...] = ("exponential", "linear", "fixed", "decorrelated")
JITTERS: tuple[str, ...] = ("none", "full", "equal")

POLICY_NAMES: tuple[str, ...] = ("llm", "github", "tool", "verification")

#: Kinds a policy may list in `retryable_errors` (the never-kinds are refused).
RETRYABLE_KINDS: tuple[str, ...] = (
    *TRANSIENT_KINDS,
    "conflict",
    "not_found",
    "not_implemented",
    "circuit_open",
    "unknown",
)

_LLM_BREAKER: dict[str, Any] = {
    "failure_threshold": 5,
    "window": "time",
    "window_size": 60,
    "minimum_calls": 1,
    "failure_rate_threshold": None,
    "open_timeout": 60,
    "half_open_max_calls": 1,
    "success_threshold": 1,
}

#: Defaults in config-file form, so defaults and overrides share one validated path.
DEFAULT_POLICIES: dict[str, dict[str, Any]] = {
    "llm": {
        "max_attempts": 3,
        "initial_delay": 1.0,
        "max_delay": 30.0,
        "strategy": "exponential",
        "multiplier": 2.0,
        "jitter": 0.1,
        "retryable_errors": list(TRANSIENT_KINDS),
        "retryable_statuses": [429, 500, 502, 503, 504, 529],
        "attempt_timeout": None,
        "overall_timeout": None,
        "breaker": dict(_LLM_BREAKER),
    },
    "github": {
        "max_attempts": 3,
        "initial_delay": 2.0,
        "max_delay": 30.0,
        "strategy": "exponential",
        "multiplier": 2.0,
        "jitter": 0.1,
        "retryable_errors": ["rate_limit", "server", "timeout", "connection"],
        "retryable_statuses": [429, 500, 502, 503, 504],
        "attempt_timeout": None,
        "overall_timeout": 300.0,
        "breaker": dict(_LLM_BREAKER),
    },
    "tool": {
        "max_attempts": 2,
        "initial_delay": 1.0,
        "max_delay": 10.0,
        "strategy": "exponential",
        "multiplier": 2.0,
        "jitter": 0.1,
        "retryable_errors": ["timeout", "connection"],
        "retryable_statuses": [],
        "attempt_timeout": None,
        "overall_timeout": None,
        "breaker": {**_LLM_BREAKER, "failure_threshold": 10, "open_timeout": 30},
    },
    "verification": {
        "max_attempts": 2,
        "initial_delay": 1.0,
        "max_delay": 1.0,
        "strategy": "fixed",
        "multiplier": 1.0,
        "jitter": "none",
        "retryable_errors": ["timeout"],
        "retryable_statuses": [],
        "attempt_timeout": None,
        "overall_timeout": None,
        "breaker": None,
    },
}

DEFAULT_BUDGET: dict[str, Any] = {
    "enabled": True,
    "ratio": 0.2,
    "floor_per_second": 0.05,
    "burst": 5,
}


class BreakerKeys(msgspec.Struct, forbid_unknown_fields=True):
    """`resilience.policies.<name>.breaker`: a circuit breaker around each attempt (for the
    docs; `check_section` checks it, with the messages the tests pin)."""

    failure_threshold: Annotated[int, key("failures in the window that trip the breaker")]
    window: Annotated[Literal["time", "count"], key("the window: the last seconds or calls")]
    window_size: Annotated[float, key("seconds (time) or calls (count) in the window")]
    minimum_calls: Annotated[int, key("calls in the window before it may trip")]
    failure_rate_threshold: Annotated[
        float | None, key("share of failing calls that also must be reached; null: none")
    ]
    open_timeout: Annotated[float, key("seconds open before one trial call")]
    half_open_max_calls: Annotated[int, key("trial calls let through while half-open")]
    success_threshold: Annotated[int, key("trial successes that close it again")]


class PolicyKeys(msgspec.Struct, forbid_unknown_fields=True):
    """`resilience.policies.<name>` (llm, github, tool, verification): how calls are retried."""

    max_attempts: Annotated[int, key("attempts in total, the first included")]
    initial_delay: Annotated[float, key("seconds before the first retry")]
    max_delay: Annotated[float, key("longest wait between attempts, seconds")]
    strategy: Annotated[
        Literal["exponential", "linear", "fixed", "decorrelated"], key("how the wait grows")
    ]
    multiplier: Annotated[float, key("growth factor of the wait (>= 1)")]
    jitter: Annotated[
        Literal["none", "full", "equal"] | float,
        key("randomness of the wait: none | full | equal, or a factor 0..1"),
    ]
    retryable_errors: Annotated[list[str], key("error kinds retried (never auth, config...)")]
    retryable_statuses: Annotated[list[int], key("HTTP statuses retried")]
    attempt_timeout: Annotated[float | None, key("seconds one attempt may take; null: none")]
    overall_timeout: Annotated[float | None, key("seconds all attempts may take; null: none")]
    breaker: Annotated[BreakerKeys | bool | None, key("circuit breaker settings; false/null: none")]


class BudgetKeys(msgspec.Struct, forbid_unknown_fields=True):
    """`resilience.budget`: retries a run may make, as a share of its calls."""

    enabled: Annotated[bool, key("false: no retry budget")]
    ratio: Annotated[float, key("retries allowed per call made (0..1)")]
    floor_per_second: Annotated[float, key("retries per second always allowed")]
    burst: Annotated[float, key("retries that may be spent at once")]


def check_section(
    section: Mapping[str, Any] | None, *, source: str | None = None
) -> dict[str, Any]:
    """The `resilience` section (None or {} for the defaults) checked over the defaults:
    {"policies": {name: {"retry": {...}, "breaker": {...} | None}}, "budget": {...} | None}."""
    section = _mapping(section or {}, "resilience", source)
    _check_keys(section, ("policies", "budget"), "resilience", source)
    overrides = _mapping(section.get("policies") or {}, "resilience.policies", source)
    _check_keys(overrides, POLICY_NAMES, "resilience.policies", source)
    policies = {}
    for name in POLICY_NAMES:
        key = f"resilience.policies.{name}"
        given = _mapping(overrides.get(name) or {}, key, source)
        policies[name] = _policy(name, _merged(DEFAULT_POLICIES[name], given, key, source), source)
    return {"policies": policies, "budget": _budget(section.get("budget"), source)}


def _merged(
    default: Mapping[str, Any], given: Mapping[str, Any], key: str, source: str | None
) -> dict[str, Any]:
    _check_keys(given, tuple(default), key, source)
    values = copy.deepcopy(dict(default))
    for name, value in given.items():
        if name == "breaker" and value is True:
            values["breaker"] = values.get("breaker") or dict(_LLM_BREAKER)
        elif name == "breaker" and isinstance(value, Mapping):
            base = values.get("breaker") or _LLM_BREAKER
            breaker_key = f"{key}.breaker"
            _check_keys(
                _mapping(value, breaker_key, source), tuple(_LLM_BREAKER), breaker_key, source
            )
            values["breaker"] = {**base, **value}
        else:
            values[name] = value
    return values


def _policy(name: str, values: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    key = f"resilience.policies.{name}"
    check = _Checker(key, source)
    initial = check.number("initial_delay", values, minimum=0)
    max_delay = check.number("max_delay", values, minimum=0)
    if max_delay < initial:
        check.fail("max_delay", f"must be >= initial_delay ({initial:g})", max_delay)
    retry = dict(
        max_attempts=check.integer("max_attempts", values, minimum=1),
        initial_delay=initial,
        max_delay=max_delay,
        strategy=check.choice("strategy", values, STRATEGIES),
        multiplier=check.number("multiplier", values, minimum=1),
        jitter=check.jitter("jitter", values),
        retryable_errors=check.kinds("retryable_errors", values),
        retryable_statuses=check.statuses("retryable_statuses", values),
        attempt_timeout=check.optional_positive("attempt_timeout", values),
        overall_timeout=check.optional_positive("overall_timeout", values),
    )
    raw_breaker = values.get("breaker")
    if raw_breaker is None or raw_breaker is False:
        return {"retry": retry, "breaker": None}
    breaker_values = _mapping(raw_breaker, f"{key}.breaker", source)
    return {"retry": retry, "breaker": _breaker(breaker_values, _Checker(f"{key}.breaker", source))}


def _breaker(values: Mapping[str, Any], check: _Checker) -> dict[str, Any]:
    window = check.choice("window", values, ("time", "count"))
    if window == "count":
        window_size: float = check.integer("window_size", values, minimum=1)
    else:
        window_size = check.number("window_size", values, minimum=0, exclusive=True)
    half_open = check.integer("half_open_max_calls", values, minimum=1)
    success = check.integer("success_threshold", values, minimum=1)
    if success > half_open:
        check.fail("success_threshold", f"must be <= half_open_max_calls ({half_open})", success)
    rate: Any = values.get("failure_rate_threshold")
    if rate is not None and (not _is_number(rate) or not 0 < rate <= 1):
        check.fail("failure_rate_threshold", "must be a number in (0, 1] or null", rate)
    return dict(
        failure_threshold=check.integer("failure_threshold", values, minimum=1),
        window=window,
        window_size=window_size,
        minimum_calls=check.integer("minimum_calls", values, minimum=1),
        failure_rate_threshold=float(rate) if rate is not None else None,
        open_timeout=check.number("open_timeout", values, minimum=0),
        half_open_max_calls=half_open,
        success_threshold=success,
    )


def _budget(raw: Any, source: str | None) -> dict[str, float] | None:
    given = _mapping(raw or {}, "resilience.budget", source)
    _check_keys(given, tuple(DEFAULT_BUDGET), "resilience.budget", source)
    values = {**DEFAULT_BUDGET, **given}
    check = _Checker("resilience.budget", source)
    enabled = values["enabled"]
    if not isinstance(enabled, bool):
        check.fail("enabled", "must be true or false", enabled)
    ratio = check.number("ratio", values, minimum=0)
    if ratio > 1:
        check.fail("ratio", "must be a number between 0 and 1", ratio)
    config = dict(
        ratio=ratio,
        floor_per_second=check.number("floor_per_second", values, minimum=0),
        burst=check.number("burst", values, minimum=1),
    )
    return config if enabled else None


# --- checking helpers ---------------------------------------------------------------------


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return repr(value) if not isinstance(value, int | float) else f"{value:g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: Any, key: str, source: str | None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"{key} must be a mapping of settings, got {_shown(value)}", path=source
        )
    return value


def _check_keys(
    given: Mapping[str, Any], allowed: tuple[str, ...], key: str, source: str | None
) -> None:
    for name in given:
        if name not in allowed:
            import difflib  # only for a misspelt name

            close = difflib.get_close_matches(str(name), allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(allowed)}"
            raise InvalidInputError(f"unknown setting {key}.{name}", path=source, hint=hint)


class _Checker:
    """Reads one typed value at a time, failing with the full dotted key."""

    def __init__(self, prefix: str, source: str | None) -> None:
        self.prefix = prefix
        self.source = source

    def fail(self, name: str, expected: str, value: Any) -> NoReturn:
        raise InvalidInputError(
            f"{self.prefix}.{name} {expected}, got {_shown(value)}", path=self.source
        )

    def integer(self, name: str, values: Mapping[str, Any], *, minimum: int) -> int:
        value: Any = values.get(name)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(name, f"must be an integer >= {minimum}", value)
        return value

    def number(
        self, name: str, values: Mapping[str, Any], *, minimum: float, exclusive: bool = False
    ) -> float:
        value: Any = values.get(name)
        ok = _is_number(value) and (value > minimum if exclusive else value >= minimum)
        if not ok:
            relation = ">" if exclusive else ">="
            self.fail(name, f"must be a number {relation} {minimum:g}", value)
        return float(value)

    def optional_positive(self, name: str, values: Mapping[str, Any]) -> float | None:
        value: Any = values.get(name)
        if value is None:
            return None
        if not _is_number(value) or value <= 0:
            self.fail(name, "must be a number of seconds > 0 or null", value)
        return float(value)

    def choice(self, name: str, values: Mapping[str, Any], choices: tuple[str, ...]) -> Any:
        value: Any = values.get(name)
        if value not in choices:
            self.fail(name, f"must be one of {', '.join(choices)}", value)
        return value

    def jitter(self, name: str, values: Mapping[str, Any]) -> str | float:
        value: Any = values.get(name)
        if isinstance(value, str) and value in JITTERS:
            return value
        if _is_number(value) and 0 <= value <= 1:
            return float(value)
        self.fail(name, f"must be one of {', '.join(JITTERS)} or a factor between 0 and 1", value)

    def kinds(self, name: str, values: Mapping[str, Any]) -> list[str]:
        value: Any = values.get(name)
        if not isinstance(value, list):
            self.fail(name, "must be a list of error kinds", value)
        for kind in value:
            if kind in NEVER_RETRY_KINDS:
                self.fail(name, "cannot list an error kind that is never retried", kind)
            if kind not in RETRYABLE_KINDS:
                self.fail(name, f"entries must be among {', '.join(RETRYABLE_KINDS)}", kind)
        return list(value)

    def statuses(self, name: str, values: Mapping[str, Any]) -> list[int]:
        value: Any = values.get(name)
        if not isinstance(value, list):
            self.fail(name, "must be a list of HTTP status codes", value)
        for status in value:
            if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
                self.fail(name, "entries must be HTTP status codes (100-599)", status)
        return list(value)
