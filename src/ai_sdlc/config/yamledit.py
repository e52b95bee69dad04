"""Line-exact edits of a config file: only the lines of the key set change; a layout that does
not allow that (flow mappings, anchors...) is re-dumped whole, keeping comments."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from ai_sdlc.config.effective import _plain
from ai_sdlc.config.files import _yaml


def _edited_text(text: str, parts: list[str], value: Any, expected: Any) -> str:
    """`text` with only the lines of `parts` changed to hold `value`; when the file's shape
    does not allow that (flow mappings, anchors...), a full re-dump that keeps comments and
    writes null as `null`. Either result is re-read and must equal `expected`."""
    try:
        spliced = _splice(text, parts, value)
    except Exception:  # an odd layout: fall back to the full dump below
        spliced = None
    if spliced is not None and _same_settings(spliced, expected):
        return spliced
    yaml = _yaml()
    yaml.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    doc = yaml.load(text) or {}
    node = doc
    for part in parts[:-1]:
        if not isinstance(node.get(part), Mapping):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()


def _same_settings(text: str, expected: Any) -> bool:
    import json

    try:
        got = _plain(_yaml().load(text))
    except Exception:
        return False
    return json.dumps(got, sort_keys=True, default=repr) == json.dumps(
        expected, sort_keys=True, default=repr
    )


def _splice(text: str, parts: list[str], value: Any) -> str | None:
    """Replace (or insert) one setting's value in place; None when it cannot be done exactly."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    newline = "\r\n" if "\r\n" in text else "\n"
    root = _yaml().compose(text) if text.strip() else None
    rendered = _render(value)
    if root is None:
        return (
            text
            + ("" if not text or text.endswith("\n") else newline)
            + _lines(parts, rendered, 0, newline)
        )
    node = root
    for depth, part in enumerate(parts):
        if not isinstance(node, MappingNode) or node.flow_style or node.anchor:
            return None
        found = next(
            ((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == part),
            None,
        )
        if found is None:
            return _insert(text, node, parts[depth:], rendered, newline)
        key, child = found
        if depth < len(parts) - 1:
            node = child
            continue
        if getattr(child, "anchor", None) or child.tag.startswith("!"):
            return None
        if isinstance(child, ScalarNode) and child.value == "" and not child.style:
            colon = text.index(":", key.end_mark.index)  # `key:` with no value written
            return text[: colon + 1] + " " + rendered + text[colon + 1 :]
        start, end = child.start_mark.index, child.end_mark.index
        if isinstance(child, ScalarNode):
            return text[:start] + rendered + _keep_comment_column(text[end:], end - start, rendered)
        # A block list or mapping: the new value goes inline after the key.
        colon = text.index(":", key.end_mark.index)
        line_end = _end_of_line(text, end if text[end - 1 : end] != "\n" else end - 1)
        return text[: colon + 1] + " " + rendered + newline + text[line_end:]
    return None


def _keep_comment_column(rest: str, old_width: int, rendered: str) -> str:
    """`rest` (what follows the replaced value) with the spaces before a trailing comment
    adjusted so that the comment stays in its column where possible."""
    spaces = len(rest) - len(rest.lstrip(" "))
    if not rest[spaces:].startswith("#") or spaces == 0:
        return rest
    wanted = max(1, spaces + old_width - len(rendered))
    return " " * wanted + rest[spaces:]


def _insert(text: str, mapping: Any, parts: list[str], rendered: str, newline: str) -> str | None:
    if not mapping.value:
        return None
    last_value = mapping.value[-1][1]
    indent = mapping.value[0][0].start_mark.column
    end = last_value.end_mark
    at = end.index if end.column == 0 else _end_of_line(text, end.index)
    prefix = "" if at == 0 or text[at - 1] == "\n" else newline
    return text[:at] + prefix + _lines(parts, rendered, indent, newline) + text[at:]


def _end_of_line(text: str, index: int) -> int:
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _lines(parts: list[str], rendered: str, indent: int, newline: str) -> str:
    lines = [" " * (indent + 2 * i) + f"{part}:" for i, part in enumerate(parts[:-1])]
    lines.append(" " * (indent + 2 * (len(parts) - 1)) + f"{parts[-1]}: {rendered}")
    return newline.join(lines) + newline


def _render(value: Any) -> str:
    """One flow value, written by the story store's renderer (`store.render`: plain where YAML
    1.2 and 1.1 both read it back as written, quoted otherwise). A nested value with no flow
    form (a list of mappings) is written as JSON, which YAML reads as flow."""
    import json

    from ai_sdlc.store import render

    try:
        nested = isinstance(value, list | Mapping) and bool(value)
        text = (
            render.flow(dict(value) if isinstance(value, Mapping) else value)
            if nested
            else (render.inline(value))
        )
    except render.UnrenderableError:
        text = None
    return text if text is not None else json.dumps(value, ensure_ascii=False, default=str)
