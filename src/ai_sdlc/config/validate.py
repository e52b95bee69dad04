"""Checking a config layer against the models, with the file, the line, the key and what to do.

Every key of `SCHEMA` is checked by its model's type (and named extra check); a key the models
do not have is an error with a did-you-mean; `resilience` is checked by its own model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from ai_sdlc.config.files import _line_of
from ai_sdlc.config.keys import NULLABLE_SECTIONS, OPEN_SECTIONS, SCHEMA, SECTIONS
from ai_sdlc.errors import InvalidInputError

_TOP = tuple(dict.fromkeys([*(s for s in SECTIONS if "." not in s), *OPEN_SECTIONS]))


def validate(data: Mapping[str, Any], *, path: Path, doc: Any = None) -> None:
    """Check every key; unknown keys in known sections are errors with a suggestion."""

    def fail(dotted: str, message: str, hint: str | None = None) -> NoReturn:
        raise InvalidInputError(
            f"{dotted}: {message}",
            path=str(path),
            line=_line_of(doc, dotted.split(".")) if doc is not None else None,
            hint=hint,
        )

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            setting = SCHEMA.get(dotted)
            if setting is not None:
                if not setting.check(value):
                    fail(
                        dotted,
                        f"must be {setting.expected}, got {shown_value(value)}",
                        type_hint(dotted),
                    )
            elif not prefix and key not in _TOP:
                fail(dotted, "unknown section", suggest(str(key), list(_TOP)))
            elif dotted in OPEN_SECTIONS:
                continue
            elif dotted in SECTIONS:
                if value is None and dotted in NULLABLE_SECTIONS:
                    continue
                if not isinstance(value, Mapping):
                    fail(dotted, "must be a mapping of settings")
                walk(value, dotted + ".")
            else:
                siblings = [
                    k[len(prefix) :].split(".")[0]
                    for k in (*SCHEMA, *SECTIONS)
                    if k.startswith(prefix)
                ]
                fail(dotted, "unknown setting", suggest(str(key), list(dict.fromkeys(siblings))))

    walk(data, "")
    resilience = data.get("resilience")
    if resilience:
        _validate_resilience(resilience, path=path, doc=doc)


def _validate_resilience(section: Any, *, path: Path, doc: Any) -> None:
    """`resilience.*`: checked by its model; errors reported with file and line."""
    from ai_sdlc.config.resilience import check_section

    try:
        check_section(section)
    except InvalidInputError as exc:
        match = re.search(r"resilience(?:\.[\w-]+)+", exc.message)
        line = None
        if match and doc is not None:
            line = _line_of(doc, match.group(0).split("."))
        raise InvalidInputError(exc.message, path=str(path), line=line, hint=exc.hint) from None


def type_hint(dotted: str) -> str:
    """What to write instead: the key's default, as a command (the message already says what
    the value must be, in words; the Python type is no help)."""
    setting = SCHEMA[dotted]
    from ai_sdlc.config.yamledit import _render

    default = _render(setting.default)
    return f"its default is {default}: `ai-sdlc config {dotted} {default}`"


def shown_value(value: Any) -> str:
    """repr(value) with any credential in it masked."""
    from ai_sdlc.secrets import mask_urls, redact

    return redact(mask_urls(repr(value)))


def suggest(word: str, choices: list[str]) -> str | None:
    import difflib  # only for a misspelt key

    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean '{close[0]}'?" if close else None
