"""Issue 22 on the integrated main: a hostile agent, verify command and worktree setup against a
realistic project (a src-layout package installed editable in its own `.venv`, the layered
worktree venv `ai-sdlc init` proposes as `worktree.setup`), with the sandbox on (the default)
and the user's state folder in a `$HOME` of the test's own.

Each attack is the script tests/support/fakes/hostile_integrated.py; see its docstring for the
modes.
The story must end blocked at exactly the project's global recovery limit after at most one
verification more (the base's and each attempt's), with nothing outside the worktree changed
(checksummed). The project lowers the limit to LIMIT, as a user may: the count is exact whatever
the limit (the default of 10 is pinned by the ledger's tests and the demo), and three attempts
instead of ten keep each run short."""

from __future__ import annotations

import errno
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import CliResult, run_cli
from tests.sandbox.test_sandbox import outside_worktree
from tests.support.attack_support import mount_namespace_here
from tests.support.git_support import git, git_env  # noqa: F401 (fixture)
from tests.support.paths import FAKES
from tests.support.worktree_env_support import calc_project

try:
    landlock.abi_version()
except OSError as exc:  # pragma: no cover - the CI and dev kernels have Landlock
    NO_LANDLOCK = f"this kernel has no usable Landlock ({exc.strerror})"
else:
    NO_LANDLOCK = ""
pytestmark = [
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(bool(NO_LANDLOCK), reason=NO_LANDLOCK or "-"),
]
HOSTILE = FAKES / "hostile_integrated.py"
PYTEST = ".venv/bin/python -m pytest -q -p no:cacheprovider"
LIMIT = 3
AT_LIMIT = f"Global recovery limit exceeded ({LIMIT}/{LIMIT})"


def hostile_project(
    tmp_path: Path, mode: str, *, verify: str | None = None, retries: int = LIMIT
) -> tuple[Path, Path]:
    """The calc project, the hostile script as command agent, verify.test (run by the
    worktree's venv) and second setup step; REPORTS the one extra writable folder."""
    root = calc_project(tmp_path).root
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "mode").write_text(mode)
    (tmp_path / "home" / ".cache").mkdir(parents=True)  # a tool state folder the sandbox grants
    hostile = [str(HOSTILE), "-", str(root), str(reports)]
    agent = [sys.executable, str(HOSTILE), "agent", "{phase}", str(root), str(reports)]
    verify = verify or shlex.join([".venv/bin/python", str(HOSTILE), "verify", *hostile[1:]])
    setup = [
        "ai-sdlc worktrees venv",
        shlex.join([sys.executable, hostile[0], "setup", *hostile[1:]]),
    ]
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n"
        f"limits:\n  global_recovery: {LIMIT}\n  implementation_retries: {retries}\n"
        f"worktree:\n  setup: {json.dumps(setup)}\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    assert run(root, "config", "--accept").returncode == 0
    return root, reports


def run(root: Path, *args: str) -> CliResult:
    """`ai-sdlc` with the command agent (the project's own `sandbox.writable` names the
    reports folder) and the user's state folder in the test's `$HOME`."""
    home = root.parent / "home"
    env = {
        "AI_SDLC_PROVIDER": "command",
        "HOME": str(home),
        "AI_SDLC_STATE_HOME": str(home / ".local" / "state" / "ai-sdlc"),
    }
    return run_cli(root, *args, env=env)


def _running_with(text: str) -> list[int]:
    """Processes of this machine whose command line holds `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(entry))
    return found


def frontmatter(root: Path, sid: str) -> dict[str, Any]:
    shown = run(root, "show", sid, "--json")
    assert shown.returncode == 0, shown.output
    return dict(json.loads(shown.stdout)["frontmatter"])


def events(root: Path, sid: str) -> list[dict[str, Any]]:
    path = root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def implement_attempts(root: Path, sid: str) -> int:
    return sum(
        1
        for e in events(root, sid)
        if e["action"] == "phase_started" and e.get("phase") in ("implement", "rework")
    )


def verifications(reports: Path) -> int:
    path = reports / "verifications"
    return len(path.read_text().splitlines()) if path.exists() else 0


def assert_blocked_at_the_limit(root: Path, sid: str) -> None:
    fm = frontmatter(root, sid)
    assert fm["status"] == "blocked", fm
    assert fm["total_recovery_attempts"] == LIMIT, fm


def test_every_write_of_agents_setup_and_verify_in_parallel_workers_is_denied(
    tmp_path: Path,
) -> None:
    """`run --auto --jobs 2`, two stories: from each worker's agent, setup step and verify
    command, the user's state folder, `git update-ref` (the ledger ref, a branch), the ledger,
    the config, the main checkout and its venv, and moving the worktree away are all denied;
    each story blocks at exactly the limit after at most one verification more; nothing outside
    changed."""
    root, reports = hostile_project(tmp_path, "all")
    for title in ("Add multiply", "Add divide"):
        assert run(root, "add", title).returncode == 0
    before = outside_worktree(root)
    state_home = tmp_path / "home" / ".local" / "state"
    result = run(root, "run", "--auto", "--jobs", "2")
    assert result.returncode == 6, result.output  # halted: every story was escalated
    assert result.output.count(AT_LIMIT) >= 2, result.output
    tried = [
        json.loads(line)
        for name in ("agent", "setup", "verify")
        for line in (reports / f"{name}.jsonl").read_text().splitlines()
    ]
    assert {r["role"] for r in tried} == {"agent", "setup", "verify"}
    assert len({r["attack"] for r in tried}) == 8
    escaped = [r for r in tried if not r["outcome"].startswith("denied")]
    assert not escaped, escaped
    for sid in ("S-0001", "S-0002"):
        assert_blocked_at_the_limit(root, sid)
        assert implement_attempts(root, sid) == LIMIT
    # Each attempt's, and the base's (both stories start from the same commit, whose verdict
    # the judge keeps: verified once, or by both workers at the same moment).
    assert 2 * LIMIT + 1 <= verifications(reports) <= 2 * LIMIT + 2
    assert outside_worktree(root) == before
    assert not list(state_home.rglob("planted"))


def test_a_worktree_git_file_naming_the_main_checkout_steers_no_write_of_ai_sdlc(
    tmp_path: Path,
) -> None:
    """The agent rewrites the worktree's `.git` file (`gitdir: <main checkout>`): ai-sdlc's
    own, unsandboxed bookkeeping (the setup's stamp) goes to the git folder it found from the
    main repository, never to a folder the worktree names."""
    root, reports = hostile_project(tmp_path, "dot-git")
    assert run(root, "add", "Add multiply").returncode == 0
    before = outside_worktree(root)
    result = run(root, "run", "S-0001")
    assert result.returncode == 5, result.output
    assert AT_LIMIT in " ".join(result.output.split())
    assert not (root / "ai-sdlc-setup.json").exists()
    assert outside_worktree(root) == before
    assert_blocked_at_the_limit(root, "S-0001")
    if mount_namespace_here():
        # The pointer is read-only to the agent: every rewrite refused (each attempt then fails
        # on its merits: its work does not make the failing test pass).
        refused = (reports / "dot-git-refused").read_text().split()
        assert refused[1::2] and set(refused[1::2]) == {str(errno.EROFS)}, refused
    else:
        # Each rewrite is a counted failed attempt as soon as the agent is done (issue 32):
        # only the untouched base was verified.
        assert verifications(reports) == 1


@pytest.mark.parametrize("mode", ["venv-pth", "pyc"])
def test_code_planted_in_git_ignored_files_cannot_pass_broken_code(
    tmp_path: Path, mode: str
) -> None:
    """The agent breaks `add`, and plants the working code where Python imports it from but
    the diff does not show: a `.pth` in the worktree's venv that imports a shadow copy
    (venv-pth), or a `.pyc` of the working code in `src/calc/__pycache__` with the broken
    source's mtime and size (pyc). Before, the tests passed and the story was done. Now an
    attempt that changes what the setup made fails (the environment guard), and verification
    keeps its bytecode in a folder of its own: the real tests judge the worktree's code and
    fail, every attempt (two here: a real pytest run per attempt is slow; the count to the
    limit is the other tests')."""
    root, _ = hostile_project(tmp_path, mode, verify=PYTEST, retries=1)
    assert run(root, "add", "Add multiply").returncode == 0
    result = run(root, "run", "S-0001")
    assert result.returncode == 5, result.output
    why = {  # the environment guard names the planted files; the bytecode is not read
        "venv-pth": "the attempt changed the worktree's environment: .venv/lib/",
        "pyc": "assert -1 == 5",
    }[mode]
    assert " ".join(result.stderr.split()).count(why) >= 2, result.stderr
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "blocked" and not fm["implementation_complete"], fm
    assert implement_attempts(root, "S-0001") == 2


def test_a_process_the_agent_detached_cannot_change_the_work_after_verification(
    tmp_path: Path,
) -> None:
    """The agent's work is honest, but it leaves a process in a new session (out of the
    process group killed when the agent ends) that breaks `add` as soon as verification has
    passed. Before, it won the race with ai-sdlc's commit: the branch of a done story held code
    never verified. The sandbox launcher now kills whatever the agent left when it ends."""
    root, reports = hostile_project(tmp_path, "daemon", retries=1)
    assert run(root, "add", "Add multiply").returncode == 0
    result = run(root, "run", "S-0001")
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0001")["status"] == "done"
    assert (reports / "daemon-pid").exists()  # it ran (its pid is one of its PID namespace)
    assert not _running_with(str(reports / "daemon-pid"))
    assert not (reports / "daemon-done").exists()
    branch = "ai-sdlc/S-0001-add-multiply"
    assert "a + b" in git(root, "show", f"{branch}:src/calc/__init__.py")
    assert "a * b" in git(root, "show", f"{branch}:src/calc/mul.py")
