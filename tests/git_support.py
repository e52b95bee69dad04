"""Real git repositories for the repository-workflow tests: a project with a first commit,
pushed to a local bare repository as `origin`, and a snapshot of the user's checkout."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, input=input, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own git identity and no user/system config leaking into the tests."""
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


@dataclass
class Repo:
    root: Path
    origin: Path | None

    def story(self, title: str = "Add a greeting") -> str:
        return StoryStore(self.root).add(title).id

    def commit_all(self, message: str) -> None:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", message)


def make_repo(tmp_path: Path, *, remote: bool = True) -> Repo:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# project\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    StoryStore(root).init()
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    origin = None
    if remote:
        origin = tmp_path / "origin.git"
        git(tmp_path, "init", "-q", "--bare", str(origin))
        git(root, "remote", "add", "origin", str(origin))
        git(root, "push", "-q", "-u", "origin", "main")
    return Repo(root, origin)


def checkout_snapshot(root: Path) -> dict[str, str]:
    """What the user sees of their checkout: branch, HEAD, index bytes, status, and the bytes
    of every file outside `.ai-sdlc/`."""
    gitdir = Path(git(root, "rev-parse", "--absolute-git-dir").strip())
    snap = {
        "branch": git(root, "symbolic-ref", "HEAD"),
        "head": git(root, "rev-parse", "HEAD"),
        "index": hashlib.sha256((gitdir / "index").read_bytes()).hexdigest(),
        "status": git(root, "status", "--porcelain", "--untracked-files=all"),
    }
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".ai-sdlc")]
        for name in filenames:
            path = Path(dirpath) / name
            snap[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return snap


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A project with a first commit and a bare `origin`."""
    return make_repo(tmp_path)


@pytest.fixture
def gh_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in `gh` on PATH; returns the file it logs every call to."""
    from tests.fakes.gh_support import install_gh

    bin_dir = tmp_path / "bin"
    install_gh(bin_dir)
    log = tmp_path / "gh.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GH_LOG", str(log))
    return log
