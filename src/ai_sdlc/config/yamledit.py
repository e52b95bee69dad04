"""Config values as YAML text: the edit of one key goes through the store's splicer
(`store.splice.set_path`, the one YAML writer), and a value in a message is written the way
the splicer writes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_sdlc.config.effective import _plain
from ai_sdlc.config.files import _yaml


def edited_text(
    text: str, parts: list[str], value: Any, *, live: Any = None, where: str = ""
) -> str:
    """`text` with `value` at the key path `parts`, every other line kept as it was; checked
    by loading it back (store.splice raises SpliceError when nothing faithful can be written)."""
    from ai_sdlc.errors import InvalidInputError
    from ai_sdlc.store import splice

    try:
        return splice.set_path(text, parts, value, read=_read, live=live, where=where)
    except splice.SpliceError as exc:
        raise InvalidInputError(
            f"{exc}; nothing was written", hint="edit the file by hand, or simplify its layout"
        ) from None


def _read(text: str) -> Any:
    """Plain values of a config text, read as `load_config` reads the file: libyaml's fast
    loader, ruamel's round trip where only it can tell. An edit reads the text before and
    after it; the pure-Python loader made those two reads half the cost of `ai-sdlc config
    KEY VALUE` (about 20 ms of 40)."""
    from ai_sdlc.store.fastload import NotFast, load

    try:
        return load(text)
    except NotFast:
        return _plain(_yaml().load(text))


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
