"""Loading the layers: defaults ⊕ the user's file ⊕ the project's file ⊕ AI_SDLC_* variables.

Both files get the same checks; neither may hold a secret (keys come from the environment), and
neither the user's file nor the environment may loosen a guardrail.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ai_sdlc.config.effective import (
    Config,
    _deep_merge,
    _get_path,
    _merge_over_user,
    _plain,
    _set_path,
    defaults,
)
from ai_sdlc.config.files import (
    CONFIG_RELPATH,
    _fast_document,
    _line_of,
    _load_document,
    user_config_path,
)
from ai_sdlc.config.keys import ENV_PREFIX, GUARDRAILS
from ai_sdlc.config.secrets import _refuse_secret_keys
from ai_sdlc.config.validate import validate
from ai_sdlc.config.yamledit import _render
from ai_sdlc.errors import InvalidInputError


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """`AI_SDLC_PROVIDER`, `AI_SDLC_MODEL`, and `AI_SDLC_<SECTION>__<KEY>=<yaml scalar>`."""
    out: dict[str, Any] = {}
    if environ.get("AI_SDLC_PROVIDER"):
        _set_path(out, ["ai", "provider"], environ["AI_SDLC_PROVIDER"])
    if environ.get("AI_SDLC_MODEL"):
        _set_path(out, ["ai", "model"], environ["AI_SDLC_MODEL"])
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if len(parts) >= 2:
            _set_path(out, parts, parse_scalar(raw))
    return out


def _env_names(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted key → the AI_SDLC_* variable that sets it (as `_env_overrides` reads them)."""
    names = {
        ".".join(p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p): name
        for name in environ
        if name.startswith(ENV_PREFIX) and "__" in name
    }
    for name, dotted in (("AI_SDLC_PROVIDER", "ai.provider"), ("AI_SDLC_MODEL", "ai.model")):
        if environ.get(name):
            names[dotted] = name
    return names


def _looser(dotted: str, project: Any, wanted: Any) -> bool:
    """True when `wanted` would make the guardrail `dotted` less strict than `project`."""
    if isinstance(wanted, list) or isinstance(project, list):
        return _widened(dotted, project, wanted)
    if dotted.startswith(("gates.", "sandbox.")):
        return bool(project) and not wanted
    if wanted is None:  # no limit at all
        return project is not None
    return project is not None and wanted > project


def _widened(dotted: str, project: Any, wanted: Any) -> bool:
    """One rule for every list-valued guardrail. An allow-list (`sandbox.writable`,
    `sandbox.network`, `sandbox.pass_env`, `pr.trusted_bots`) is widened by an entry the
    project's list lacks; a deny-list (a key named `deny_*`: `sandbox.deny_read`) by leaving
    out an entry the project's list has. Order and repeats do not matter; fewer allowed (or
    more denied) narrows, which is always taken."""
    same = _bots if dotted == "pr.trusted_bots" else _items
    have, want = same(project), same(wanted)
    if dotted.rsplit(".", 1)[-1].startswith("deny"):
        return bool(have - want)
    return bool(want - have)


def _items(value: Any) -> set[str]:
    """A list guardrail's entries as compared (text as written)."""
    return {str(x) for x in value} if isinstance(value, list) else set()


def _bots(value: Any) -> set[str]:
    """Bot logins as trust compares them (`coderabbitai` and `coderabbitai[bot]` are one)."""
    items = value if isinstance(value, list) else []
    return {str(b).strip().lower().removesuffix("[bot]") for b in items}


def _shown(value: Any) -> str:
    """A guardrail's value in a message: null, a list as JSON (paths keep their case), else
    lower-cased (booleans read as YAML)."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return json.dumps(value)
    return str(value).lower()


def _loosened(layer: Mapping[str, Any], base: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """(key, base value, layer value) of every guardrail `layer` sets looser than `base`."""
    for dotted in GUARDRAILS:
        parts = dotted.split(".")
        try:
            wanted = _get_path(layer, parts)
        except KeyError:
            continue
        current = _get_path(base, parts)
        if _looser(dotted, current, wanted):
            yield dotted, current, wanted


def _refuse_looser_guardrails(
    env: Mapping[str, Any],
    project: Mapping[str, Any],
    environ: Mapping[str, str],
    origin: Callable[[str], str],
) -> None:
    """An environment variable may tighten a guardrail, never loosen it (InvalidInputError)."""
    names = {
        ".".join(p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p): name
        for name in environ
        if name.startswith(ENV_PREFIX) and "__" in name
    }
    for dotted, current, _wanted in _loosened(env, project):
        name = names.get(dotted, ENV_PREFIX + dotted.upper().replace(".", "__"))
        shown = _shown(current)
        raise InvalidInputError(
            f"{name}={environ.get(name, '')} would loosen the guardrail {dotted} (the project's "
            f"value is {shown}, from {origin(dotted)}); the "
            "environment may only make a guardrail stricter",
            hint=f"unset {name}, or change the project's value where it is reviewed: "
            f"`ai-sdlc config {dotted} <value>` (writes {CONFIG_RELPATH})",
        )


def parse_scalar(raw: str) -> Any:
    """A value typed on the command line or in the environment, read as YAML 1.2 the way the
    config file itself is read (`010` is 10, `yes` is text); text that is not YAML stays as is."""
    from ai_sdlc.store import fastload

    try:
        value = fastload.load(raw)
    except fastload.NotFast:
        from ruamel.yaml import YAML

        try:
            value = YAML(typ="safe", pure=True).load(raw)
        except Exception:  # any ruamel complaint: not YAML, so the text as typed
            return raw
    return value if value is not None or raw.strip() in ("null", "~", "") else raw


def _load_layer(path: Path) -> dict[str, Any]:
    """One config file as plain data, checked (secrets, schema) with file:line on any error;
    {} when there is no such file."""
    file_data = _fast_document(path)
    if isinstance(file_data, Mapping):
        try:
            _refuse_secret_keys(file_data, path=path)
            validate(file_data, path=path)
            plain: dict[str, Any] = _plain(file_data)
            return plain
        except InvalidInputError:
            pass  # the slow path below reports it with its line
    doc = _load_document(path)
    data: dict[str, Any] = _plain(doc) if doc else {}
    _refuse_secret_keys(data, path=path, doc=doc)
    validate(data, path=path, doc=doc)
    return data


def _refuse_user_loosening(user: Mapping[str, Any], project: Mapping[str, Any], path: Path) -> None:
    """The user's file may not hold a guardrail looser than the project's value (its own, or
    the default): a setting on one machine must not switch a reviewed guardrail off."""
    base = defaults()
    _deep_merge(base, project)
    for dotted, current, wanted in _loosened(user, base):
        shown = _shown(current)
        raise InvalidInputError(
            f"{dotted}: {_render(wanted)} would loosen a guardrail (this project's value is "
            f"{shown}); the user config may only make a guardrail stricter",
            path=str(path),
            line=_line_of(_load_document(path), dotted.split(".")),
            hint=f"remove it from {path}, or set it in the project where it is reviewed: "
            f"`ai-sdlc config {dotted} <value>` (writes {CONFIG_RELPATH})",
        )


def load_config(root: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """defaults ⊕ user file ⊕ project file ⊕ environment, each checked."""
    environ = os.environ if environ is None else environ
    path = root / CONFIG_RELPATH
    user_path = user_config_path(environ)
    user_data = _load_layer(user_path)
    project_data = _load_layer(path)
    if user_data:
        _refuse_user_loosening(user_data, project_data, user_path)
    data = defaults()
    _deep_merge(data, user_data)
    _merge_over_user(data, project_data)
    env = _env_overrides(environ)
    layers = (("env", env), (f"project:{path}", project_data), (f"user:{user_path}", user_data))

    def origin(dotted: str) -> str:
        for source, layer in layers[1:]:
            with contextlib.suppress(KeyError):
                _get_path(layer, dotted.split("."))
                return source.partition(":")[2]
        return "the defaults"

    if env:
        validate(env, path=Path("<environment>"))
        _refuse_looser_guardrails(env, data, environ, origin)
        _deep_merge(data, env)
    return Config(
        data=data, path=path, user_path=user_path, layers=layers, env_names=_env_names(environ)
    )


def file_settings(root: Path, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """defaults ⊕ user file ⊕ project file, without the environment: what the files say (the
    guardrail record of `configguard` is kept against it)."""
    environ = os.environ if environ is None else environ
    data = defaults()
    _deep_merge(data, _load_layer(user_config_path(environ)))
    _merge_over_user(data, _load_layer(root / CONFIG_RELPATH))
    return data
