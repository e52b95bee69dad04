"""Config files never hold a secret: keys whose name says credential are refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ai_sdlc.config.files import _line_of
from ai_sdlc.errors import InvalidInputError

#: A key whose name says it holds a secret; such keys are refused in config files.
SECRET_KEY = re.compile(r"key|token|secret|passw(?:or)?d|credential", re.IGNORECASE)
#: Names that match SECRET_KEY but hold none: token counts, and `*_env` (the *name* of the
#: environment variable that holds a key).
_NOT_SECRET = frozenset({"max_output_tokens", "story_tokens"})


def names_secret(dotted: str) -> bool:
    """True when a part of the dotted key names a credential (`ai.openai.api_key`)."""
    return any(
        SECRET_KEY.search(part) and part not in _NOT_SECRET and not part.endswith("_env")
        for part in dotted.split(".")
    )


def _secret_env_hint(dotted: str) -> str:
    if ".anthropic." in f".{dotted}.":
        variable = "ANTHROPIC_API_KEY"
    elif ".openai." in f".{dotted}.":
        variable = "OPENAI_API_KEY"
    else:
        return "put it in an environment variable (e.g. OPENAI_API_KEY), never in a config file"
    return (
        f"remove it and export {variable}=... instead (ai.<provider>.api_key_env names another "
        "variable); keys are read only from the environment"
    )


def _refuse_secret_keys(data: Mapping[str, Any], *, path: Path, doc: Any = None) -> None:
    """A config file never holds a secret: refuse any key that names one (value not shown)."""

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if names_secret(str(key)):
                raise InvalidInputError(
                    f"{dotted}: secrets do not belong in a config file (value not shown)",
                    path=str(path),
                    line=_line_of(doc, dotted.split(".")) if doc is not None else None,
                    hint=_secret_env_hint(dotted),
                )
            if isinstance(value, Mapping):
                walk(value, dotted + ".")

    walk(data, "")


def mask_setting(dotted: str, value: Any) -> Any:
    """`value` fit to print: a secret-named key shows as ***, URLs lose their credentials,
    token shapes and the environment's secret values are masked."""
    from ai_sdlc.secrets import MASK, mask_urls, redact

    if names_secret(dotted) and value not in (None, ""):
        return MASK
    if isinstance(value, Mapping):
        return {str(k): mask_setting(f"{dotted}.{k}", v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_setting(dotted, v) for v in value]
    if isinstance(value, str):
        return redact(mask_urls(value))
    return value
