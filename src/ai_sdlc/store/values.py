"""Plain values: one shape for a frontmatter value, whichever loader produced it.

ruamel's round-trip loader returns subclasses (CommentedMap, ScalarInt, TimeStamp, quoted-string
types) that carry formatting; the fast loader and the cache return builtins. Comparing, caching
and printing all go through the plain form so that every path agrees on what a story holds.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from collections.abc import Mapping
from typing import Any

_STR_TAGS = frozenset(
    {"tag:yaml.org,2002:str", "tag:yaml.org,2002:value", "tag:yaml.org,2002:merge"}
)


class UnsupportedValueError(ValueError):
    """A value a story cannot hold (binary data, sets, custom tags, complex keys)."""

    def __init__(self, value: object) -> None:
        tag = getattr(value, "tag", None)
        name = getattr(tag, "value", tag)  # ruamel gives untagged maps, lists and sets a Tag(None)
        label = f"tag {name}" if name is not None else type(value).__name__
        super().__init__(
            f"unsupported value ({label}); a story holds text, numbers, true/false, dates, "
            "lists and mappings"
        )


def _ruamel_type(module: str, name: str) -> type | None:
    loaded = sys.modules.get(module)
    found = getattr(loaded, name, None) if loaded is not None else None
    return found if isinstance(found, type) else None


def to_plain(value: object) -> Any:
    """Builtin copy of `value` (dict, list, str, int, float, bool, None, date, datetime)."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool or kind is float:
        return value
    if kind is dt.date:
        return value
    if isinstance(value, Mapping):
        return {_plain_key(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return _plain_scalar(value)


def _plain_key(key: object) -> Any:
    plain = to_plain(key)
    if isinstance(plain, dict | list):
        raise UnsupportedValueError(key)
    return plain


def _plain_scalar(value: object) -> Any:
    scalar_bool = _ruamel_type("ruamel.yaml.scalarbool", "ScalarBoolean")
    if isinstance(value, bool) or (scalar_bool is not None and isinstance(value, scalar_bool)):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dt.datetime):
        return dt.datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            value.tzinfo,
            fold=value.fold,
        )
    if isinstance(value, dt.date):
        return dt.date(value.year, value.month, value.day)
    tagged = _ruamel_type("ruamel.yaml.comments", "TaggedScalar")
    if tagged is not None and isinstance(value, tagged):
        tag = getattr(value, "tag", None)
        if str(getattr(tag, "value", tag)) in _STR_TAGS:
            return str(getattr(value, "value", ""))
    raise UnsupportedValueError(value)


def strict_equal(a: object, b: object) -> bool:
    """Equality that also compares types and order (True != 1, 1 != 1.0, key order counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(
            strict_equal(ka, kb) and strict_equal(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        return a.replace(tzinfo=None) == b.replace(tzinfo=None) and a.utcoffset() == b.utcoffset()
    return a == b


def _float_text(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    return ".inf" if value > 0 else "-.inf"


def json_safe(value: Any) -> Any:
    """JSON-ready copy of a plain value: dates as ISO strings, keys as text, no NaN/inf."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return value if math.isfinite(value) else _float_text(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {_json_key(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return str(value)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    safe = json_safe(key)
    return safe if isinstance(safe, str) else str(safe)


# -- cache encoding: JSON with a few tagged objects so dates, NaN and odd keys survive ----------

_TAGS = ("$date", "$datetime", "$float", "$map")


def encode(value: Any) -> tuple[Any, bool]:
    """(JSON-able form, True when that form is the value itself, i.e. already JSON-safe)."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value, True
    if kind is float:
        return (value, True) if math.isfinite(value) else ({"$float": _float_text(value)}, False)
    if kind is dt.datetime:
        return {"$datetime": value.isoformat()}, False
    if kind is dt.date:
        return {"$date": value.isoformat()}, False
    if kind is list:
        items = [encode(v) for v in value]
        return [form for form, _ in items], all(same for _, same in items)
    if kind is dict:
        if all(type(k) is str and not k.startswith("$") for k in value):
            pairs = {k: encode(v) for k, v in value.items()}
            return {k: form for k, (form, _) in pairs.items()}, all(s for _, s in pairs.values())
        return {"$map": [[encode(k)[0], encode(v)[0]] for k, v in value.items()]}, False
    raise UnsupportedValueError(value)


def decode(form: Any) -> Any:
    """Inverse of `encode`; raises ValueError/TypeError/KeyError on a malformed form."""
    kind = type(form)
    if form is None or kind is str or kind is int or kind is bool or kind is float:
        return form
    if kind is list:
        return [decode(v) for v in form]
    if kind is not dict:
        raise TypeError(f"unexpected {kind.__name__} in cache")
    if len(form) == 1:
        (tag, inner), *_ = form.items()
        if tag == "$date":
            return dt.date.fromisoformat(inner)
        if tag == "$datetime":
            return dt.datetime.fromisoformat(inner)
        if tag == "$float":
            return {".nan": math.nan, ".inf": math.inf, "-.inf": -math.inf}[inner]
        if tag == "$map":
            return {decode(k): decode(v) for k, v in inner}
    if any(k in _TAGS for k in form):
        raise ValueError("malformed tagged value in cache")
    return {k: decode(v) for k, v in form.items()}


def usage_of(raw: Any) -> dict[str, Any]:
    """A story's recorded provider usage (`usage:` in its frontmatter) as plain figures: token
    and call counts (0 when missing or not whole numbers) and the cost (None when unknown)."""
    u = raw if isinstance(raw, dict) else {}

    def count(key: str) -> int:
        value = u.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    cost = u.get("cost_usd")
    return {
        "input_tokens": count("input_tokens"),
        "output_tokens": count("output_tokens"),
        "calls": count("calls"),
        "cost_usd": float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool)
        else None,
    }
