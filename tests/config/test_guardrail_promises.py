"""Every guardrail key, one by one (taken from the models' markers, so a new key cannot go
untested): changed in `.ai-sdlc/config.yaml` behind the tool's back, it is named by the accepted
record's check and refused until a person accepts it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.config.editing import get_value, set_value
from ai_sdlc.config.guard import ConfigChangedError, GuardrailRecord
from ai_sdlc.config.keys import GUARDED, SCHEMA
from tests.support.runs_support import make_project

#: A valid value other than the default, per type the guarded keys have.
OTHER: dict[str, Any] = {
    "bool": None,  # the default's opposite
    "int": 7,
    "float": 42.5,
    "float | null": 3.5,
    "int | null": 2,
    "str | null": "python -m pytest -q -x",
    "list[str]": ["extra/folder"],
    "list[str] | null": ["tests/"],
    "dict[str, float]": {"CPU": 2},
    "dict[str, str]": {"LANG": "C.UTF-8"},
}
#: Keys whose values have a shape of their own (a variable name, a step of the network rule).
BY_KEY: dict[str, Any] = {
    "sandbox.pass_env": ["GH_TOKEN"],
    "sandbox.network": ["setup", "verify"],
    "pr.trusted_bots": ["coderabbitai[bot]"],
}


def changed_value(dotted: str, current: Any = None) -> str:
    setting = SCHEMA[dotted]
    if setting.type_name == "bool":
        return json.dumps(not (setting.default if current is None else current))
    if dotted in BY_KEY:
        return json.dumps(BY_KEY[dotted])
    if setting.type_name not in OTHER:
        raise AssertionError(f"{dotted}: add a value for type {setting.type_name} to OTHER")
    return json.dumps(OTHER[setting.type_name])


def test_every_guarded_key_has_a_test_value() -> None:
    for dotted in GUARDED:
        changed_value(dotted)


@pytest.mark.parametrize("dotted", sorted(GUARDED))
def test_a_guarded_key_changed_behind_the_tools_back_is_refused(
    tmp_path: Path, dotted: str
) -> None:
    root = tmp_path / "p"
    make_project(root, ["Story"])
    if dotted == "sandbox.writable":
        (root / "extra" / "folder").mkdir(parents=True)
    record = GuardrailRecord(root)
    record.check("at the start")  # the first run records the settings
    set_value(root, dotted, changed_value(dotted, get_value(root, dotted)))

    with pytest.raises(ConfigChangedError) as raised:
        GuardrailRecord(root).check("before the next phase")
    named = list(raised.value.changes)
    assert named and all(k == dotted or k.startswith(dotted + ".") for k in named), named

    GuardrailRecord(root).accept()
    GuardrailRecord(root).check("after a person accepted it")
