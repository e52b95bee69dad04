"""Write new frontmatter values as YAML text that loads back to exactly the same value.

Strings stay unquoted only when that is unambiguous for YAML 1.2 (ruamel, js-yaml) AND YAML 1.1
(PyYAML and older tools): `yes`, `0777`, `1:20` or `2026-01-31` get quotes. Single quotes are
preferred (the TypeScript tool's style); double quotes only when escapes are needed. Nested
values are written as block YAML with two-space indentation.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from yaml import ScalarNode
from yaml.resolver import Resolver

from ai_sdlc.store.fastload import resolves_to_text


class UnrenderableError(ValueError):
    """A value (usually a key) this renderer will not write; a full re-dump handles it."""


_YAML11 = Resolver()
#: The YAML 1.1 spec's one-letter booleans: PyYAML reads them as text, other 1.1 readers do not.
_YAML11_BOOLS = frozenset("yYnN")
_INDICATOR_START = frozenset("-?:,[]{}#&*!|>'\"%@`")
_FLOW_CHARS = frozenset(",[]{}:#")
_ESCAPES = {
    "\0": "\\0",
    "\x07": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\x0b": "\\v",
    "\x0c": "\\f",
    "\r": "\\r",
    "\x1b": "\\e",
    '"': '\\"',
    "\\": "\\\\",
    "\x85": "\\N",
    "\xa0": "\\_",
    "\u2028": "\\L",
    "\u2029": "\\P",
}
#: Longest key YAML accepts in the implicit `key: value` form (the spec limit is 1024).
MAX_PLAIN_KEY = 1000


#: Whole numbers up to this many bits (about 4,200 digits) print: Python refuses beyond 4,300
#: digits (sys.int_info.default_max_str_digits).
_MAX_INT_BITS = 14_000
_SURROGATE = re.compile("[\ud800-\udfff]")


def problem(value: Any) -> tuple[str, str] | None:
    """(what, what to do) when a plain value cannot be written as YAML that reads back exactly
    (checked before a story is written, so nothing is half-written); None when it can."""
    kind = type(value)
    if kind is str:
        surrogate = _SURROGATE.search(value)
        if surrogate is None:
            return None
        return (
            f"the text holds U+{ord(surrogate.group()):04X}, half of a UTF-16 surrogate pair, "
            "which is not a character and cannot be stored in a UTF-8 file",
            "decode the text properly (e.g. errors='replace'), or remove that character",
        )
    if kind is int and value.bit_length() > _MAX_INT_BITS:
        return ("a whole number with more than 4,200 digits", "store it as text")
    if kind is dt.datetime:
        offset = value.utcoffset()
        if offset is not None and offset % dt.timedelta(minutes=1):
            return (
                "a timestamp whose UTC offset is not whole minutes (YAML cannot write it)",
                "round the offset to minutes, or store the time in UTC",
            )
        return None
    if kind is list:
        return next((p for p in map(problem, value) if p is not None), None)
    if kind is dict:
        for k, v in value.items():
            found = problem(k) or problem(v)
            if found is not None:
                return found
            if not isinstance(k, dict | list) and len(scalar(k)) > MAX_PLAIN_KEY:
                return (
                    f"a key is {len(scalar(k))} characters long as YAML; a key holds at most "
                    f"{MAX_PLAIN_KEY}",
                    "use a short key and put the long text in the value",
                )
    return None


def plain_ok(text: str, *, flow: bool = False) -> bool:
    """True when `text` can be written without quotes and reads back as this same text."""
    if not text or not text.isprintable() or text != text.strip(" "):
        return False
    if text[0] in _INDICATOR_START or text.startswith("..."):  # "---" starts with "-"
        return False
    if ": " in text or " #" in text or text.endswith(":"):
        return False
    if flow and not _FLOW_CHARS.isdisjoint(text):
        return False
    if text in _YAML11_BOOLS:
        return False
    yaml11 = _YAML11.resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return yaml11 == "tag:yaml.org,2002:str" and resolves_to_text(text)


def quote(text: str) -> str:
    """Single-quoted when every character is printable, else double-quoted with escapes."""
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    return '"' + "".join(_escape(char) for char in text) + '"'


def _escape(char: str) -> str:
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    if char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def scalar(value: Any, *, flow: bool = False) -> str:
    """YAML text of one scalar value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, str):
        text = str(value)
        return text if plain_ok(text, flow=flow) else quote(text)
    raise UnrenderableError(f"cannot write a {type(value).__name__} value")


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    return repr(value)  # always holds "." or "e" (1.0, 1e+20), so YAML reads a float back


def key(value: Any) -> str:
    """YAML text of a mapping key in block style."""
    if isinstance(value, dict | list):
        raise UnrenderableError("complex keys need a full re-dump")
    text = scalar(value)
    if len(text) > MAX_PLAIN_KEY:
        raise UnrenderableError("key too long for the `key: value` form")
    return text


def inline(value: Any) -> str | None:
    """One-line text of a value, or None when it needs block lines."""
    if isinstance(value, dict):
        return "{}" if not value else None
    if isinstance(value, list):
        return "[]" if not value else None
    return scalar(value)


def flow(value: Any) -> str | None:
    """`[a, b]` / `{a: 1}` text when every item is a scalar, else None."""
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return "[" + ", ".join(scalar(v, flow=True) for v in value) + "]"
    if isinstance(value, dict) and all(
        not isinstance(k, dict | list) and not isinstance(v, dict | list) for k, v in value.items()
    ):
        keys = [scalar(k, flow=True) for k in value]
        if any(len(k) > MAX_PLAIN_KEY for k in keys):
            return None
        pairs = (f"{k}: {scalar(v, flow=True)}" for k, v in zip(keys, value.values(), strict=True))
        return "{" + ", ".join(pairs) + "}"
    return None


def block(value: dict[Any, Any] | list[Any], indent: int) -> list[str]:
    """Block-style lines (no line endings) of a non-empty mapping or list at `indent`."""
    if isinstance(value, dict):
        return _block_map(value, indent)
    return _block_seq(value, indent)


def _block_map(mapping: dict[Any, Any], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for k, v in mapping.items():
        text = inline(v)
        if text is not None:
            lines.append(f"{pad}{key(k)}: {text}")
        else:
            lines.append(f"{pad}{key(k)}:")
            lines += block(v, indent + 2)
    return lines


def _block_seq(items: list[Any], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for item in items:
        text = inline(item)
        if text is not None:
            lines.append(f"{pad}- {text}")
            continue
        nested = block(item, indent + 2)
        nested[0] = f"{pad}- {nested[0][indent + 2 :]}"
        lines += nested
    return lines
