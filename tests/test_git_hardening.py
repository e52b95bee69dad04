"""Issue 22, cases 3 and 4, end to end through the real CLI and without any sandbox: nothing an
agent leaves in the repository or the worktree runs inside ai-sdlc's own git (hooks, a
`core.hooksPath`, a `core.fsmonitor`, a rewritten worktree `.git` file), and a commit the agent
made itself is checked like ai-sdlc's own before anything is adopted or pushed.

The agent is `tests/fakes/hostile_git_agent.py` behind the `command` provider; every program it
plants appends to a marker file, and each test also shows with a plain `git` that the planted
program does run when nothing stops it (so a missing marker means something).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.errors import ExitCode
from tests.conftest import run_cli
from tests.fakes.gh_support import gh_calls, install_gh
from tests.git_support import Repo, git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(os.name == "nt", reason="the planted programs are POSIX shell scripts"),
]

AGENT = Path(__file__).parent / "fakes" / "hostile_git_agent.py"
#: Options that keep the test's own checks from running what the agent planted.
SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class Project:
    def __init__(self, tmp_path: Path, mode: str, titles: tuple[str, ...] = ("Add a greeting",)):
        self.repo: Repo = make_repo(tmp_path)
        self.root = self.repo.root
        assert self.repo.origin is not None
        self.origin = self.repo.origin
        self.state = tmp_path / "agent-state"
        self.markers = self.state / "markers"
        bin_dir = tmp_path / "bin"
        install_gh(bin_dir)
        self.gh_log = tmp_path / "gh.log"
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "FAKE_GH_LOG": str(self.gh_log),
            "AI_SDLC_PROVIDER": "command",
        }
        self.sids = [self.repo.story(t) for t in titles]
        agent = [sys.executable, str(AGENT), mode, "{phase}", str(self.state)]
        agent += ["--prompt-file", "{prompt_file}"]
        check = json.dumps(shlex.join([sys.executable, "-c", "pass"]))
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
            f"verify:\n  build: {check}\n  test: {check}\n"
        )

    def marks(self) -> dict[str, str]:
        if not self.markers.is_dir():
            return {}
        return {p.name: p.read_text() for p in sorted(self.markers.iterdir())}

    def frontmatter(self, sid: str) -> str:
        return (self.root / ".ai-sdlc" / "stories" / sid / "story.md").read_text()

    def remote_branches(self) -> str:
        return git(self.root, *SAFE, "ls-remote", "--heads", str(self.origin))

    def pr_creates(self) -> int:
        return [c[:2] for c in gh_calls(self.gh_log)].count(["pr", "create"])

    def events(self, sid: str) -> list[dict[str, object]]:
        log = self.root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_hooks_hookspath_and_fsmonitor_planted_by_the_agent_never_run(tmp_path: Path) -> None:
    project = Project(tmp_path, "hooks", ("Add a greeting", "Add a farewell"))

    for sid in project.sids:  # the second story's `worktree add` comes after the planting
        result = run_cli(project.root, "run", sid, env=project.env)
        assert result.returncode == 0, result.output
        assert "status: done" in project.frontmatter(sid)

    common = project.root / ".git"
    assert (common / "hooks" / "post-checkout").exists()  # the agent did plant them
    config = git(project.root, "config", "--get", "core.hooksPath").strip()
    assert config == str(project.state / "hookdir")
    assert project.marks() == {}, project.marks()
    # Both branches pushed, both pull requests opened: a push with hooks off still pushes.
    heads = project.remote_branches()
    assert heads.count("refs/heads/ai-sdlc/") == 2, heads
    assert project.pr_creates() == 2
    # What the planted programs would have done to a plain git: they run.
    git(project.root, "worktree", "add", "-q", str(tmp_path / "plain"), "-b", "plain")
    assert "hooksPath-post-checkout" in project.marks()


def test_a_rewritten_worktree_git_file_steers_nothing(tmp_path: Path) -> None:
    project = Project(tmp_path, "gitfile")
    sid = project.sids[0]

    result = run_cli(project.root, "run", sid, env=project.env)

    assert result.returncode == 0, result.output
    assert "status: done" in project.frontmatter(sid)
    worktree = next((project.root / ".ai-sdlc" / "worktrees").glob(f"{sid}-*"))
    evil = project.state / "evil"
    assert (evil / ".git" / "config").exists()  # the agent made its git folder
    assert project.marks() == {}, project.marks()
    # ai-sdlc put the worktree's `.git` file back for whatever runs git there next.
    real = (project.root / ".git" / "worktrees" / worktree.name).resolve()
    assert (worktree / ".git").read_text() == f"gitdir: {real}\n"
    # ai-sdlc committed the agent's work to the story branch of the real repository, and
    # pushed that branch; the agent's own git folder got nothing.
    branch = f"ai-sdlc/{worktree.name}"
    files = git(project.root, *SAFE, "show", "--name-only", "--format=", branch).split()
    assert files == ["implemented.txt"]
    assert f"refs/heads/{branch}" in project.remote_branches()
    assert project.pr_creates() == 1
    assert not git(evil, *SAFE, "for-each-ref").strip()  # no commit, no branch there
    # Left as the agent wrote it, a plain `git status` in the worktree runs its program.
    (worktree / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    git(worktree, "status", "--short")
    assert "fsmonitor" in project.marks()


def test_an_agents_own_commit_with_a_secret_is_never_adopted_or_pushed(tmp_path: Path) -> None:
    project = Project(tmp_path, "secret")
    sid = project.sids[0]
    env = {**project.env, "HOSTILE_STORY": sid}

    killed = run_cli(project.root, "run", sid, env=env, subprocess=True)  # the agent kills it
    assert killed.returncode == -9, killed.output
    worktree = next((project.root / ".ai-sdlc" / "worktrees").glob(f"{sid}-*"))
    branch = f"ai-sdlc/{worktree.name}"
    agent_commit = git(project.root, *SAFE, "rev-parse", branch).strip()
    assert ".env" in git(project.root, *SAFE, "show", "--name-only", "--format=", agent_commit)

    result = run_cli(project.root, "run", sid, env=env)

    assert result.returncode == ExitCode.BLOCKED, result.output
    said = result.stderr
    assert f"commit {agent_commit[:12]} adds .env (secret file name)" in said, said
    assert "adds settings.py (credential-like content)" in said, said
    assert "nothing was pushed" in said
    assert "AKIA" not in said and "wJalr" not in said  # named, never shown
    assert "status: blocked" in project.frontmatter(sid)
    blocked = [e for e in project.events(sid) if e["action"] == "blocked"]
    assert blocked and ".env" in str(blocked[-1]["reason"])
    assert "refs/heads/ai-sdlc/" not in project.remote_branches()
    assert project.pr_creates() == 0
    # The branch still holds the agent's commit for a human to look at: nothing was adopted
    # on top of it.
    assert git(project.root, *SAFE, "rev-parse", branch).strip() == agent_commit

    # `ai-sdlc pr` checks the branch the same way.
    again = run_cli(project.root, "pr", sid, env=env)
    assert again.returncode != 0
    assert ".env (secret file name)" in again.stderr
    assert "refs/heads/ai-sdlc/" not in project.remote_branches()
    assert project.pr_creates() == 0
