"""Real git repositories for the repository-workflow tests: a project with a first commit,
pushed to a local bare repository as `origin`, and a snapshot of the user's checkout."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.git.workspace import GitWorkspace
from ai_sdlc.store import StoryStore
from ai_sdlc.store.story import Story
from tests.conftest import allow_unverified
from tests.support.folders import process_folder


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
    config.write_text(_GITCONFIG)
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


#: What `git_env` gives every test: our own identity, no user or system config.
_GITCONFIG = (
    "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
)
#: Template repositories, built once per test process: {remote: folder holding proj[/origin.git]}
_TEMPLATES: dict[bool, Path] = {}


def make_repo(tmp_path: Path, *, remote: bool = True) -> Repo:
    """A project with a first commit (and a bare `origin` it is pushed to), copied from a
    template this process built once: a fresh init, commit and push costs ~0.1 s of git
    processes, a copy a few milliseconds. The copy is an ordinary repository of its own."""
    template = _TEMPLATES.get(remote)
    if template is None:
        template = _TEMPLATES[remote] = _build_template(remote)
    root = tmp_path / "proj"
    shutil.copytree(template / "proj", root, symlinks=True)
    origin = None
    if remote:
        origin = tmp_path / "origin.git"
        shutil.copytree(template / "origin.git", origin, symlinks=True)
        git(root, "remote", "set-url", "origin", str(origin))
    # The copied files have new inodes: refresh the index's stat data now, so that no later
    # `git status` rewrites the index behind a test that compares its bytes.
    git(root, "update-index", "-q", "--refresh")
    return Repo(root, origin)


@contextlib.contextmanager
def own_git_config(folder: Path) -> Iterator[None]:
    """`git_env` for code outside a test (a template built once per process): our identity
    in `folder/gitconfig`, no user or system config; the environment restored after."""
    config = folder / "gitconfig"
    config.write_text(_GITCONFIG)
    saved = dict(os.environ)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        os.environ.pop(name, None)
    os.environ.update({"GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _build_template(remote: bool) -> Path:
    folder = process_folder("ai-sdlc-test-repo-")
    with own_git_config(folder):
        _init_repo(folder, remote=remote)
    return folder


def _init_repo(tmp_path: Path, *, remote: bool) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# project\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    StoryStore(root).init()
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    # The project's config, not committed yet (a committed `.ai-sdlc/` makes every story
    # worktree sparse): a test that commits its own config commits it as a user would.
    allow_unverified(root)
    if remote:
        origin = tmp_path / "origin.git"
        git(tmp_path, "init", "-q", "--bare", str(origin))
        git(root, "remote", "add", "origin", str(origin))
        git(root, "push", "-q", "-u", "origin", "main")


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
    from tests.support.fakes.gh_support import install_gh

    bin_dir = tmp_path / "bin"
    install_gh(bin_dir)
    log = tmp_path / "gh.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GH_LOG", str(log))
    return log


def story_of(repo: Repo, story_id: str) -> Story:
    """The story as the store reads it now."""
    return StoryStore(repo.root).get(story_id)


def record(repo: Repo, story_id: str, fields: dict[str, Any]) -> Story:
    """What the runner does with `Prepared.fields`: the story with them recorded (in memory;
    writing story files is the store's and the runner's business)."""
    story = story_of(repo, story_id)
    return Story(story.id, story.path, {**dict(story.frontmatter), **fields})


def prepared(repo: Repo, ws: GitWorkspace, story_id: str) -> tuple[Story, Path]:
    """`ws.prepare` the story: the story with what it recorded, and its worktree."""
    prep = ws.prepare(story_of(repo, story_id))
    return record(repo, story_id, prep.fields), prep.path
