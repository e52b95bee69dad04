"""The effective configuration: defaults from the models, layers merged, and each key's source."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.config.fields import _builtin
from ai_sdlc.config.keys import SCHEMA
from ai_sdlc.config.secrets import mask_setting
from ai_sdlc.config.sections import Settings


def defaults() -> dict[str, Any]:
    """Every key's default from the models (keys whose owner applies its own default are
    left out, as is what `resilience` holds)."""
    data: dict[str, Any] = {}
    for dotted, setting in SCHEMA.items():
        if not setting.materialize:
            continue
        _set_path(data, dotted.split("."), copy.deepcopy(setting.default))
    data.setdefault("resilience", {})
    return data


def _set_path(data: dict[str, Any], parts: list[str], value: Any) -> None:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _get_path(data: Mapping[str, Any], parts: list[str]) -> Any:
    node: Any = data
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(".".join(parts))
        node = node[part]
    return node


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = _plain(value)


def _merge_over_user(base: dict[str, Any], project: Mapping[str, Any]) -> None:
    """The project's values over the user's, except that a `null` the project file leaves as
    written by `init` (no value chosen) does not erase a value the user chose."""
    for key, value in project.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge_over_user(base[key], value)
        elif value is not None or base.get(key) is None:
            base[key] = _plain(value)


def _leaves(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every non-mapping value (and of empty mappings), in order."""
    out: list[str] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(_leaves(value, dotted + "."))
        else:
            out.append(dotted)
    return out


def _plain(value: Any) -> Any:
    """ruamel containers → dicts/lists, so nothing downstream depends on ruamel."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Config(msgspec.Struct):
    """The effective configuration of one project."""

    data: dict[str, Any]
    path: Path
    #: The user's config file (it may not exist).
    user_path: Path | None = None
    #: (source, data) from the highest layer down: env, project, user (for `sources`).
    layers: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: Dotted key → the AI_SDLC_* variable that set it.
    env_names: dict[str, str] | None = None

    def sources(self) -> dict[str, str]:
        """Every effective dotted key → where its value comes from: `env:AI_SDLC_…`,
        `project:<path>`, `user:<path>` or `default`."""
        out: dict[str, str] = {}
        for dotted in _leaves(self.data):
            parts = dotted.split(".")
            out[dotted] = "default"
            effective = _get_path(self.data, parts)
            for source, layer in self.layers:
                try:
                    found = _get_path(layer, parts)
                except KeyError:
                    continue
                if found is None and effective is not None:
                    continue  # an unset (null) project value under a user's value
                if source == "env":
                    names = self.env_names or {}
                    name = next(
                        (n for d, n in names.items() if dotted == d or dotted.startswith(d + ".")),
                        "AI_SDLC_",
                    )
                    source = f"env:{name}"
                out[dotted] = source
                break
        return out

    def effective(self) -> dict[str, dict[str, Any]]:
        """Dotted key → {"value" (secrets masked), "source"}, for `config` and `doctor`."""
        sources = self.sources()
        return {
            dotted: {
                "value": mask_setting(dotted, _get_path(self.data, dotted.split("."))),
                "source": sources[dotted],
            }
            for dotted in sources
        }

    def get(self, dotted: str, default: Any = None) -> Any:
        try:
            return _get_path(self.data, dotted.split("."))
        except KeyError:
            return default

    def section(self, name: str) -> dict[str, Any]:
        value = self.data.get(name)
        return value if isinstance(value, dict) else {}

    def typed(self) -> Settings:
        """The effective settings as the typed models (every layer was checked against them
        when loaded): `config.typed().limits.global_recovery` is an int."""
        plain = {k: v for k, v in self.data.items() if k != "resilience"}
        return msgspec.convert(_builtin(plain), Settings)
