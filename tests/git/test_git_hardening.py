"""Issue 22, cases 3 and 4, end to end through the real CLI and without any sandbox: nothing an
agent leaves in the repository or the worktree runs inside ai-sdlc's own git (hooks, a
`core.hooksPath`, a `core.fsmonitor`, a rewritten worktree `.git` file), and a commit the agent
made itself is checked like ai-sdlc's own before anything is adopted or pushed.

The agent is `tests/support/fakes/hostile_git_agent.py` behind the `command` provider; every
program it
plants appends to a marker file, and the tests that look for markers also show with a plain
`git` that the planted program does run when nothing stops it (so no marker means something).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.config import SCHEMA
from ai_sdlc.errors import ExitCode
from ai_sdlc.git import incoming, staging
from ai_sdlc.git import run as run_git
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.workspace import GitWorkspace
from tests.conftest import run_cli
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.git_support import Repo, gh_log, git, git_env, make_repo, prepared, repo
from tests.support.paths import FAKES

__all__ = ["gh_log", "git_env", "repo"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(os.name == "nt", reason="the planted programs are POSIX shell scripts"),
]

AGENT = FAKES / "hostile_git_agent.py"
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
            # These tests look into done stories' worktrees (removed by default once done).
            "AI_SDLC_GIT__KEEP_WORKTREES": "true",
        }
        self.sids = [self.repo.story(t) for t in titles]
        agent = [sys.executable, str(AGENT), mode, "{phase}", str(self.state)]
        agent += ["--prompt-file", "{prompt_file}"]
        check = json.dumps(shlex.join([sys.executable, "-c", "pass"]))
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
            f"verify:\n  build: {check}\n  test: {check}\n"
            # These tests show what ai-sdlc's git holds off on its own: the agent must be able
            # to plant what it plants, so no sandbox (where there is one) stops it first.
            + ("sandbox:\n  enabled: false\n" if "sandbox.enabled" in SCHEMA else "")
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
    # The attempt that rewrote it was counted (issue 32), the next one passed.
    assert "total_recovery_attempts: 1\n" in project.frontmatter(sid)
    (failed,) = [e for e in project.events(sid) if e.get("outcome") == "git_metadata_changed"]
    assert "the worktree's .git pointer was rewritten" in str(failed["feedback"]), failed
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
    # Left as the agent wrote it: `ai-sdlc worktrees` still reads the real repository...
    (worktree / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    listed = run_cli(project.root, "worktrees", "--json", env=project.env)
    assert listed.returncode == 0, listed.output
    (entry,) = json.loads(listed.stdout)["worktrees"]
    assert (entry["state"], entry["ahead"]) == ("clean", 1), entry
    assert project.marks() == {}, project.marks()
    # ... while a plain `git status` in the worktree runs the agent's program.
    git(worktree, "status", "--short")
    assert "fsmonitor" in project.marks()


def killed_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """`env` for a run the agent SIGKILLs: its temp folders (it cannot remove them) go in the
    test's folder."""
    temp = tmp_path / "killed-tmp"
    temp.mkdir(exist_ok=True)
    return {**env, "TMPDIR": str(temp)}


def test_an_agents_own_commit_with_a_secret_is_never_adopted_or_pushed(tmp_path: Path) -> None:
    project = Project(tmp_path, "secret")
    sid = project.sids[0]
    env = {**project.env, "HOSTILE_STORY": sid}

    killed = run_cli(project.root, "run", sid, env=killed_env(env, tmp_path), subprocess=True)
    assert killed.returncode == -9, killed.output
    worktree = next((project.root / ".ai-sdlc" / "worktrees").glob(f"{sid}-*"))
    branch = f"ai-sdlc/{worktree.name}"
    agent_commit = git(project.root, *SAFE, "rev-parse", branch).strip()
    assert ".env" in git(project.root, *SAFE, "show", "--name-only", "--format=", agent_commit)

    result = run_cli(project.root, "run", sid, env=env)

    assert result.returncode == ExitCode.BLOCKED, result.output
    said = result.output
    assert f"commit {agent_commit[:12]} adds .env (secret file name)" in said, said
    assert "adds settings.py (credential-like content)" in said, said
    assert "nothing was pushed" in said
    reset = f"git -C {worktree} reset --hard {agent_commit[:12]}^"
    move = f"git -C {worktree} update-ref refs/ai-sdlc/checkpoints/{sid} HEAD"
    assert reset in said and move in said and f"ai-sdlc unblock {sid}" in said, said
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
    assert ".env (secret file name)" in again.output
    assert "refs/heads/ai-sdlc/" not in project.remote_branches()
    assert project.pr_creates() == 0

    # Doing what the hint says lets the story go on, and what is pushed holds no secret.
    git(worktree, *SAFE, "reset", "-q", "--hard", f"{agent_commit}^")
    git(worktree, *SAFE, "update-ref", f"refs/ai-sdlc/checkpoints/{sid}", "HEAD")
    assert run_cli(project.root, "unblock", sid, env=env).returncode == 0
    done = run_cli(project.root, "run", sid, env=env)
    assert done.returncode == 0, done.output
    assert "status: done" in project.frontmatter(sid)
    assert f"refs/heads/{branch}" in project.remote_branches()
    assert project.pr_creates() == 1
    pushed = git(project.origin, "log", "--name-only", "--format=", f"main..{branch}").split()
    assert "implemented.txt" in pushed and ".env" not in pushed and "settings.py" not in pushed


def test_an_agents_own_clean_commit_is_adopted_and_published(tmp_path: Path) -> None:
    """The check refuses what breaks the rules, not agent commits as such."""
    project = Project(tmp_path, "clean")
    sid = project.sids[0]
    env = {**project.env, "HOSTILE_STORY": sid}

    killed = run_cli(project.root, "run", sid, env=killed_env(env, tmp_path), subprocess=True)
    assert killed.returncode == -9, killed.output
    result = run_cli(project.root, "run", sid, env=env)

    assert result.returncode == 0, result.output
    assert "status: done" in project.frontmatter(sid)
    worktree = next((project.root / ".ai-sdlc" / "worktrees").glob(f"{sid}-*"))
    branch = f"ai-sdlc/{worktree.name}"
    assert f"refs/heads/{branch}" in project.remote_branches()
    assert project.pr_creates() == 1
    pushed = git(project.root, *SAFE, "log", "--name-only", "--format=", f"main..{branch}")
    assert "feature.txt" in pushed.split()


# --- the rules, commit by commit (real git, `incoming.check`) ------------------------------------


def _commit(repo: Repo, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        path = repo.root / name
        if text is None:
            git(repo.root, "rm", "-q", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(repo.root, "add", "-f", name)
    git(repo.root, "commit", "-q", "--no-verify", "-m", message)
    return git(repo.root, "rev-parse", "HEAD").strip()


def test_every_commit_in_the_range_is_checked_not_only_the_tip(repo: Repo) -> None:
    key = "AKIA" + "Z" * 16
    start = git(repo.root, "rev-parse", "HEAD").strip()
    added = _commit(repo, {".env": f"KEY={key}\n", "ok.txt": "fine\n"}, "add")
    _commit(repo, {".env": None}, "remove it again")  # still in the history a push sends
    git(repo.root, "switch", "-q", "-c", "side", start)
    side = _commit(repo, {"lib/conf.py": f"KEY = '{key}'\n"}, "side")
    git(repo.root, "switch", "-q", "main")
    git(repo.root, "merge", "-q", "--no-edit", "--no-verify", "side")
    state = _commit(repo, {".ai-sdlc/config.yaml": "limits: {}\n"}, "state")
    scratch = _commit(repo, {"pkg/__pycache__/m.cpython-311.pyc": "x"}, "bytecode")
    tip = _commit(repo, {".env.example": "KEY=\n", "docs.md": "words\n"}, "fine")

    found = {(f.commit, f.path, f.reason) for f in incoming.check(repo.root, start, tip)}

    assert found == {
        (added, ".env", "secret file name"),
        (side, "lib/conf.py", "credential-like content"),
        (state, ".ai-sdlc/config.yaml", "ai-sdlc's own folder, never committed"),
        (scratch, "pkg/__pycache__/m.cpython-311.pyc", "scratch file, never committed"),
    }
    assert incoming.check(repo.root, tip, tip) == []


def test_content_is_read_up_to_the_scan_limit_blob_after_blob(repo: Repo) -> None:
    """A blob larger than the limit is read no further (as files are), and the next blob in
    the same `cat-file` stream is still read whole."""
    key = "AKIA" + "Y" * 16
    start = git(repo.root, "rev-parse", "HEAD").strip()
    big = "a" * (staging.CONTENT_SCAN_LIMIT + 10) + f"\nKEY={key}\n"
    _commit(repo, {"big.txt": big}, "big")
    tip = _commit(repo, {"small.txt": f"{key}\n", "plain.txt": "nothing\n"}, "small")

    found = [(f.path, f.reason) for f in incoming.check(repo.root, start, tip)]

    assert found == [("small.txt", "credential-like content")]


def test_gits_started_by_other_programs_we_run_get_the_same_settings(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gh pr create` runs `git status` in the checkout: the settings reach it through the
    environment, after any `GIT_CONFIG_COUNT` the user set (kept)."""
    git(repo.root, "config", "core.hooksPath", "/tmp/agent-hooks")
    git(repo.root, "config", "core.fsmonitor", "/tmp/agent-fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.name")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "Env User")
    script = (
        "import subprocess\n"
        "for key in ('core.hooksPath', 'core.fsmonitor', 'protocol.ext.allow', 'user.name'):\n"
        "    done = subprocess.run(['git', 'config', '--get', key], capture_output=True, "
        "text=True)\n"
        "    print(key, done.stdout.strip())\n"
    )

    shown = run_git.run((sys.executable, "-c", script), repo.root).stdout.splitlines()

    assert shown == [
        f"core.hooksPath {os.devnull}",
        "core.fsmonitor false",
        "protocol.ext.allow never",
        "user.name Env User",
    ]
    # And git itself, run by us, says the same.
    assert run_git.git(repo.root, "config", "--get", "core.hooksPath").stdout.strip() == (
        os.devnull
    )


def test_a_failed_attempts_patch_leaves_out_secrets_the_agent_committed(repo: Repo) -> None:
    """The patch of a failed attempt covers the agent's own commits too (it is written to
    `.ai-sdlc/`): a secret file they add is left out like an uncommitted one."""
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    password = "hunter2" + "-plain-words"  # no token shape: only its file name gives it away
    (path / ".env").write_text(f"DB_PASSWORD={password}\n")
    (path / "app.py").write_text("print('v2')\n")
    git(path, "add", ".env", "app.py")
    git(path, "commit", "-q", "-m", "agent's own commit")
    (path / "notes.md").write_text("uncommitted\n")

    record = ws.attempt_failed(story, path, attempt=1)

    assert record.patch is not None and password not in record.patch
    assert "app.py" in record.patch and "notes.md" in record.patch
    assert ".env" not in record.patch
    assert "left out as secrets: .env" in record.summary


@pytest.mark.parametrize("damage", ["deleted", "rewritten", "symlinked"])
def test_a_worktree_whose_git_file_an_agent_damaged_is_resumed(
    repo: Repo, tmp_path: Path, damage: str
) -> None:
    sid = repo.story()
    story, path = prepared(repo, GitWorkspace(repo.root), sid)
    (path / "work.txt").write_text("an earlier run's work\n")
    dot_git = path / ".git"
    expected = dot_git.read_text()
    dot_git.unlink()
    if damage == "rewritten":
        dot_git.write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    elif damage == "symlinked":
        (tmp_path / "fake").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
        dot_git.symlink_to(tmp_path / "fake")

    prep = GitWorkspace(repo.root).prepare(story)  # a new run

    assert prep.path == path
    assert prep.notice and prep.notice.startswith("resumed worktree"), prep.notice
    assert not dot_git.is_symlink() and dot_git.read_text() == expected
    assert (path / "work.txt").exists()


def test_base_commits_the_local_branch_lost_are_not_taken_for_the_storys(
    repo: Repo, gh_log: Path
) -> None:
    """The user commits a story file (under `.ai-sdlc/`, which no story commit may add) and a
    test certificate to `main`, pushes, a story starts there, then the local `main` is rewound:
    those commits are still the base's (on `origin/main`), not the story's."""
    (repo.root / ".ai-sdlc" / "notes.md").write_text("the team's notes\n")
    (repo.root / "fixture.pem").write_text("not a real certificate\n")
    git(repo.root, "add", "-f", ".ai-sdlc/notes.md", "fixture.pem")
    git(repo.root, "commit", "-q", "-m", "notes and a fixture")
    git(repo.root, "push", "-q", "origin", "main")
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "hello.py").write_text("print('hello')\n")
    assert ws.attempt_passed(story, path, attempt=1).commit
    git(repo.root, "reset", "-q", "--keep", "HEAD~1")

    again = GitWorkspace(repo.root)  # a new run: everything beyond the base is checked
    story, path = prepared(repo, again, sid)
    done = again.finish(story, path)

    assert done.outcome == "opened", done.message
    assert [c[:2] for c in gh_calls(gh_log)].count(["pr", "create"]) == 1


def test_a_secret_in_an_agents_commit_message_is_refused_too(repo: Repo) -> None:
    start = git(repo.root, "rev-parse", "HEAD").strip()
    (repo.root / "ok.txt").write_text("fine\n")
    git(repo.root, "add", "ok.txt")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    git(repo.root, "commit", "-q", "-m", f"use {token} for the API")
    tip = git(repo.root, "rev-parse", "HEAD").strip()

    (found,) = incoming.check(repo.root, start, tip)

    assert str(found) == f"commit {tip[:12]} message (credential-like content)"
    assert token not in str(found)


def test_a_git_lfs_repository_gets_its_large_files_pushed_without_the_hook(
    repo: Repo, gh_log: Path, tmp_path: Path
) -> None:
    """Hooks are off for our push, Git LFS's `pre-push` hook among them: its work is asked of
    git-lfs directly, before the push (a stand-in `git-lfs` on PATH records it)."""
    log = tmp_path / "lfs.log"
    stand_in = tmp_path / "bin" / "git-lfs"
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n')
    stand_in.chmod(0o755)
    sid = repo.story()
    ws = GitWorkspace(repo.root, GitSettings(keep_worktrees=True))  # finished twice
    story, path = prepared(repo, ws, sid)
    (path / "hello.py").write_text("print('hello')\n")
    assert ws.attempt_passed(story, path, attempt=1).commit
    assert ws.finish(story, path).outcome == "opened"
    assert not log.exists()  # not an LFS repository: git-lfs is not asked

    (repo.root / ".git" / "lfs").mkdir()
    (path / "more.py").write_text("print('more')\n")
    assert ws.attempt_passed(story, path, attempt=2).commit
    assert ws.finish(story, path).outcome == "reused"

    assert log.read_text() == f"push origin refs/heads/ai-sdlc/{sid}-add-a-greeting\n"
