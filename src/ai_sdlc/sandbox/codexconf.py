"""The private Codex `config.toml`: the user's, with Codex's own retries turned off.

Codex retries a refused request (`request_max_retries`, 4 by default) and a dropped stream
(`stream_max_retries`) by itself and `exec --json` never says so: three injected faults were
counted as one `api_retry`. Setting both to 0 on every `[model_providers.X]` hands each fault
back to ai-sdlc, whose `llm` policy retries and counts it. The user's own file is never
changed: this text is written into the agents' private `CODEX_HOME` (`homes`). Codex's built-in
`openai` provider cannot be changed from its config (Codex refuses such a file), so a user on
it keeps Codex's retries (`command_presets.codex_retry_note` says so).

No TOML writer ships with Python: `dumps` writes the subset `tomllib` reads back (tables,
arrays of tables, strings, numbers, booleans, dates, arrays, inline tables), checked by
parsing its own output.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The settings written on every model provider of the private config.
NO_RETRIES: dict[str, int] = {"request_max_retries": 0, "stream_max_retries": 0}
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def private_codex_config(user_config: Path) -> str:
    """The text of the private config.toml built from the user's (none, or unreadable: an
    empty one plus nothing; Codex then uses its built-in provider)."""
    try:
        data: dict[str, Any] = tomllib.loads(user_config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        data = {}
    try:
        return dumps(without_retries(data))
    except ValueError:  # a value this writer cannot say: keep what choosing a provider needs
        keep = ("model", "model_provider", "model_providers")
        try:
            return dumps(without_retries({k: v for k, v in data.items() if k in keep}))
        except ValueError:
            return ""


def without_retries(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a Codex config with NO_RETRIES on every entry of `model_providers`."""
    out = dict(data)
    providers = data.get("model_providers")
    if isinstance(providers, Mapping):
        out["model_providers"] = {
            name: {**info, **NO_RETRIES} if isinstance(info, Mapping) else info
            for name, info in providers.items()
        }
    return out


def dumps(data: Mapping[str, Any]) -> str:
    """TOML text that `tomllib.loads` turns back into `data`."""
    lines: list[str] = []
    _table(data, (), lines)
    text = "\n".join(lines) + ("\n" if lines else "")
    if tomllib.loads(text) != data:  # a value this writer cannot say: refuse, never guess
        raise ValueError("codex config does not round-trip")
    return text


def _table(data: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    tables: list[tuple[str, Mapping[str, Any]]] = []
    arrays: list[tuple[str, list[Mapping[str, Any]]]] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            arrays.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables:
        sub = (*path, key)
        lines.extend(["", "[" + ".".join(_key(k) for k in sub) + "]"])
        _table(value, sub, lines)
    for key, items in arrays:
        sub = (*path, key)
        for item in items:
            lines.extend(["", "[[" + ".".join(_key(k) for k in sub) + "]]"])
            _table(item, sub, lines)


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are all valid in a TOML basic string
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"not a TOML value: {type(value).__name__}")
