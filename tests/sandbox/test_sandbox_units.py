"""The sandbox's pieces against the real kernel, one at a time: children of `start_session`
have no controlling terminal (no TIOCSTI into the user's terminal), older Landlock ABIs still
confine writes, ABI 6 scoping stops signals to processes outside the sandbox, the private temp
folder, a missing program, our own agent loop's `run_command`, and `sandbox_policy_for`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.config import load_config
from ai_sdlc.providers.tools import run_confined
from ai_sdlc.sandbox import landlock, sandbox_policy_for
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.spawn import start_session
from ai_sdlc.store import StoryStore
from ai_sdlc.verify import run_commands

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
needs_landlock = pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock")

#: Runs as a session leader on a pseudo-terminal it makes its controlling terminal, then starts
#: a probe through `start_session` (with and without a sandbox) and records what each saw.
TTY_HELPER = r"""
import json, os, subprocess, sys
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import Sandbox, SandboxPolicy
from ai_sdlc.spawn import start_session
out, scratch = sys.argv[1:3]
os.close(os.open(os.ttyname(0), os.O_RDWR))  # a session leader's first tty: its terminal
def probe():
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY))
        return "has a terminal"
    except OSError as exc:
        return exc.strerror
code = (
    "import os\n"
    "try:\n    os.close(os.open('/dev/tty', os.O_RDONLY)); print('has a terminal')\n"
    "except OSError as exc:\n    print(exc.strerror)\n"
)
found = {"helper": probe()}
plain = start_session([sys.executable, "-c", code], stdout=subprocess.PIPE)
found["child"] = plain.communicate()[0].decode().strip()
policy = SandboxPolicy(LandlockBackend(), (scratch,))
boxed = start_session([sys.executable, "-c", code], stdout=subprocess.PIPE, sandbox=policy)
found["sandboxed child"] = boxed.communicate()[0].decode().strip()
with open(out, "w") as fh:
    json.dump(found, fh)
"""


@needs_landlock
def test_children_have_no_controlling_terminal(tmp_path: Path) -> None:
    helper = tmp_path / "helper.py"
    helper.write_text(TTY_HELPER)
    out = tmp_path / "found.json"
    master, slave = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, str(helper), str(out), str(tmp_path)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            timeout=60,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == 0
    found = json.loads(out.read_text())
    # The control: the helper itself has the terminal; its children do not.
    assert found == {
        "helper": "has a terminal",
        "child": os.strerror(6),  # ENXIO: "No such device or address"
        "sandboxed child": os.strerror(6),
    }


def _write_probe(target: Path) -> list[str]:
    code = (
        "import sys\ntry:\n    open(sys.argv[1], 'a').write('x'); print('written')\n"
        "except OSError as exc:\n    print(exc.strerror)\n"
    )
    return [sys.executable, "-c", code, str(target)]


@needs_landlock
@pytest.mark.parametrize("abi", sorted({1, 2, 3, ABI}))
def test_every_abi_version_confines_writes(tmp_path: Path, abi: int) -> None:
    """`restrict` with an older ABI's rights (what an older kernel gets) still denies writes
    outside the writable roots and allows them inside."""
    inside, outside = tmp_path / "rw", tmp_path / "ro"
    inside.mkdir()
    outside.mkdir()
    code = (
        "import sys\nsys.path.insert(0, sys.argv[1])\nimport landlock\n"
        f"landlock.restrict([sys.argv[2]], abi={abi})\n"
        "import os\nos.execv(sys.argv[3], sys.argv[3:])\n"
    )
    results = {}
    for name, folder in (("inside", inside), ("outside", outside)):
        done = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                code,
                str(Path(landlock.__file__).parent),
                str(inside),
                *_write_probe(folder / "f"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results[name] = done.stdout.strip()
    assert results == {"inside": "written", "outside": os.strerror(13)}
    assert not (outside / "f").exists()


@needs_landlock
@pytest.mark.skipif(ABI < 6, reason="signal scoping needs Landlock ABI 6")
def test_a_sandboxed_child_cannot_signal_processes_outside_it(tmp_path: Path) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code = (
            "import os, signal, sys\ntry:\n    os.kill(int(sys.argv[1]), signal.SIGTERM)\n"
            "    print('killed')\nexcept OSError as exc:\n    print(exc.strerror)\n"
        )
        # Landlock's own scope: without the PID namespace the victim's pid is visible (in
        # one, it is not even there: ESRCH).
        policy = SandboxPolicy(LandlockBackend(), (str(tmp_path),), pidns=False)
        proc = start_session(
            [sys.executable, "-c", code, str(victim.pid)], stdout=subprocess.PIPE, sandbox=policy
        )
        assert proc.communicate()[0].decode().strip() == os.strerror(1)  # EPERM
        assert victim.poll() is None
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()


@needs_landlock
def test_the_private_temp_folder_is_set_writable_and_removed(tmp_path: Path) -> None:
    policy = SandboxPolicy(LandlockBackend(), (str(tmp_path),))
    code = (
        "import os, tempfile\nnames = {os.environ[n] for n in ('TMPDIR', 'TMP', 'TEMP')}\n"
        "assert names == {tempfile.gettempdir()}, names\n"
        "open(os.path.join(tempfile.gettempdir(), 'scratch'), 'w').write('x')\n"
        "print(tempfile.gettempdir())\n"
    )
    proc = start_session([sys.executable, "-c", code], stdout=subprocess.PIPE, sandbox=policy)
    folder = Path(proc.communicate()[0].decode().strip())
    assert proc.returncode == 0
    assert (folder / "scratch").exists()
    del proc  # the folder goes with the process object
    assert not folder.exists()


@needs_landlock
def test_a_missing_program_is_reported_as_without_a_sandbox(tmp_path: Path) -> None:
    policy = SandboxPolicy(LandlockBackend(), (str(tmp_path),))
    result = run_commands([("test", "no-such-program-xyz -q")], cwd=tmp_path, timeout=30)
    boxed = run_commands(
        [("test", "no-such-program-xyz -q")], cwd=tmp_path, timeout=30, sandbox=policy
    )
    assert boxed.steps[0].exit_code == result.steps[0].exit_code == 127
    assert boxed.steps[0].output == result.steps[0].output
    assert "executable not found on PATH" in boxed.steps[0].output


@needs_landlock
def test_the_agent_loops_run_command_is_confined(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    policy = SandboxPolicy(LandlockBackend(), (str(workspace),))
    code, output = run_confined(
        _write_probe(outside / "f"),
        cwd=workspace,
        timeout=30,
        max_output_chars=1000,
        sandbox=policy,
    )
    assert (code, output.strip()) == (0, os.strerror(13))
    code, output = run_confined(
        _write_probe(workspace / "f"),
        cwd=workspace,
        timeout=30,
        max_output_chars=1000,
        sandbox=policy,
    )
    assert (code, output.strip()) == (0, "written")


@needs_landlock
def test_sandbox_policy_for_a_worktree_inside_the_checkout(tmp_path: Path) -> None:
    """The API other parts (worktree set-up commands) use: the worktree and the configured
    folders writable, the checkout and its `.ai-sdlc/` not. (The config is read without the
    environment: the project's file alone decides here.)"""
    root = tmp_path / "proj"
    StoryStore(root).init()
    extra = tmp_path / "m2"
    extra.mkdir()
    (root / ".ai-sdlc" / "config.yaml").write_text(f"sandbox:\n  writable: [{str(extra)!r}]\n")
    worktree = root / ".ai-sdlc" / "worktrees" / "S-0001-x"
    worktree.mkdir(parents=True)
    policy = sandbox_policy_for(worktree, load_config(root, environ={}))
    assert policy is not None
    assert policy.writable[0] == str(worktree.resolve())
    assert str(extra.resolve()) in policy.writable
    seen = {}
    for target in (worktree / "a", extra / "b", root / ".ai-sdlc" / "c", root / "d"):
        proc = start_session(
            _write_probe(target), cwd=worktree, stdout=subprocess.PIPE, sandbox=policy
        )
        seen[target.name] = proc.communicate()[0].decode().strip()
    assert seen == {"a": "written", "b": "written", "c": os.strerror(13), "d": os.strerror(13)}
    # Off: no policy at all (children then run unconfined, and a run says so).
    (root / ".ai-sdlc" / "config.yaml").write_text("sandbox:\n  enabled: false\n")
    assert sandbox_policy_for(worktree, load_config(root, environ={})) is None
    assert (
        sandbox_policy_for(
            worktree, load_config(root, environ={}), environ={"AI_SDLC_SANDBOX": "off"}
        )
        is None
    )


def test_ray_worker_clones_live_where_no_sandboxed_child_may_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default a Ray worker clones into the user state folder, never into ~/.cache (a tool
    state folder every sandboxed child may write, whence an agent could edit a clone's git
    config that a later unsandboxed git honours)."""
    from ai_sdlc.workflow.parallel.ray_worker import RaySpec, clone_slot
    from ai_sdlc.workflow.session import open_worker

    state, home = tmp_path / "state", tmp_path / "home"
    monkeypatch.setenv("AI_SDLC_STATE_HOME", str(state))
    monkeypatch.setenv("HOME", str(home))
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    spec = RaySpec(str(origin), "origin", "", None, "{}", None, open_worker)
    with clone_slot(spec) as clone:
        assert (clone / ".git").is_dir()
        assert clone.is_relative_to(state / "ray")
    assert not (home / ".cache").exists()


@needs_landlock
def test_the_launcher_imports_only_what_it_needs(tmp_path: Path) -> None:
    """The launcher is a fresh interpreter before every sandboxed process: `signal` (which
    imports enum) or `contextlib` (functools, collections) cost it ~12 ms a process here."""
    argv = LandlockBackend().wrap(["/bin/true", "true"], [str(tmp_path)], pidns=True)
    assert argv[1:3] == ["-I", "-S"]
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "ctypes" in imported  # the system calls: what it does need
    assert imported.isdisjoint({"enum", "signal", "contextlib", "functools", "typing"}), imported
