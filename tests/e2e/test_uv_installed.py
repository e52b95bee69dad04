"""Issue 32, case 1, through the real CLI installed the way uv installs it.

ai-sdlc is installed by the real uv (`uv venv` + `uv pip install` of this checkout's wheel, uv's
default link mode: every file a hard link to its copy in `~/.cache/uv`) under a throwaway HOME. The
baseline's verify command (and a detached grandchild of it, and the agent) try to patch the
cached copy of `ai_sdlc/sandbox/landlock.py`, the same inode the launcher imports for every
child: denied, because `~/.cache` is no longer writable (children get ai-sdlc's own caches).
A user who widens the sandbox to `~/.cache` gets a run that refuses to start, naming the
hard-linked file, before any child runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from ai_sdlc.store import StoryStore
from tests.conftest import cli_environment
from tests.e2e.realcli.install import tool_path
from tests.support.attack_support import (
    assert_counted_honestly,
    home_sums,
    kill_all,
    make_home,
    plain_git_everywhere,
    processes_naming,
)
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)
from tests.support.held_support import start_at_implement
from tests.support.wheel_support import built_wheel, wheelhouse

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI == 0, reason="this kernel has no usable Landlock"),
    pytest.mark.xdist_group("uv-install"),
]
SID = "S-0001"

#: `patch.py ROLE PHASE REPORTS`: append to every cached copy of ai-sdlc's landlock.py under
#: ~/.cache/uv (the sandbox switched off) and of its `__init__.py` (a payload for the user's
#: next `ai-sdlc`), and plant a `core.fsmonitor` in the main checkout's `.git/config` (what the
#: next, unconfined, child did); each outcome in REPORTS/ROLE.jsonl. A detached (`setsid`,
#: double-forked) grandchild does the same; its parent waits for it on a pipe.
PATCH = r"""
import glob, json, os, sys
role, phase, reports = sys.argv[1:4]
cache = os.path.expanduser("~/.cache/uv")
marker = os.path.join(reports, "payload-ran")
records = []
def attempt(path, text):
    try:
        with open(path, "a") as fh:
            fh.write(text)
        outcome = "done"
    except OSError as exc:
        outcome = "denied: " + (exc.strerror or str(exc))
    records.append({"role": role, "path": path, "outcome": outcome})
for path in glob.glob(cache + "/**/ai_sdlc/sandbox/landlock.py", recursive=True):
    attempt(path, "\ndef restrict(*a, **k):\n    return None  # the sandbox, switched off\n")
for path in glob.glob(cache + "/**/ai_sdlc/__init__.py", recursive=True):
    attempt(path, f"\nopen({marker!r}, 'a').write('ai-sdlc')\n")
with open(os.path.join(os.path.dirname(reports), "root-path")) as fh:
    root = fh.read()
attempt(os.path.join(root, ".git", "config"), f"[core]\n\tfsmonitor = touch {marker}\n")
if role != "grandchild":
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(read_end)
        os.setsid()
        if os.fork() == 0:
            os.set_inheritable(write_end, True)
            os.execv(sys.executable, [sys.executable, __file__, "grandchild", phase, reports])
        os._exit(0)
    os.close(write_end)
    os.wait()
    with os.fdopen(read_end, "rb") as pipe:
        pipe.read()  # end of file: the grandchild has exited
with open(os.path.join(reports, role + ".jsonl"), "a") as fh:
    fh.write("".join(json.dumps(r) + "\n" for r in records))
if role == "agent":
    if phase in ("implement", "rework"):
        with open("work.txt", "a") as fh:
            fh.write(phase + "\n")
    print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
elif role == "verify":
    print("1 passed")
"""


def install_with_uv(home: Path, folder: Path) -> Path:
    """ai-sdlc installed by uv from this checkout's wheel (built once per process, as
    test_install.py installs it with pip), its cache in `home`'s ~/.cache/uv."""
    uv = str(tool_path("uv"))
    env = {**os.environ, "HOME": str(home), "UV_CACHE_DIR": str(home / ".cache" / "uv")}
    env.pop("UV_LINK_MODE", None)  # uv's default: hard links on Linux
    venv = folder / "ai-venv"
    base = os.path.realpath(sys.executable)
    wheels = wheelhouse()
    for argv in (
        [uv, "venv", "-q", "--python", base, str(venv)],
        # its dependencies from wheels downloaded once per machine: no index asked
        [
            uv,
            "pip",
            "install",
            "-q",
            "--offline",
            "--no-index",
            "--find-links",
            str(wheels),
            "--python",
            str(venv / "bin" / "python"),
            str(built_wheel()),
        ],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode and "error sending request" in done.stderr:
            pytest.skip(f"uv cannot reach its package index: {done.stderr[-300:]}")
        assert done.returncode == 0, done.stderr
    return venv


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def uv_installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, home): ai-sdlc installed by uv once for the module (no test can change it: that
    is what they check), under a HOME holding fake keys, tool folders and ai-sdlc's state."""
    folder = tmp_path_factory.mktemp("uv")
    home, _ = make_home(folder / "home")
    venv = install_with_uv(home, folder)
    installed = next(venv.glob("lib/python*/site-packages/ai_sdlc/sandbox/landlock.py"))
    assert os.stat(installed).st_nlink > 1  # uv hard-linked it from its cache
    return venv, home


@pytest.fixture
def installed(uv_installed: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(venv, home, project root, reports): ai-sdlc installed by uv, a project of the test's own
    with the patching script as its command agent and verify.test."""
    venv, home = uv_installed
    root = make_repo(tmp_path, remote=False).root
    script = tmp_path / "patch.py"
    script.write_text(PATCH)
    reports = tmp_path / "reports"
    reports.mkdir()
    (tmp_path / "root-path").write_text(str(root))
    agent = [sys.executable, str(script), "agent", "{phase}", str(reports)]
    verify = shlex.join([sys.executable, str(script), "verify", "-", str(reports)])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n"
        "git:\n  keep_worktrees: true\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    return venv, home, root, reports


def ai_sdlc(venv: Path, home: Path, root: Path, *args: str) -> tuple:
    env = cli_environment(
        {
            "HOME": str(home),
            "AI_SDLC_STATE_HOME": str(home / ".local" / "state" / "ai-sdlc"),
            "AI_SDLC_PROVIDER": "command",
        }
    )
    env.pop("UV_CACHE_DIR", None)
    done = subprocess.run(
        [str(venv / "bin" / "ai-sdlc"), "--project", str(root), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout, done.stderr


def cached_copies(home: Path) -> dict[Path, str]:
    found = home.joinpath(".cache", "uv").rglob("ai_sdlc/sandbox/landlock.py")
    return {p: digest(p) for p in found}


def test_no_child_can_patch_the_cached_copy_of_ai_sdlc_uv_linked(
    installed: tuple[Path, Path, Path, Path],
) -> None:
    venv, home, root, reports = installed
    state = home / ".local" / "state" / "ai-sdlc"
    before = cached_copies(home)
    assert before
    assert StoryStore(root).add("Add multiply").id == SID
    # Its earlier phases marked done as a user hand-edits them: the agent's attempts at the
    # implement and review calls, the verify command's at the base and after the attempt.
    start_at_implement(root, SID)
    sums = home_sums(home, state)

    try:
        code, out, err = ai_sdlc(venv, home, root, "run", SID)
        left = processes_naming(reports)
    finally:
        kill_all(processes_naming(reports))

    assert code == 0, out + err
    tried = [
        json.loads(line)
        for role in ("agent", "verify", "grandchild")
        for line in (reports / f"{role}.jsonl").read_text().splitlines()
    ]
    assert {r["role"] for r in tried} == {"agent", "verify", "grandchild"}
    assert {Path(r["path"]).name for r in tried} == {"landlock.py", "__init__.py", "config"}
    assert tried and all(r["outcome"].startswith("denied") for r in tried), tried
    assert cached_copies(home) == before
    assert left == []
    # Afterwards the user's own tools run nothing a child planted: ai-sdlc itself, and plain
    # git in the main checkout and the kept worktree; the home is what it was.
    status = ai_sdlc(venv, home, root, "status")
    assert status[0] == 0, status
    assert len(plain_git_everywhere(root)) == 2  # the main checkout and the story's worktree
    assert not (reports / "payload-ran").exists()
    assert home_sums(home, state) == sums
    fm = assert_counted_honestly(root, SID)
    assert (fm["status"], fm.get("total_recovery_attempts", 0)) == ("done", 0), fm


def test_a_writable_root_holding_the_installations_hard_links_is_refused(
    installed: tuple[Path, Path, Path, Path],
) -> None:
    """The user widened the sandbox to ~/.cache (uv's cache is there): the run refuses before
    any child runs, naming a hard-linked file and what to do; nothing is counted."""
    venv, home, root, reports = installed
    before = cached_copies(home)
    wide = [str(reports), str(home / ".cache")]
    # Widened as a user does: in the project's reviewed list (the environment may not widen it).
    config = ai_sdlc(venv, home, root, "config", "sandbox.writable", json.dumps(wide))
    assert config[0] == 0, config
    assert StoryStore(root).add("Add multiply").id == SID

    code, out, err = ai_sdlc(venv, home, root, "run", SID)

    assert code == 3, out + err
    message = " ".join(err.split())
    assert "a hard link to a file outside the sandbox's writable set" in message
    assert f"inside the writable folder {home / '.cache'}" in message
    assert "hint: replace it with a copy" in message
    assert "Traceback" not in err
    assert not any(reports.iterdir())  # no child ran
    assert cached_copies(home) == before
    assert StoryStore(root).get(SID).frontmatter.get("total_recovery_attempts", 0) == 0
