"""Issue 32's settings through the real CLI: `sandbox.deny_read`, `verify.env`,
`sandbox.pass_env`, the environment allow-list of verification, and what `doctor` shows.

A verify command records what it could read and which variables it got, under a throwaway
`HOME`; ai-sdlc's own environment holds a token, a harmless setting and an AI key."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import CliResult, run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI == 0, reason="needs Landlock"),
]

#: `verify.py OUT HOME`: one JSON line: each file's outcome and the variables it got.
VERIFY = r"""
import json, os, sys
out, home = sys.argv[1:3]
files = {}
for name in ("notes/secret.txt", "notes-public.txt", ".ssh/id_ed25519"):
    try:
        files[name] = open(os.path.join(home, name)).read()
    except OSError as exc:
        files[name] = "denied: " + exc.strerror
names = ("GH_TOKEN", "NPM_TOKEN", "MY_SETTING", "APP_MODE", "OPENAI_API_KEY", "LANG", "HOME")
got = {n: os.environ[n] for n in names if n in os.environ}
with open(out, "a") as fh:
    fh.write(json.dumps({"files": files, "env": got}) + "\n")
print("FAILED tests/test_calc.py::test_multiply - assert 9 == 20")  # a failing test, named
sys.exit(1)
"""


def project(tmp_path: Path, extra: str = "") -> tuple[Path, Path, dict[str, str]]:
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "secret.txt").write_text("vault-password-1234")
    (home / "notes-public.txt").write_text("public")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("fake-key")
    root = make_repo(tmp_path, remote=False).root
    reports = tmp_path / "reports"
    reports.mkdir()
    script = tmp_path / "verify.py"
    script.write_text(VERIFY)
    out = reports / "verify.jsonl"
    verify = shlex.join([sys.executable, str(script), str(out), str(home)])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  test: {json.dumps(verify)}\n  env: {{APP_MODE: test}}\n"
        "limits:\n  implementation_retries: 0\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
        '  deny_read: ["~/notes"]\n  pass_env: [GH_TOKEN]\n' + extra
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    env = {
        "HOME": str(home),
        "GH_TOKEN": "ghp_passedOnPurpose1234567890",
        "NPM_TOKEN": "npm_notPassed1234567890",
        "MY_SETTING": "not-on-the-allow-list",
        "OPENAI_API_KEY": "sk-never-to-verify-123456",
        "LANG": "C.UTF-8",
    }
    return root, out, env


def run(root: Path, env: dict[str, str], *args: str) -> CliResult:
    return run_cli(root, *args, env=env)


def test_verification_reads_and_gets_only_what_the_settings_allow(tmp_path: Path) -> None:
    root, out, env = project(tmp_path)
    assert run(root, env, "add", "Add multiply").returncode == 0
    result = run(root, env, "run", "S-0001")
    assert result.returncode == 5, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records
    for record in records:
        files = record["files"]
        assert files["notes/secret.txt"].startswith("denied"), files  # sandbox.deny_read
        assert files[".ssh/id_ed25519"].startswith("denied"), files  # the default list
        assert files["notes-public.txt"] == "public", files
        assert record["env"] == {
            "GH_TOKEN": env["GH_TOKEN"],  # sandbox.pass_env names it
            "APP_MODE": "test",  # verify.env
            "LANG": "C.UTF-8",
            "HOME": env["HOME"],
        }, record


def test_the_environment_cannot_unlist_a_denied_path_or_pass_a_secret(tmp_path: Path) -> None:
    root, out, env = project(tmp_path)
    assert run(root, env, "add", "Add multiply").returncode == 0
    for name, value in (("DENY_READ", "[]"), ("PASS_ENV", '["GH_TOKEN", "NPM_TOKEN"]')):
        result = run(root, {**env, f"AI_SDLC_SANDBOX__{name}": value}, "run", "S-0001")
        assert result.returncode == 3, result.output
        said = " ".join(result.output.split())
        assert f"would loosen the guardrail sandbox.{name.lower()}" in said, said
    assert not out.exists()


def test_doctor_shows_what_is_unreadable_the_network_and_the_pid_namespace(
    tmp_path: Path,
) -> None:
    root, _out, env = project(tmp_path)
    shown = run(root, env, "doctor")
    lines = shown.stdout.splitlines()
    home = env["HOME"]
    unreadable = next(ln for ln in lines if ln.startswith("  unreadable:"))
    assert f"{home}/.ssh" in unreadable and f"{home}/notes" in unreadable, unreadable
    network = next(ln for ln in lines if ln.startswith("  network:"))
    if ABI >= landlock.NET_ABI:
        assert network == (
            "  network: verify: none (no TCP), tools: none (no TCP), setup: open, "
            "agents: their API hosts only, through ai-sdlc's proxy"
        )
    processes = next(ln for ln in lines if ln.startswith("  processes:"))
    assert processes == "  processes: a PID namespace of their own (no /proc/<ancestor>/environ)"
    data = json.loads(run(root, env, "doctor", "--json").stdout)["sandbox"]
    assert data["pid_namespace"] == "in force"
    assert data["network"]["verify"] == "none (no TCP)" or ABI < landlock.NET_ABI
