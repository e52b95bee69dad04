"""The `resilience` section: its vocabulary, defaults and models, as plain validated values.

`resilience/config.py` turns the checked values into its retry, breaker and budget objects;
this module imports nothing from `resilience` so that `config` can check the whole file (with
file:line errors) before anything runs. Each key is checked by its model (`PolicyKeys`,
`BreakerKeys`, `BudgetKeys`: the same models feed the docs); what a type cannot say (max_delay
>= initial_delay, never-retried error kinds...) is checked after. Every bad value is reported
naming its dotted key, the expected form and the value found, e.g.
"resilience.policies.llm.max_attempts must be an integer >= 1, got 'x'".
Unknown keys get a did-you-mean suggestion.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NoReturn

import msgspec
from msgspec import Meta

from ai_sdlc.config.fields import Setting, _builtin, settings_of
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


_Count = Annotated[int, Meta(ge=1)]
_Seconds = Annotated[float, Meta(ge=0)]
_SECONDS_OR_NULL = "a number of seconds > 0 or null"


class BreakerKeys(msgspec.Struct, forbid_unknown_fields=True):
    """`resilience.policies.<name>.breaker`: a circuit breaker around each attempt."""

    failure_threshold: Annotated[_Count, key("failures in the window that trip the breaker")]
    window: Annotated[Literal["time", "count"], key("the window: the last seconds or calls")]
    window_size: Annotated[
        Annotated[float, Meta(gt=0)],
        key("seconds (time) or calls (count) in the window", check="finite"),
    ]
    minimum_calls: Annotated[_Count, key("calls in the window before it may trip")]
    failure_rate_threshold: Annotated[
        Annotated[float, Meta(gt=0, le=1)] | None,
        key(
            "share of failing calls that also must be reached; null: none",
            expected="a number in (0, 1] or null",
        ),
    ]
    open_timeout: Annotated[_Seconds, key("seconds open before one trial call", check="finite")]
    half_open_max_calls: Annotated[_Count, key("trial calls let through while half-open")]
    success_threshold: Annotated[_Count, key("trial successes that close it again")]


class PolicyKeys(msgspec.Struct, forbid_unknown_fields=True):
    """`resilience.policies.<name>` (llm, github, tool, verification): how calls are retried."""

    max_attempts: Annotated[_Count, key("attempts in total, the first included")]
    initial_delay: Annotated[_Seconds, key("seconds before the first retry", check="finite")]
    max_delay: Annotated[_Seconds, key("longest wait between attempts, seconds", check="finite")]
    strategy: Annotated[
        Literal["exponential", "linear", "fixed", "decorrelated"], key("how the wait grows")
    ]
    multiplier: Annotated[
        Annotated[float, Meta(ge=1)], key("growth factor of the wait (>= 1)", check="finite")
    ]
    jitter: Annotated[
        Literal["none", "full", "equal"] | Annotated[float, Meta(ge=0, le=1)],
        key(
            "randomness of the wait: none | full | equal, or a factor 0..1",
            expected="one of none, full, equal or a factor between 0 and 1",
        ),
    ]
    retryable_errors: Annotated[
        list[str],
        key("error kinds retried (never auth, config...)", expected="a list of error kinds"),
    ]
    retryable_statuses: Annotated[
        list[Annotated[int, Meta(ge=100, le=599)]],
        key("HTTP statuses retried", expected="a list of HTTP status codes (100-599)"),
    ]
    attempt_timeout: Annotated[
        Annotated[float, Meta(gt=0)] | None,
        key("seconds one attempt may take; null: none", check="finite", expected=_SECONDS_OR_NULL),
    ]
    overall_timeout: Annotated[
        Annotated[float, Meta(gt=0)] | None,
        key("seconds all attempts may take; null: none", check="finite", expected=_SECONDS_OR_NULL),
    ]
    breaker: Annotated[BreakerKeys | bool | None, key("circuit breaker settings; false/null: none")]


class BudgetKeys(msgspec.Struct, forbid_unknown_fields=True):
    """`resilience.budget`: retries a run may make, as a share of its calls."""

    enabled: Annotated[bool, key("false: no retry budget")]
    ratio: Annotated[
        Annotated[float, Meta(ge=0, le=1)],
        key("retries allowed per call made (0..1)", expected="a number between 0 and 1"),
    ]
    floor_per_second: Annotated[_Seconds, key("retries per second always allowed", check="finite")]
    burst: Annotated[
        Annotated[float, Meta(ge=1)], key("retries that may be spent at once", check="finite")
    ]


#: Each model's own keys (a nested model, `breaker`, is checked on its own).
_KEYS: dict[type[msgspec.Struct], dict[str, Setting]] = {
    model: {k: s for k, s in settings_of(model).items() if "." not in k}
    for model in (BreakerKeys, PolicyKeys, BudgetKeys)
}


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


def _checked(
    model: type[msgspec.Struct], values: Mapping[str, Any], prefix: str, source: str | None
) -> dict[str, Any]:
    """`values` checked key by key against `model` (the key, what it must be and the value
    found), as the model's types (an integer where an int is meant, floats otherwise)."""
    out: dict[str, Any] = {}
    for name, setting in _KEYS[model].items():
        value = values.get(name)
        if isinstance(value, float) and value.is_integer() and setting.type_name == "int":
            value = int(value)  # `3.0` attempts is 3
        if not setting.check(value):
            _fail(prefix, name, f"must be {setting.expected}", value, source)
        out[name] = _builtin(value)  # ruamel's ScalarFloat... as the built-in types
    if "breaker" in model.__struct_fields__:
        out["breaker"] = None  # checked on its own (`_breaker`)
    typed = msgspec.structs.asdict(msgspec.convert(out, model))
    typed.pop("breaker", None)
    return typed


def _policy(name: str, values: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    key = f"resilience.policies.{name}"
    retry = _checked(PolicyKeys, values, key, source)
    if retry["max_delay"] < retry["initial_delay"]:
        _fail(key, "max_delay", f"must be >= initial_delay ({retry['initial_delay']:g})",
              retry["max_delay"], source)  # fmt: skip
    for kind in retry["retryable_errors"]:
        if kind in NEVER_RETRY_KINDS:
            _fail(key, "retryable_errors", "cannot list an error kind that is never retried",
                  kind, source)  # fmt: skip
        if kind not in RETRYABLE_KINDS:
            _fail(key, "retryable_errors", f"entries must be among {', '.join(RETRYABLE_KINDS)}",
                  kind, source)  # fmt: skip
    raw_breaker = values.get("breaker")
    if raw_breaker is None or raw_breaker is False:
        return {"retry": retry, "breaker": None}
    breaker_values = _mapping(raw_breaker, f"{key}.breaker", source)
    return {"retry": retry, "breaker": _breaker(breaker_values, f"{key}.breaker", source)}


def _breaker(values: Mapping[str, Any], key: str, source: str | None) -> dict[str, Any]:
    breaker = _checked(BreakerKeys, values, key, source)
    size = breaker["window_size"]
    if breaker["window"] == "count":
        if not float(size).is_integer() or size < 1:
            _fail(key, "window_size", "must be an integer >= 1", size, source)
        breaker["window_size"] = int(size)
    if breaker["success_threshold"] > breaker["half_open_max_calls"]:
        _fail(key, "success_threshold",
              f"must be <= half_open_max_calls ({breaker['half_open_max_calls']})",
              breaker["success_threshold"], source)  # fmt: skip
    return breaker


def _budget(raw: Any, source: str | None) -> dict[str, float] | None:
    given = _mapping(raw or {}, "resilience.budget", source)
    _check_keys(given, tuple(DEFAULT_BUDGET), "resilience.budget", source)
    values = _checked(BudgetKeys, {**DEFAULT_BUDGET, **given}, "resilience.budget", source)
    enabled = values.pop("enabled")
    return values if enabled else None


# --- messages ----------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return repr(value) if not isinstance(value, int | float) else f"{value:g}"


def _fail(prefix: str, name: str, expected: str, value: Any, source: str | None) -> NoReturn:
    raise InvalidInputError(f"{prefix}.{name} {expected}, got {_shown(value)}", path=source)


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
