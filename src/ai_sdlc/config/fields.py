"""How a config key is declared, and the flat key table read from the section models.

A key is a field of a msgspec Struct: its type (with bounds, via `msgspec.Meta`) is the check,
its default is the default, and `key(...)` adds what a type cannot say: the meaning (for
`docs/configuration.md`), a named extra check (a command line must split like a shell splits
words) and, where the words generated from the type read badly, the expected form for messages.
`settings_of(Model)` flattens a model into dotted keys, each a `Setting`.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec
import msgspec.inspect as mi

from ai_sdlc.settingkey import key

__all__ = ["key"]

#: Largest recovery limit (a bigger one would in effect switch the guardrail off).
MAX_RECOVERY = 1000
#: Longest timeout, in seconds (one week).
MAX_SECONDS = 7 * 24 * 3600


class Setting(msgspec.Struct, frozen=True):
    """One config key: its default, the check a value must pass and what to say when it fails."""

    default: Any
    check: Callable[[Any], bool]
    expected: str
    doc: str = ""
    #: The type as the docs show it (`int`, `float | null`, `one of: a, b`...).
    type_name: str = ""
    #: False: absent from the effective config until set (the owner has its own default).
    materialize: bool = True
    #: "accept" or "strict" (`settingkey.Guard`): from the key's or its section's marker.
    guard: str = ""


def is_http_url(v: Any) -> bool:
    """An http:// or https:// URL with a host (a `file:` or `ftp:` URL is never called)."""
    from urllib.parse import urlsplit

    if not isinstance(v, str):
        return False
    try:
        parts = urlsplit(v.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def _command_line(v: Any) -> bool:
    """A command line that splits like a shell splits words (it is run without a shell)."""
    try:
        shlex.split(v)
    except ValueError:
        return False
    return True


def _relative(v: str) -> bool:
    return not posixpath.isabs(v) and ".." not in posixpath.normpath(v).split("/")


#: Checks a type cannot express, by name (applied to a value that is not null).
CHECKS: dict[str, Callable[[Any], bool]] = {
    "command_line": _command_line,
    "command_lines": lambda v: all(x.strip() and _command_line(x) for x in v),
    "nonblank": lambda v: bool(v.strip()),
    "nonblank_items": lambda v: all(x.strip() for x in v),
    "relative_paths": lambda v: all(x.strip() and _relative(x) for x in v),
    "finite": lambda v: math.isfinite(v),
    "finite_values": lambda v: all(math.isfinite(n) for n in v.values()),
    "http_url": is_http_url,
    "env_name": lambda v: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) is not None,
    "env_names": lambda v: all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", x) for x in v),
    "nonempty": bool,
}


def settings_of(model: type[msgspec.Struct]) -> dict[str, Setting]:
    """Every leaf key of `model`, dotted, in declaration order (nested Structs are walked; a
    nested Struct whose key says `materialize=False` passes that on to its leaves)."""
    out: dict[str, Setting] = {}
    info = mi.type_info(model)  # once: the tree holds every nested Struct
    assert isinstance(info, mi.StructType)
    _walk(info, "", True, out, [])
    return out


_GUARD_ORDER = ("", "accept", "strict")


def _stricter(a: str, b: str) -> str:
    return max(a, b, key=_GUARD_ORDER.index)


def sections_of(model: type[msgspec.Struct]) -> list[str]:
    """Dotted names of every nested Struct of `model` (`run`, `run.stop_conditions`...)."""
    sections: list[str] = []
    info = mi.type_info(model)
    assert isinstance(info, mi.StructType)
    _walk(info, "", True, {}, sections)
    return sections


def _walk(
    info: mi.StructType,
    prefix: str,
    materialize: bool,
    out: dict[str, Setting],
    sections: list[str],
    guard: str = "",
) -> None:
    annotations = {f.name: f.type for f in msgspec.structs.fields(info.cls)}
    for field in info.fields:
        dotted = prefix + field.encode_name
        inner, meta = _unwrap(_in_order(field.type, annotations[field.name]))
        keep = materialize and meta.get("materialize", True)
        level = _stricter(guard, meta.get("guard", ""))
        nested = _struct_of(inner)
        if nested is not None:
            sections.append(dotted)
            _walk(nested, dotted + ".", keep, out, sections, level)
            continue
        default = field.default if field.default is not msgspec.NODEFAULT else None
        if field.default_factory is not msgspec.NODEFAULT:
            default = field.default_factory()
        out[dotted] = Setting(
            default=default,
            check=_checker(annotations[field.name], meta.get("check")),
            expected=meta.get("expected") or expected_text(inner),
            doc=meta.get("doc", ""),
            type_name=meta.get("type") or type_text(inner),
            materialize=keep,
            guard=level,
        )


def _literals(annotation: Any) -> list[Any]:
    """Every Literal value in `annotation`, in the order written."""
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    return [v for arg in typing.get_args(annotation) for v in _literals(arg)]


def _in_order(t: mi.Type, annotation: Any) -> mi.Type:
    """`t` with its Literal values in the order written (msgspec sorts them)."""
    order = {v: i for i, v in enumerate(_literals(annotation))}
    if not order:
        return t

    def fix(node: mi.Type) -> mi.Type:
        if isinstance(node, mi.LiteralType):
            return mi.LiteralType(tuple(sorted(node.values, key=lambda v: order.get(v, 0))))
        if isinstance(node, mi.UnionType):
            return mi.UnionType(tuple(fix(x) for x in node.types))
        if isinstance(node, mi.Metadata):
            return msgspec.structs.replace(node, type=fix(node.type))
        return node

    return fix(t)


def _unwrap(t: mi.Type) -> tuple[mi.Type, dict[str, Any]]:
    meta: dict[str, Any] = {}
    while isinstance(t, mi.Metadata):
        meta.update(t.extra or {})
        if t.extra_json_schema and "description" in t.extra_json_schema:
            meta["doc"] = t.extra_json_schema["description"]
        t = t.type
    return t, meta


def _struct_of(t: mi.Type) -> mi.StructType | None:
    if isinstance(t, mi.StructType):
        return t
    if isinstance(t, mi.UnionType):
        found = [x for x in t.types if isinstance(x, mi.StructType)]
        return found[0] if found else None
    return None


def _checker(annotation: Any, extra: str | None) -> Callable[[Any], bool]:
    more = CHECKS[extra] if extra else None

    def check(value: Any) -> bool:
        try:
            msgspec.convert(_builtin(value), annotation)
        except (msgspec.ValidationError, TypeError):
            return False
        return more is None or value is None or bool(more(value))

    return check


def _builtin(value: Any) -> Any:
    """ruamel's scalar subclasses (ScalarFloat, ScalarInt...) as the built-in types."""
    if isinstance(value, bool) or value is None:
        return value
    for kind in (int, float, str):
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, Mapping):
        return {_builtin(k): _builtin(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_builtin(v) for v in value]
    return value


def _bounds(t: mi.IntType | mi.FloatType) -> str:
    low = ("> ", t.gt) if t.gt is not None else (">= ", t.ge) if t.ge is not None else None
    high = ("< ", t.lt) if t.lt is not None else ("<= ", t.le) if t.le is not None else None
    if low and high and low[0] == ">= " and high[0] == "<= ":
        return f" from {low[1]:,} to {high[1]:,}"
    words = [f"{b[0]}{b[1]:g}" for b in (low, high) if b is not None]
    return (" " + " and ".join(words)) if words else ""


def expected_text(t: mi.Type) -> str:
    """What a value must be, in words, from its type (`an integer from 1 to 1,000`)."""
    t = _unwrap(t)[0]
    if isinstance(t, mi.UnionType):
        parts = [expected_text(x) for x in t.types if not isinstance(x, mi.NoneType)]
        rest = " or ".join(parts)
        return f"{rest}, or null" if any(isinstance(x, mi.NoneType) for x in t.types) else rest
    if isinstance(t, mi.BoolType):
        return "true or false"
    if isinstance(t, mi.IntType):
        return "an integer" + _bounds(t)
    if isinstance(t, mi.FloatType):
        return "a number" + _bounds(t)
    if isinstance(t, mi.StrType):
        return "text"
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(str(v) for v in t.values)
    if isinstance(t, mi.ListType):
        return "a list"
    if isinstance(t, mi.DictType):
        return "a mapping"
    return "a value"


def type_text(t: mi.Type) -> str:
    """The type as the docs show it: `int`, `float | null`, `list[str]`, `"a" | "b"`."""
    t = _unwrap(t)[0]
    if isinstance(t, mi.UnionType):
        return " | ".join(type_text(x) for x in t.types)
    if isinstance(t, mi.LiteralType):
        return " | ".join(f'"{v}"' for v in t.values)
    if isinstance(t, mi.ListType):
        return f"list[{type_text(t.item_type)}]"
    if isinstance(t, mi.DictType):
        return f"dict[{type_text(t.key_type)}, {type_text(t.value_type)}]"
    names = {
        mi.NoneType: "null",
        mi.BoolType: "bool",
        mi.IntType: "int",
        mi.FloatType: "float",
        mi.StrType: "str",
        mi.AnyType: "any",
    }
    return names.get(type(t), "any")


def plain_default(value: Any) -> Any:
    """A default as plain data (lists and mappings copied, so no caller shares one)."""
    if isinstance(value, Mapping):
        return {k: plain_default(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_default(v) for v in value]
    return value
