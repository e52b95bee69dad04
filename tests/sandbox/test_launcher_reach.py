"""Issue 32, cases 4 and 1 (the launcher's half): the sandbox launcher is out of the child's
reach, through the real CLI on a real git project.

The project's `verify.test` is hostile. It starts a detached grandchild (`setsid`, a double
fork, its output closed) that SIGKILLs the launcher (the parent of the verify command) and
then stays alive; a launcher in the child's own Landlock domain died of it and the grandchild
lived on under init after `ai-sdlc` exited 0. Also: a baseline whose test step was killed is
never "base verified", a launcher killed from outside is a failed step that leaves nothing
running, and a launcher or landlock module rewritten on disk during the run changes nothing
that runs (its code comes from ai-sdlc's memory).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ai_sdlc
from ai_sdlc.sandbox import landlock
from tests.conftest import cli_environment, run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]
needs_scoping = pytest.mark.skipif(ABI < 6, reason="signal scoping needs Landlock ABI 6")

SID = "S-0001"

#: `hostile.py MODE REPORTS`: the project's verify.test. Writes what it saw to REPORTS.
HOSTILE = r"""
import json, os, signal, subprocess, sys, time
mode, reports = sys.argv[1], sys.argv[2]
launcher = os.getppid()

def put(name, data):
    tmp = os.path.join(reports, name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(data))
    os.replace(tmp, os.path.join(reports, name))

def wait_for(name):
    while not os.path.exists(os.path.join(reports, name)):
        time.sleep(0.01)

if mode == "kill-launcher":
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                os.kill(launcher, signal.SIGKILL)
                outcome = "done"
            except OSError as exc:
                outcome = "denied: " + exc.strerror
            put("survivor.json", {"pid": os.getpid(), "launcher": launcher, "kill": outcome})
            while True:
                time.sleep(0.05)
        os._exit(0)
    wait_for("survivor.json")
    print("1 passed in 0.01s")
elif mode == "self-kill":
    os.kill(os.getpid(), signal.SIGKILL)
elif mode == "wait-for-kill":
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    put("ready.json", {"launcher": launcher, "verify": os.getpid(), "child": child.pid})
    while True:
        time.sleep(0.05)
elif mode == "patch-launcher":
    # The baseline's run: switch the sandbox off in the installed code it can write...
    marker = os.path.join(reports, "patched")
    if not os.path.exists(marker):
        site = os.environ["HOSTILE_SITE"]
        sandbox = os.path.join(site, "ai_sdlc", "sandbox")
        with open(os.path.join(sandbox, "landlock.py"), "a") as fh:
            fh.write("\ndef restrict(writable, abi=None):\n    return 0\n")
        with open(os.path.join(sandbox, "launcher.py"), "a") as fh:
            fh.write("\nEXIT_CANNOT_SANDBOX = 0\n")
        open(marker, "w").close()
        print("1 passed in 0.01s")
    else:
        # ...and every later run tries what the sandbox denies.
        target = os.environ["HOSTILE_TARGET"]
        try:
            with open(target, "a") as fh:
                fh.write("escaped\n")
            outcome = "done"
        except OSError as exc:
            outcome = "denied: " + exc.strerror
        put("escape.json", {"outcome": outcome})
        print("1 passed in 0.01s")
"""


def project(tmp_path: Path, mode: str) -> tuple[Path, Path]:
    """A git project with one story and the hostile verify.test; (root, reports)."""
    root = make_repo(tmp_path, remote=False).root
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    reports = tmp_path / "reports"
    reports.mkdir()
    verify = shlex.join([sys.executable, str(script), mode, str(reports)])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  test: {json.dumps(verify)}\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    assert run_cli(root, "add", "Add multiply").returncode == 0
    return root, reports


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie has ended: only its parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def processes_under(folder: Path) -> list[int]:
    """Live processes whose command line, working folder or environment names `folder`."""
    found = []
    mark = str(folder).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid() or not alive(int(name)):
            continue
        seen = b""
        for part in ("cmdline", "environ"):
            with contextlib.suppress(OSError):
                seen += Path(f"/proc/{name}/{part}").read_bytes()
        with contextlib.suppress(OSError):
            seen += os.readlink(f"/proc/{name}/cwd").encode()
        if mark in seen:
            found.append(int(name))
    return found


#: How the launcher's command line starts its code (`backend.LAUNCH_CODE`).
LAUNCHER_MARK = b"# ai-sdlc's sandbox launcher.py"


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def children_of(parent: int) -> list[int]:
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(name))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@needs_scoping
def test_a_detached_grandchild_cannot_kill_its_launcher_nor_outlive_the_run(
    tmp_path: Path,
) -> None:
    root, reports = project(tmp_path, "kill-launcher")
    try:
        result = run_cli(root, "run", SID)
        survivor = json.loads((reports / "survivor.json").read_text())
        # The launcher is outside the grandchild's Landlock domain: the signal is refused.
        assert survivor["kill"].startswith("denied"), survivor
        # And the launcher swept the grandchild when the verify command ended (its pid is its
        # PID namespace's: it is found from here by its command line).
        assert [p for p in processes_under(tmp_path) if b"kill-launcher" in cmdline(p)] == []
        assert processes_under(tmp_path) == []
        assert "base verified" in result.stderr, result.output
        assert result.returncode == 0, result.output
    finally:
        kill_all(processes_under(tmp_path))


def test_a_baseline_whose_test_step_was_killed_is_not_verified(tmp_path: Path) -> None:
    root, _ = project(tmp_path, "self-kill")
    result = run_cli(root, "run", SID)
    assert result.returncode == 3, result.output
    assert "base verified" not in result.stderr
    text = " ".join(result.stderr.split())
    assert "verification fails before any change: step 'test' was killed by SIGKILL" in text
    shown = run_cli(root, "show", SID, "--json")
    assert json.loads(shown.stdout)["frontmatter"].get("total_recovery_attempts", 0) == 0


def test_a_launcher_killed_from_outside_is_a_failed_step_that_leaves_nothing(
    tmp_path: Path,
) -> None:
    """Nothing inside the sandbox can kill the launcher (above); another process of the user
    can. The verify command (PR_SET_PDEATHSIG) and what it started in its session die with it,
    and the killed step is not a verified base."""
    root, reports = project(tmp_path, "wait-for-kill")
    env = cli_environment()
    run = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), "run", SID],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = reports / "ready.json"
        while not ready.exists():  # the handshake: the verify command is running
            assert run.poll() is None, run.communicate()
            time.sleep(0.01)
        # The pids the verify command sees are its PID namespace's: the launcher and the
        # command's tree are found from here (outside), by what they carry.
        launchers = [p for p in children_of(run.pid) if LAUNCHER_MARK in cmdline(p)]
        assert len(launchers) == 1, launchers
        tree = processes_under(tmp_path)
        assert len(tree) >= 3, tree  # the launcher, the verify command, its child (at least)
        os.kill(launchers[0], signal.SIGKILL)
        out, err = run.communicate(timeout=60)
        assert run.returncode == 3, out + err
        assert "base verified" not in err
        assert "step 'test' was killed by SIGKILL" in " ".join(err.split())
        assert not any(alive(pid) for pid in tree)
        assert processes_under(tmp_path) == []
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        kill_all(processes_under(tmp_path))


@pytest.mark.skipif(ABI == 0, reason="no Landlock here")
def test_a_launcher_rewritten_on_disk_changes_nothing_that_runs(tmp_path: Path) -> None:
    """ai-sdlc installed where children can write it (as uv's hard links into a writable
    ~/.cache make it): the baseline's verify command appends a no-op `restrict` to
    landlock.py; the next verify command must still be confined."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(ai_sdlc.__file__).parent, site / "ai_sdlc", ignore=shutil.ignore_patterns("*.pyc")
    )
    root, reports = project(tmp_path, "patch-launcher")
    target = root / "README.md"
    before = target.read_bytes()
    # The site folder is writable as a user makes it so: in the project's reviewed list.
    widened = run_cli(root, "config", "sandbox.writable", json.dumps([str(reports), str(site)]))
    assert widened.returncode == 0, widened.output
    env = cli_environment()
    # verify commands get an allow-list (sandbox/childenv): the script's settings go through
    # verify.env, as a project's would.
    hostile = {"HOSTILE_SITE": str(site), "HOSTILE_TARGET": str(target)}
    env.update(PYTHONPATH=str(site), AI_SDLC_VERIFY__ENV=json.dumps(hostile))
    done = subprocess.run(
        [sys.executable, "-m", "ai_sdlc", "--project", str(root), "run", SID],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (reports / "patched").exists(), done.stderr
    assert (
        "def restrict(writable, abi=None):\n    return 0"
        in (site / "ai_sdlc" / "sandbox" / "landlock.py").read_text()
    )
    escape = json.loads((reports / "escape.json").read_text())
    assert escape["outcome"].startswith("denied"), escape
    assert target.read_bytes() == before
