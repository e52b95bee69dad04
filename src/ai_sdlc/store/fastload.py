"""Fast frontmatter loader: libyaml's C parser with ruamel's YAML 1.2 value rules.

ruamel's round-trip loader is the reference but is pure Python (10-25x slower than libyaml), too
slow to list thousands of stories. This loader parses with PyYAML's C parser and resolves plain
scalars with the same first-character table and patterns ruamel uses for YAML 1.2 (`yes` is
text, `0777` is 777, duplicate keys are errors, dates as ruamel builds them). Whenever it meets
something it does not reproduce exactly (explicit tags, merge keys, underscores or non-decimal
integers, anything unparsable) it raises `NotFast` and the caller uses ruamel instead, which
also produces the precise error message for broken files.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from yaml import Node, ScalarNode, SequenceNode
from yaml._yaml import CParser
from yaml.resolver import BaseResolver


class NotFast(Exception):
    """This frontmatter needs the round-trip loader. It carries no message: every caller
    catches it and loads with ruamel, so the reason is a comment at each raise."""


# Internal tags: they contain a space, so no tag written in a file can be mistaken for them.
STR = "fast str"
NULL = "fast null"
BOOL = "fast bool"
INT = "fast int"
FLOAT = "fast float"
TIMESTAMP = "fast timestamp"
UNSURE = "fast unsure"
SEQ = "fast seq"
MAP = "fast map"

# ruamel's YAML 1.2 implicit resolvers (ruamel/yaml/resolver.py), tried in this order per first
# character. Values matched as int/float forms we do not construct ourselves become UNSURE.
# Compiled on first use: most files hold only words and whole numbers (see `resolve_plain`).
_BOOL = r"^(?:true|True|TRUE|false|False|FALSE)$"
_FLOAT = r"""^(?:
     [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$"""
_INT = r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0o?[0-7_]+
    |[-+]?[0-9_]+
    |[-+]?0x[0-9a-fA-F_]+)$"""
_MERGE = r"^(?:<<)$"
_NULL = r"^(?:~|null|Null|NULL|)$"
_TIMESTAMP = r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
    (?:[Tt]|[ \t]+)[0-9][0-9]?
    :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"""
_VALUE = r"^(?:=)$"

_TABLE: dict[str, list[tuple[str, str]]] = {}


def _add(tag: str, pattern: str, first: str | list[str]) -> None:
    for char in first:
        _TABLE.setdefault(char, []).append((tag, pattern))


_add(BOOL, _BOOL, "tTfF")
_add(FLOAT, _FLOAT, "-+0123456789.")
_add(INT, _INT, "-+0123456789")
_add(UNSURE, _MERGE, "<")
_add(NULL, _NULL, ["~", "n", "N", ""])
_add(TIMESTAMP, _TIMESTAMP, "0123456789")
_add(UNSURE, _VALUE, "=")

#: The values the BOOL and NULL patterns match, for a lookup without a regex.
_WORDS = {"true": BOOL, "True": BOOL, "TRUE": BOOL, "false": BOOL, "False": BOOL, "FALSE": BOOL}
_WORDS.update({"~": NULL, "null": NULL, "Null": NULL, "NULL": NULL, "": NULL})
_WORD_FIRST = frozenset("tTfF~nN")


_DECIMAL = r"[-+]?[0-9]+\Z"
_TS_PARTS = r"""^(?P<year>[0-9][0-9][0-9][0-9])
       -(?P<month>[0-9][0-9]?)
       -(?P<day>[0-9][0-9]?)
       (?:((?P<t>[Tt])|[ \t]+)
       (?P<hour>[0-9][0-9]?)
       :(?P<minute>[0-9][0-9])
       :(?P<second>[0-9][0-9])
       (?:\.(?P<fraction>[0-9]*))?
        (?:[ \t]*(?P<tz>Z|(?P<tz_sign>[-+])(?P<tz_hour>[0-9][0-9]?)
       (?::(?P<tz_minute>[0-9][0-9]))?))?)?$"""
_SPECIAL_FLOATS = {
    ".inf": float("inf"),
    ".nan": float("nan"),
}


def resolve_plain(value: str) -> str:
    """Internal tag for an untagged plain scalar, by ruamel's YAML 1.2 rules."""
    first = value[:1]
    patterns = _TABLE.get(first)
    if patterns is None:
        return STR
    if not value.endswith("\n"):  # `$` also matches before a final newline: the patterns decide
        if first in _WORD_FIRST:  # only the BOOL or NULL pattern applies: exactly these words
            return _WORDS.get(value, STR)
        if value.isdigit() and value.isascii():  # no `.`/`e`: not FLOAT; INT's `[0-9_]+`
            return INT
    for tag, pattern in patterns:
        if re.match(pattern, value, re.X):
            return tag
    return STR


def resolves_to_text(value: str) -> bool:
    """True when `value` written unquoted would load back as this same text."""
    return resolve_plain(value) == STR


def plain_value(text: str) -> Any:
    """The value of an untagged plain scalar (NotFast when only ruamel can build it)."""
    return construct(resolve_plain(text), text)


def construct(tag: str, text: str) -> Any:
    """The value of a scalar with internal tag `tag` (NotFast for forms built only by ruamel)."""
    if tag == STR:
        return text
    if tag == NULL:
        return None
    if tag == BOOL:
        return text[0] in "tT"
    if tag == INT:
        if (text.isdigit() and text.isascii()) or re.match(_DECIMAL, text, re.X):
            return int(text)
        raise NotFast  # integer form
    if tag == FLOAT:
        return _float(text)
    if tag == TIMESTAMP:
        return _timestamp(text)
    raise NotFast  # a tag only ruamel builds


def _float(text: str) -> float:
    if "_" in text:
        raise NotFast  # float with underscores
    lowered = text.lower()
    sign = -1.0 if lowered.startswith("-") else 1.0
    special = _SPECIAL_FLOATS.get(lowered.lstrip("+-"))
    if special is not None:
        return sign * special
    return float(text)


def _timestamp(text: str) -> dt.date | dt.datetime:
    """The value ruamel's `create_timestamp` builds (rounding quirks included)."""
    parts = re.match(_TS_PARTS, text, re.X)
    if parts is None:
        raise NotFast  # timestamp form
    g = parts.groupdict()
    try:
        if g["hour"] is None:
            return dt.date(int(g["year"]), int(g["month"]), int(g["day"]))
        fraction = g["fraction"] or ""
        micro = int((fraction[:6]).ljust(6, "0")) if fraction else 0
        if len(fraction) > 6 and int(fraction[6]) > 4:
            micro += 1
        carry = micro > 999_999
        tzinfo: dt.tzinfo | None = None
        if g["tz_sign"]:
            offset = dt.timedelta(hours=int(g["tz_hour"]), minutes=int(g["tz_minute"] or 0))
            tzinfo = dt.timezone(-offset if g["tz_sign"] == "-" else offset, name=g["tz"])
        elif g["tz"] == "Z":
            tzinfo = dt.timezone(dt.timedelta(0), name="Z")
        value = dt.datetime(
            int(g["year"]),
            int(g["month"]),
            int(g["day"]),
            int(g["hour"]),
            int(g["minute"]),
            int(g["second"]),
            0 if carry else micro,
            tzinfo,
        )
    except ValueError:  # e.g. month 13: ruamel reports it
        raise NotFast from None
    return value + dt.timedelta(seconds=1) if carry else value


class _Resolver(BaseResolver):
    def resolve(self, kind: type[Node], value: str | None, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            return resolve_plain(value or "") if implicit[0] else STR
        return SEQ if kind is SequenceNode else MAP


class _Loader(CParser, _Resolver):
    def __init__(self, text: str) -> None:
        CParser.__init__(self, text)
        _Resolver.__init__(self)


def load(text: str) -> Any:
    """Plain value of a frontmatter text, or NotFast when only ruamel can tell."""
    return load_with_node(text)[0]


def load_with_node(text: str) -> tuple[Any, Node | None]:
    """`load`, also returning libyaml's node tree: its marks tell an edit where each key's
    lines are, so that one C parse serves both the values and the splice."""
    if "\t" in text or _RISKY.search(text):
        raise NotFast  # syntax the two parsers read differently
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except Exception:  # any libyaml complaint: ruamel will word it precisely
        raise NotFast from None
    finally:
        loader.dispose()
    if node is None:
        return None, None
    try:
        return _build(node), node
    except RecursionError:
        raise NotFast from None  # recursive alias


# Constructs where libyaml and ruamel disagree (found by fuzzing both): tabs, explicit `?` keys,
# anchor/alias/tag tokens (anchor names are lexed differently), and block scalar headers followed
# by anything but indicators (`|#x`). Only token starts count (line start, after `: `, `- `, `[`,
# `{`, `,`), so `**bold**` inside text does not trigger it. Files written by tools do not use
# these; a hand-made file that does simply takes the reference path.
_RISKY = re.compile(
    r"(?:^[ ]*|[:-][ ]+|[\[{,][ ]*)(?:[!?&*]|[|>][-+0-9]*[^\s\-+0-9])", re.MULTILINE
)


def _build(node: Node) -> Any:
    """Node tree -> plain values (an alias becomes an equal copy; a cyclic one overflows)."""
    tag = node.tag
    if tag == STR:
        return node.value
    if tag == MAP:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _build(key_node)
            if isinstance(key, dict | list):
                raise NotFast  # complex key
            if key in result:
                raise NotFast  # duplicate key
            result[key] = _build(value_node)
        return result
    if tag == SEQ:
        return [_build(item) for item in node.value]
    if isinstance(node, ScalarNode):
        return construct(tag, node.value)
    raise NotFast  # a tag only ruamel builds
