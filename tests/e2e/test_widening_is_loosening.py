"""Widening is loosening: `sandbox.writable` from the environment or the user's file is refused
as `AI_SDLC_SANDBOX__ENABLED=false` is (a run and `doctor` exit 3, nothing touched); from the
project's own config it is taken (recorded with the other guardrails: a later hand-edit waits
for `config --accept`), and `doctor` and the run's first line name every widened folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert run_cli(root, "init").returncode == 0
    assert run_cli(root, "config", "verify.none", "true").returncode == 0
    assert run_cli(root, "add", "Widen me").returncode == 0
    return root


@pytest.mark.e2e
def test_the_environment_cannot_widen_the_sandbox(tmp_path: Path) -> None:
    root = _project(tmp_path)
    story = root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    before = story.read_bytes()
    off = run_cli(root, "run", "S-0001", env={"AI_SDLC_SANDBOX__ENABLED": "false"})
    for args in (("run", "S-0001"), ("doctor",)):
        result = run_cli(root, *args, env={"AI_SDLC_SANDBOX__WRITABLE": '["/tmp"]'})
        assert result.returncode == off.returncode == 3, result.output
        assert 'AI_SDLC_SANDBOX__WRITABLE=["/tmp"] would loosen the guardrail ' in result.stderr
        assert "sandbox.writable (the project's value is [], from " in result.stderr
        assert "Traceback" not in result.output
    assert story.read_bytes() == before
    assert not (root / ".ai-sdlc" / "worktrees").exists()
    # Naming fewer folders than the project (or the same ones) narrows it: allowed.
    assert run_cli(root, "doctor", env={"AI_SDLC_SANDBOX__WRITABLE": "[]"}).returncode in (0, 1)


@pytest.mark.e2e
def test_the_user_file_cannot_widen_the_sandbox(tmp_path: Path) -> None:
    root = _project(tmp_path)
    story = root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    before = story.read_bytes()
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.yaml").write_text('sandbox:\n  writable: ["/tmp"]\n')
    refused = run_cli(root, "run", "S-0001", env={"AI_SDLC_CONFIG_HOME": str(user)})
    assert refused.returncode == 3, refused.output
    assert "sandbox.writable: [/tmp] would loosen a guardrail" in refused.stderr
    assert f"{user / 'config.yaml'}:2" in refused.stderr
    assert story.read_bytes() == before


@pytest.mark.e2e
def test_the_project_config_widens_it_and_every_root_is_named(tmp_path: Path) -> None:
    root = _project(tmp_path)
    extra = tmp_path / "cache"
    extra.mkdir()
    assert run_cli(root, "config", "sandbox.writable", json.dumps([str(extra)])).returncode == 0
    doctor = run_cli(root, "doctor")
    assert f"  widened by sandbox.writable: {extra}" in doctor.stdout, doctor.stdout
    report = json.loads(run_cli(root, "doctor", "--json").stdout)
    assert report["sandbox"]["widened"] == [str(extra)]
    # The environment may repeat the project's own list.
    same = run_cli(root, "doctor", env={"AI_SDLC_SANDBOX__WRITABLE": json.dumps([str(extra)])})
    assert same.returncode in (0, 1), same.output
    ran = run_cli(root, "run", "S-0001")
    assert ran.returncode == 0, ran.output
    first = ran.stderr.splitlines()[0]
    assert first == f"warning: sandbox widened by sandbox.writable: {extra}", ran.stderr
    # A hand-edit of the project's list waits for a person: a guardrail.
    config = root / ".ai-sdlc" / "config.yaml"
    text = config.read_text()
    config.write_text(text.replace(str(extra), str(extra.parent / "other")))
    (extra.parent / "other").mkdir()
    assert run_cli(root, "add", "Second").returncode == 0
    changed = run_cli(root, "run", "S-0002")
    assert changed.returncode == 3, changed.output
    assert "sandbox.writable" in changed.stderr
    assert run_cli(root, "config", "--accept").returncode == 0
    accepted = run_cli(root, "run", "S-0002")
    assert accepted.returncode == 0, accepted.output
    other = extra.parent / "other"
    assert (
        accepted.stderr.splitlines()[0] == f"warning: sandbox widened by sandbox.writable: {other}"
    )


@pytest.mark.e2e
def test_the_default_sandbox_names_no_widening(tmp_path: Path) -> None:
    root = _project(tmp_path)
    doctor = run_cli(root, "doctor", "--json")
    assert json.loads(doctor.stdout)["sandbox"]["widened"] == []
    ran = run_cli(root, "run", "S-0001")
    assert ran.returncode == 0, ran.output
    assert "widened" not in ran.stderr


@pytest.mark.e2e
def test_one_rule_for_every_sandbox_list(tmp_path: Path) -> None:
    """Allow-lists (writable, network, pass_env) are widened by an entry the project's list
    lacks, the deny-list (deny_read) by leaving one out; order and repeats do not matter."""
    root = _project(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    settings = {
        "sandbox.writable": [str(a), str(b)],
        "sandbox.network": ["setup", "verify"],
        "sandbox.pass_env": ["GH_TOKEN", "NPM_TOKEN"],
        "sandbox.deny_read": ["~/.vault"],
    }
    for dotted, value in settings.items():
        assert run_cli(root, "config", dotted, json.dumps(value)).returncode == 0
    narrower = {
        "WRITABLE": [str(b), str(b)],
        "NETWORK": ["verify", "setup"],
        "PASS_ENV": ["NPM_TOKEN"],
        "DENY_READ": ["~/.password-store", "~/.vault"],
    }
    wider = {
        "WRITABLE": [str(b), str(tmp_path)],
        "NETWORK": ["setup", "verify", "agents"],
        "PASS_ENV": ["GH_TOKEN", "AWS_SECRET_ACCESS_KEY"],
        "DENY_READ": ["~/.password-store"],
    }
    for name in narrower:
        variable = f"AI_SDLC_SANDBOX__{name}"
        taken = run_cli(root, "doctor", "--json", env={variable: json.dumps(narrower[name])})
        assert taken.returncode in (0, 1), taken.output
        shown = json.loads(taken.stdout)
        if name == "WRITABLE":
            assert shown["sandbox"]["widened"] == [str(b)], shown["sandbox"]
        refused = run_cli(root, "doctor", env={variable: json.dumps(wider[name])})
        assert refused.returncode == 3, refused.output
        said = " ".join(refused.stderr.split())
        assert f"would loosen the guardrail sandbox.{name.lower()}" in said, said
    # The user's file follows the same rule, named by its file and line.
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.yaml").write_text("sandbox:\n  network: [setup]\n  deny_read: []\n")
    refused = run_cli(root, "doctor", env={"AI_SDLC_CONFIG_HOME": str(user)})
    assert refused.returncode == 3, refused.output
    assert "sandbox.deny_read: [] would loosen a guardrail" in refused.stderr
    assert f"{user / 'config.yaml'}:3" in refused.stderr
