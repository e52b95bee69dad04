"""Fast frontmatter loader: libyaml's C parser with ruamel's YAML 1.2 value rules.

ruamel's round-trip loader is the reference but is pure Python (10-25x slower than libyaml), too
slow to list thousands of stories. This loader parses with PyYAML's C parser and resolves plain
scalars with the same first-character table and patterns ruamel uses for YAML 1.2 (`yes` is
text, `0777` is 777, duplicate keys are errors, dates as ruamel builds them). Whenever it meets
something it does not reproduce exactly (explicit tags, merge keys, underscores or non-decimal
integers, anything unparsable) it raises `NotFast` and the caller uses ruamel instead, which also
produces the precise error message for broken files. The value rules live in `yaml12`, shared
with the pure-Python `linescan`, which is tried first for the common simple files.
"""

from __future__ import annotations

import re
from typing import Any

from yaml import Node, ScalarNode, SequenceNode
from yaml._yaml import CParser
from yaml.resolver import BaseResolver

from ai_sdlc.store.yaml12 import (
    MAP,
    SEQ,
    STR,
    NotFast,
    construct,
    resolve_plain,
    resolves_to_text,
)

__all__ = ["NotFast", "load", "load_with_node", "resolve_plain", "resolves_to_text"]


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
        raise NotFast("syntax the two parsers read differently")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except Exception as exc:  # any libyaml complaint: ruamel will word it precisely
        raise NotFast(str(exc)) from None
    finally:
        loader.dispose()
    if node is None:
        return None, None
    try:
        return _build(node), node
    except RecursionError:
        raise NotFast("recursive alias") from None


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
                raise NotFast("complex key")
            if key in result:
                raise NotFast("duplicate key")
            result[key] = _build(value_node)
        return result
    if tag == SEQ:
        return [_build(item) for item in node.value]
    if isinstance(node, ScalarNode):
        return construct(tag, node.value)
    raise NotFast(f"tag {tag}")
