"""A guardrail key a newer ai-sdlc adds (issue 32's `sandbox.deny_read`, `sandbox.network`,
`sandbox.pass_env`, `verify.env`) is no change to accept while it holds its default: a record
written before it existed lets the project run; a value set by hand is still a change."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import STATE_HOME, run_cli
from tests.workflow.state.test_ledger_integrity import new_project

NEW_KEYS = ("sandbox.deny_read", "sandbox.network", "sandbox.pass_env", "verify.env")


def record_of(root: Path) -> Path:
    found = [
        p
        for p in Path(STATE_HOME).glob("*/config-guardrails.json")
        if str(root) in (p.parent / "project").read_text()
    ]
    assert len(found) == 1, found
    return found[0]


def test_a_record_from_before_the_new_keys_needs_no_accept(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    assert run_cli(root, "config", "--accept").returncode == 0
    path = record_of(root)
    data = json.loads(path.read_text())
    assert set(NEW_KEYS) <= set(data["values"])
    for key in NEW_KEYS:  # as an ai-sdlc without them wrote it
        del data["values"][key]
    path.write_text(json.dumps(data))
    nothing = run_cli(root, "config", "--accept", "--json")
    assert json.loads(nothing.stdout) == {"accepted": {}}, nothing.output
    path.write_text(json.dumps(data))  # again without them
    config = root / ".ai-sdlc" / "config.yaml"
    text = config.read_text().replace("network: [setup] ", "network: [setup, verify] ")
    config.write_text(text)
    changed = run_cli(root, "config", "--accept", "--json")
    assert list(json.loads(changed.stdout)["accepted"]) == ["sandbox.network"], changed.output
