"""The proof every case of issue 32 owes, built once: a throwaway HOME holding fake keys and
real-looking tool folders, its checksum, the user's plain git everywhere a user runs it, the
count read back from the story and its ledger, a TCP listener for what a child sends out, and
the processes of a run still alive.

`tests/support/fakes/second_wall.py` is the hostile child these helpers judge; docs/sandbox.md
("Proof, case by case") says which test proves what.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ai_sdlc.store import StoryStore

#: The user's keys and tool folders, as a user has them (every key fake).
HOME_FILES = {
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY----- fake-ssh-key-7f3a\n",
    ".ssh/config": "Host *\n  IdentityFile ~/.ssh/id_ed25519\n",
    ".aws/credentials": "[default]\naws_secret_access_key = fake-aws-file-key-91c2\n",
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: fake-gh-file-token-44d0\n",
    ".netrc": "machine example.com login me password fake-netrc-3d1f\n",
    ".gnupg/private-keys-v1.d/key.key": "fake-gpg-key\n",
    ".bashrc": "export PS1='$ '\n",
    ".claude/settings.json": '{"model": "opus"}\n',
    ".claude/.credentials.json": '{"claudeAiOauth": {"accessToken": "sk-ant-oat-FAKE"}}\n',
    ".claude.json": '{"hasCompletedOnboarding": true}\n',
    ".codex/config.toml": 'model = "gpt-5"\n',
    ".codex/auth.json": '{"OPENAI_API_KEY": "sk-FAKE-codex"}\n',
    ".gemini/settings.json": '{"theme": "Default"}\n',
    ".gemini/oauth_creds.json": '{"access_token": "ya29.FAKE"}\n',
    ".npm/_npx/0123abcd/node_modules/semver/bin/semver.js": "// the real semver\n",
    ".cache/pip/http-v2/entry": "cached\n",
    ".cache/pre-commit/README": "pre-commit cache\n",
    ".cache/uv/archive-v0/x/ai_sdlc/sandbox/landlock.py": "def restrict(): ...\n",
    ".config/pip/pip.conf": "[global]\n",
}
#: Secrets in ai-sdlc's own environment (the agent's provider key is OPENAI_API_KEY).
SECRET_ENV = {
    "GH_TOKEN": "fake-gh-env-token-5b1e",
    "AWS_SECRET_ACCESS_KEY": "fake-aws-env-key-0c9d",
    "OPENAI_API_KEY": "fake-openai-env-key-a7e4",
}
#: What no child may hold: every key above but the agent's own provider key.
STOLEN_MARKS = (
    "fake-ssh-key-7f3a",
    "fake-aws-file-key-91c2",
    "fake-gh-file-token-44d0",
    "fake-netrc-3d1f",
    "fake-gh-env-token-5b1e",
    "fake-aws-env-key-0c9d",
)


def make_home(folder: Path) -> tuple[Path, Path]:
    """A throwaway HOME with `HOME_FILES`; (home, ai-sdlc's state folder inside it)."""
    for rel, text in HOME_FILES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    state = folder / ".local" / "state" / "ai-sdlc"
    state.mkdir(parents=True)
    return folder, state


def home_sums(home: Path, state: Path) -> dict[str, str]:
    """A checksum of every file, folder and link under `home` but ai-sdlc's own state."""
    sums: dict[str, str] = {}
    for folder, dirs, files in os.walk(home):
        dirs[:] = [d for d in dirs if Path(folder, d) != state]
        sums[os.path.relpath(folder, home) + "/"] = oct(os.stat(folder).st_mode)
        for name in files:
            path = Path(folder, name)
            rel = str(path.relative_to(home))
            if path.is_symlink():
                sums[rel] = "-> " + os.readlink(path)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                sums[rel] = f"{digest} {oct(path.stat().st_mode)}"
    return sums


def users_git(folder: Path, *args: str) -> None:
    """The user's own plain git: no hardening option, the environment as it is."""
    subprocess.run(["git", *args], cwd=folder, capture_output=True, check=False, timeout=60)


def users_git_on_a_terminal(folder: Path, *args: str) -> None:
    """The same on a terminal, where git starts a pager (`cat`, unless a config git reads
    names another)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "PAGER": "cat"},
        )
        os.close(slave)
        slave = -1
        with contextlib.suppress(OSError):  # EIO once git and its pager are gone
            while os.read(master, 65536):
                pass
        proc.wait(timeout=60)
    finally:
        os.close(master)
        if slave != -1:
            os.close(slave)


def worktrees(root: Path) -> list[Path]:
    """Every story worktree of `root`, parked ones (`.pool/`) included."""
    folder = root / ".ai-sdlc" / "worktrees"
    found = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    pool = folder / ".pool"
    return [p for p in found if p != pool] + worktrees_in(pool)


def worktrees_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def plain_git_everywhere(root: Path, nested: tuple[str, ...] = ("sub", "nest")) -> list[Path]:
    """`git status`, `git diff` and `git log` (piped and on a terminal) in the main checkout,
    every story worktree (with a change of the user's, so `git diff` shows something) and
    any folder a child made a nested repository of; the folders it ran in."""
    folders = [root]
    for tree in worktrees(root):
        readme = tree / "README.md"
        if readme.exists():
            readme.write_text(readme.read_text() + "\nthe user's own change\n")
        folders += [tree] + [tree / n for n in nested if (tree / n).is_dir()]
    for folder in folders:
        for args in (("status",), ("diff",), ("log", "-1"), ("log", "-p")):
            users_git(folder, *args)
        for args in (("diff",), ("log",)):
            users_git_on_a_terminal(folder, *args)
    return folders


def frontmatter(root: Path, sid: str) -> dict[str, Any]:
    """The story's frontmatter as stored."""
    return dict(StoryStore(root).get(sid).frontmatter)


def ledger_totals(root: Path, sid: str) -> list[int]:
    path = root / ".ai-sdlc" / "state" / "ledger" / f"{sid}.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [int(line["total"]) for line in lines]


def failed_phases(root: Path, sid: str) -> list[dict[str, Any]]:
    """The story's phase events that did not pass (each a counted attempt)."""
    path = root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ended = [e for e in events if e.get("action") == "phase"]
    return [e for e in ended if e.get("outcome") not in ("completed", "passed", "approved")]


def assert_counted_honestly(root: Path, sid: str) -> dict[str, Any]:
    """The count is never lowered (story and ledger agree, the ledger only grows) and a
    blocked story is blocked by counted attempts; the frontmatter."""
    fm = frontmatter(root, sid)
    totals = ledger_totals(root, sid)
    assert totals == sorted(totals), totals
    total = int(fm.get("total_recovery_attempts") or 0)
    assert total == (totals[-1] if totals else 0), (fm, totals)
    if fm.get("status") == "blocked":
        assert total > 0, fm
    return fm


def control_characters(text: str) -> list[str]:
    """Terminal control characters in `text` (newline and tab are text)."""
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def processes_naming(folder: Path) -> list[int]:
    """Live processes (but this one) whose command line, environment or working folder
    names `folder`."""
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


def kill_all(pids: list[int]) -> None:
    """SIGKILL each of `pids` that is still there (a test's clean-up)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class Listener:
    """A TCP server on 127.0.0.1 that keeps every byte any connection sends it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                chunks = []
                while data := conn.recv(65536):
                    chunks.append(data)
                self.received.append(b"".join(chunks))

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def listening() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()


def mount_namespace_here() -> bool:
    """A sandboxed child gets a PID and mount namespace of its own on this machine (then the
    worktree's `.git` pointer is read-only to it); else only the check after it holds."""
    import subprocess
    import sys

    from ai_sdlc.fsutil import remove_tree
    from ai_sdlc.sandbox.backend import LandlockBackend
    from ai_sdlc.sandbox.policy import SandboxPolicy

    code = "import os; print(os.getpid())"
    launch = SandboxPolicy(LandlockBackend(), ()).launch(
        [sys.executable, "-I", "-S", "-c", code], env={}
    )
    try:
        done = subprocess.run(launch.argv, env=launch.env, capture_output=True, check=False)
    finally:
        remove_tree(launch.tmpdir)  # the child's temp folder: the launch's caller removes it
    return done.stdout.split() == [b"2"]
