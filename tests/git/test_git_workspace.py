"""GitWorkspace against real git: a project pushed to a local bare `origin`, the stand-in `gh`
on PATH. Nothing of ours is mocked."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.git.run import TransientRemoteError
from ai_sdlc.git.seam import InPlace
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.staging import SecretsInWorkError
from ai_sdlc.git.workspace import GitWorkspace, PublishError, select_workspace
from tests.support.fakes.gh_support import gh_calls
from tests.support.git_support import (
    Repo,
    checkout_snapshot,
    gh_log,
    git,
    git_env,
    make_repo,
    prepared,
    record,
    repo,
    story_of,
)

__all__ = ["gh_log", "git_env", "repo"]

pytestmark = pytest.mark.usefixtures("git_env")


def committed_files(path: Path, rev: str = "HEAD") -> list[str]:
    return sorted(git(path, "show", "--name-only", "--format=", rev).split())


def test_prepare_creates_worktree_on_story_branch_and_leaves_the_checkout_alone(
    repo: Repo,
) -> None:
    sid = repo.story("Add a greeting")
    (repo.root / "notes.txt").write_text("user's uncommitted work\n")
    (repo.root / "README.md").write_text("# project\nedited by the user\n")
    git(repo.root, "add", "README.md")
    (repo.root / "README.md").write_text("# project\nedited again, unstaged\n")
    before = checkout_snapshot(repo.root)

    ws = GitWorkspace(repo.root)
    prep = ws.prepare(story_of(repo, sid))

    assert prep.fields == {
        "branch": f"ai-sdlc/{sid}-add-a-greeting",
        "worktree_path": f".ai-sdlc/worktrees/{sid}-add-a-greeting",
    }
    assert prep.path == repo.root / ".ai-sdlc" / "worktrees" / f"{sid}-add-a-greeting"
    assert prep.notice and "created worktree" in prep.notice
    assert git(prep.path, "symbolic-ref", "--short", "HEAD").strip() == prep.fields["branch"]
    assert (prep.path / "README.md").read_text() == "# project\n"  # from the base, not the user's
    assert not (prep.path / "notes.txt").exists()
    assert checkout_snapshot(repo.root) == before


def test_prepare_resumes_then_recreates_a_deleted_worktree_from_the_branch(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "half.py").write_text("work in progress\n")  # a crashed run's uncommitted work

    again = ws.prepare(story)
    assert again.path == path and again.fields == {}
    assert again.notice and again.notice.startswith("resumed") and "earlier run" in again.notice
    assert (path / "half.py").read_text() == "work in progress\n"

    (path / "done.py").write_text("print('hi')\n")
    sha = ws.attempt_passed(story, path, attempt=1).commit

    assert ws.prepare(story).notice is None  # a clean resume says nothing

    shutil.rmtree(path)  # deleted by hand
    third = ws.prepare(story)
    assert third.notice and third.notice.startswith("recreated")
    assert git(path, "rev-parse", "HEAD").strip() == sha
    assert (path / "done.py").exists()


def test_passing_attempt_commits_only_the_agents_files(repo: Repo) -> None:
    sid = repo.story("Add a greeting")
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "src").mkdir()
    (path / "src" / "hello.py").write_text("print('hello')\n")
    (path / "README.md").write_text("# project\nwith a greeting\n")
    (path / "debug.log").write_text("ignored by the user's .gitignore\n")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_bytes(b"\0\1")
    (path / ".ai-sdlc" / "stories" / sid).mkdir(parents=True)
    (path / ".ai-sdlc" / "stories" / sid / "story.md").write_text("agent scribbled here\n")
    (path / ".ai-sdlc" / "scratch.txt").write_text("state\n")
    (path / ".aider.chat.history.md").write_text("aider's history\n")
    (path / "hello.py.swp").write_text("vim swap\n")

    result = ws.attempt_passed(story, path, attempt=2)

    assert result.commit == git(path, "rev-parse", "HEAD").strip()
    assert committed_files(path) == ["README.md", "src/hello.py"]
    message = git(path, "log", "-1", "--format=%B")
    assert message.startswith(f"feat({sid}): Add a greeting\n")
    trailers = git(path, "interpret-trailers", "--parse", input=message)
    assert "AI-SDLC-Attempt: 2" in trailers
    assert "AI-SDLC-Recovery-Attempts: 0" in trailers
    assert git(repo.root, "rev-parse", "main").strip() != result.commit  # on the story branch
    # nothing left to commit: None, and no empty commit
    assert ws.attempt_passed(story, path, attempt=3).commit is None
    assert git(path, "rev-parse", "HEAD").strip() == result.commit


def test_what_the_agent_staged_itself_is_committed_only_if_it_is_work(repo: Repo) -> None:
    """An agent that runs `git add -f` on its swap file or on notes under `.ai-sdlc/` (which
    `git status` is not even asked about) gets neither committed: the commit holds exactly the
    paths the staging rules chose, whatever else sits in the index."""
    sid = repo.story("Add a greeting")
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "hello.py").write_text("print('hello')\n")
    (path / "notes.py.swp").write_text("vim swap\n")
    (path / ".ai-sdlc" / "stories" / sid).mkdir(parents=True)
    (path / ".ai-sdlc" / "stories" / sid / "story.md").write_text("total_recovery_attempts: 0\n")
    git(path, "add", "-f", "hello.py", "notes.py.swp", ".ai-sdlc")

    result = ws.attempt_passed(story, path, attempt=1)

    assert committed_files(path, str(result.commit)) == ["hello.py"]
    # with only the agent's own stray entries left in the index: nothing to commit, no error
    assert ws.attempt_passed(story, path, attempt=2).commit is None
    assert git(path, "rev-parse", "HEAD").strip() == result.commit


def test_commit_trailer_carries_the_recovery_counters(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    _, path = prepared(repo, ws, sid)
    story = record(
        repo,
        sid,
        {
            "total_recovery_attempts": 3,
            "recovery_breakdown": {"implementation_retry": 2, "rework": 1},
        },
    )
    (path / "a.py").write_text("x = 1\n")
    ws.attempt_passed(story, path, attempt=3)
    body = git(path, "log", "-1", "--format=%B")
    assert "AI-SDLC-Recovery-Attempts: 3" in body
    assert "AI-SDLC-Recovery-Breakdown: implementation_retry=2, rework=1" in body


def test_agent_commits_are_folded_into_the_attempt_commit(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    base = git(path, "rev-parse", "HEAD").strip()
    (path / "feature.py").write_text("a = 1\n")
    (path / "debug.log").write_text("ignored\n")
    git(path, "add", "-f", "feature.py")
    git(path, "commit", "-q", "-m", "agent's own commit")

    sha = ws.attempt_passed(story, path, attempt=1).commit

    assert git(path, "rev-parse", "HEAD^").strip() == base
    assert committed_files(path, str(sha)) == ["feature.py"]


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        (".env", "DEBUG=1\n", "secret file name"),
        ("deploy/server.pem", "-----BEGIN PRIVATE KEY-----\n", "secret file name"),
        ("id_ed25519", "key\n", "secret file name"),
        ("settings.py", "API_KEY = 'sk-abcdefghijklmnopqrstuvwx'\n", "credential-like content"),
        ("ci.yml", "token: ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123\n", "credential-like content"),
    ],
)
def test_secrets_are_refused_by_name_and_by_content(
    repo: Repo, name: str, content: str, why: str
) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "ok.py").write_text("fine = True\n")
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(content)
    head = git(path, "rev-parse", "HEAD")

    with pytest.raises(SecretsInWorkError) as caught:
        ws.attempt_passed(story, path, attempt=1)

    message = str(caught.value)
    assert f"{name} ({why})" in message
    for secret in ("sk-abcdefghijklmnopqrstuvwx", "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123", "PRIVATE"):
        assert secret not in message
    assert caught.value.paths == [name]
    assert git(path, "rev-parse", "HEAD") == head  # nothing committed
    assert git(path, "diff", "--cached", "--name-only") == ""  # nothing staged


def test_env_template_is_committed(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / ".env.example").write_text("API_URL=http://localhost\n")
    ws.attempt_passed(story, path, attempt=1)
    assert committed_files(path) == [".env.example"]


def test_failed_attempt_is_saved_as_a_patch_and_rolled_back(repo: Repo, tmp_path: Path) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "README.md").write_text("# project\nbroken edit\n")
    (path / "new.py").write_text("def f():\n    return 1\n")
    (path / "logo.bin").write_bytes(bytes(range(256)))
    (path / "run.log").write_text("ignored output stays\n")
    (path / ".env").write_text("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx\n")

    rec = ws.attempt_failed(story, path, attempt=1)

    assert rec.commit is None and rec.patch is not None
    assert "new.py" in rec.patch and "GIT binary patch" in rec.patch
    assert "sk-abcdefghijklmnopqrstuvwx" not in rec.patch and ".env" not in rec.patch
    assert rec.summary.startswith("3 files changed: ")
    assert "README.md (+1 -0)" in rec.summary and "new.py (+2 -0)" in rec.summary
    assert "logo.bin (binary)" in rec.summary and "left out as secrets: .env" in rec.summary
    # the worktree is back at the checkpoint; ignored files survive
    assert git(path, "status", "--porcelain", "--untracked-files=all") == ""
    assert (path / "README.md").read_text() == "# project\n"
    assert (path / "run.log").exists()
    # the patch re-creates the attempt
    patch_file = tmp_path / "1.patch"
    patch_file.write_text(rec.patch)
    git(path, "apply", "--check", str(patch_file))


def test_a_failed_attempt_that_deleted_a_tracked_test_gets_it_back(repo: Repo) -> None:
    """The game "delete the failing test": the attempt's deletion is in its patch, and the
    worktree has the test again, as committed, for the next attempt and the judge."""
    test = repo.root / "tests" / "test_mul.py"
    test.parent.mkdir()
    test.write_text("def test_mul():\n    assert 2 * 3 == 6\n")
    repo.commit_all("a failing test first")
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "tests" / "test_mul.py").unlink()

    rec = ws.attempt_failed(story, path, attempt=1)

    assert rec.patch is not None and "deleted file mode" in rec.patch
    assert "tests/test_mul.py" in rec.summary
    assert (path / "tests" / "test_mul.py").read_text() == test.read_text()
    assert git(path, "status", "--porcelain", "--untracked-files=all") == ""


def test_failed_attempts_then_a_pass_commit_only_the_passing_changes(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    patches = []
    for n in (1, 2):
        (path / f"wrong{n}.py").write_text(f"attempt {n}\n")
        patches.append(ws.attempt_failed(story, path, attempt=n).patch)
    (path / "right.py").write_text("attempt 3\n")
    ws.attempt_passed(story, path, attempt=3)
    assert all(p and "wrong" in p for p in patches)
    assert committed_files(path) == ["right.py"]
    assert git(path, "status", "--porcelain", "--untracked-files=all") == ""


def test_failed_attempt_undoes_the_agents_own_commits(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    base = git(path, "rev-parse", "HEAD")
    (path / "bad.py").write_text("oops\n")
    git(path, "add", "bad.py")
    git(path, "commit", "-q", "-m", "agent commit")
    rec = ws.attempt_failed(story, path, attempt=1)
    assert rec.patch and "bad.py" in rec.patch
    assert git(path, "rev-parse", "HEAD") == base


def test_keep_failed_attempts_leaves_the_changes(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root, GitSettings(keep_failed_attempts=True))
    story, path = prepared(repo, ws, sid)
    (path / "keep.py").write_text("kept\n")
    rec = ws.attempt_failed(story, path, attempt=1)
    assert rec.patch and "keep.py" in rec.patch
    assert (path / "keep.py").read_text() == "kept\n"


def test_read_only_violations_ignore_scratch_state_and_ignored_files(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / ".aider.tags.cache.v3").mkdir()
    (path / ".aider.tags.cache.v3" / "x").write_text("cache\n")
    (path / "main.py.swp").write_text("swap\n")
    (path / "notes~").write_text("backup\n")
    (path / ".#lock").write_text("emacs\n")
    (path / "agent.log").write_text("ignored\n")
    (path / ".ai-sdlc").mkdir(exist_ok=True)
    (path / ".ai-sdlc" / "state.json").write_text("{}\n")
    assert ws.read_only_violations(story, path) == []

    (path / "README.md").write_text("changed during refine\n")
    (path / "sneaky.py").write_text("x\n")
    assert sorted(ws.read_only_violations(story, path)) == ["README.md", "sneaky.py"]

    ws.revert(story, path)
    assert ws.read_only_violations(story, path) == []
    assert (path / "README.md").read_text() == "# project\n"
    assert not (path / "sneaky.py").exists()
    assert (path / "agent.log").exists()


def test_workspace_refuses_to_touch_the_users_checkout(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story = story_of(repo, sid)
    (repo.root / "mine.txt").write_text("precious\n")
    with pytest.raises(Exception, match="not a story worktree"):
        ws.attempt_failed(story, repo.root, attempt=1)
    assert (repo.root / "mine.txt").read_text() == "precious\n"


def test_pr_is_opened_once_then_reused(repo: Repo, gh_log: Path) -> None:
    sid = repo.story("Add a greeting")
    (repo.root / "user.txt").write_text("uncommitted\n")
    (repo.root / ".ai-sdlc" / "stories" / sid / "plan.md").write_text("1. write hello.py\n")
    before = checkout_snapshot(repo.root)
    calls: list[str] = []

    def guard(fn: Any) -> Any:
        calls.append("guarded")
        return fn()

    ws = GitWorkspace(  # the worktree kept: `finish` is called twice on it
        repo.root,
        GitSettings(draft=True, keep_worktrees=True),
        guard=guard,
        verification="passed: `pytest`",
    )
    story, path = prepared(repo, ws, sid)
    (path / "hello.py").write_text("print('hello')\n")
    sha = ws.attempt_passed(story, path, attempt=1).commit

    first = ws.finish(story, path)
    second = ws.finish(story, path)

    assert first.outcome == "opened" and second.outcome == "reused"
    url = "https://github.com/example/project/pull/1"
    assert first.fields == second.fields == {"pr_url": url}
    assert repo.origin is not None
    assert git(repo.origin, "rev-parse", f"refs/heads/ai-sdlc/{sid}-add-a-greeting").strip() == sha
    creates = [c for c in gh_calls(gh_log) if c[:2] == ["pr", "create"]]
    assert len(creates) == 1
    args = creates[0]
    assert args[args.index("--title") + 1] == f"{sid}: Add a greeting"
    assert args[args.index("--head") + 1] == f"ai-sdlc/{sid}-add-a-greeting"
    assert args[args.index("--base") + 1] == "main"
    assert "--draft" in args
    body = args[args.index("--body") + 1]
    assert "1. write hello.py" in body and "passed: `pytest`" in body
    assert "0 recovery attempts" in body
    assert len(calls) >= 4  # push, list, create; push, list
    assert checkout_snapshot(repo.root) == before


def test_pr_step_is_skipped_without_gh(repo: Repo, tmp_path: Path, monkeypatch: Any) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root, gh=str(tmp_path / "no-such-gh"))
    story, path = prepared(repo, ws, sid)
    (path / "a.py").write_text("a\n")
    ws.attempt_passed(story, path, attempt=1)
    done = ws.finish(story, path)
    assert done.outcome == "skipped" and done.fields == {}
    assert f"`ai-sdlc pr {sid}`" in done.message and "gh" in done.message
    assert repo.origin is not None
    assert git(repo.origin, "branch", "--list", "ai-sdlc/*").strip()  # still pushed


def test_pr_step_is_skipped_without_a_remote(tmp_path: Path, gh_log: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "a.py").write_text("a\n")
    ws.attempt_passed(story, path, attempt=1)
    done = ws.finish(story, path)
    assert done.outcome == "skipped"
    assert "no git remote 'origin'" in done.message and f"`ai-sdlc pr {sid}`" in done.message
    assert gh_calls(gh_log) == []


def test_transient_gh_failures_go_through_the_guard(
    repo: Repo, gh_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GH_FAIL", "create")
    monkeypatch.setenv("FAKE_GH_FAIL_TIMES", "1")
    seen: list[str] = []

    def retry_once(fn: Any) -> Any:
        try:
            return fn()
        except TransientRemoteError as exc:
            seen.append(exc.message)
            return fn()

    sid = repo.story()
    ws = GitWorkspace(repo.root, guard=retry_once)
    story, path = prepared(repo, ws, sid)
    (path / "a.py").write_text("a\n")
    ws.attempt_passed(story, path, attempt=1)
    done = ws.finish(story, path)
    assert done.outcome == "opened"
    assert len(seen) == 1 and "502" in seen[0]


def test_permanent_gh_failure_is_a_publish_error(
    repo: Repo, gh_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GH_FAIL", "create")
    monkeypatch.setenv("FAKE_GH_FAIL_MESSAGE", "HTTP 422: Validation Failed")
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "a.py").write_text("a\n")
    ws.attempt_passed(story, path, attempt=1)
    with pytest.raises(PublishError) as caught:
        ws.publish(story, str(story.frontmatter["branch"]))
    assert "422" in caught.value.message and f"ai-sdlc pr {sid}" in str(caught.value)
    done = ws.finish(story, path)  # the runner's done step reports it instead of failing
    assert done.outcome == "error" and "422" in done.message and f"ai-sdlc pr {sid}" in done.message


def test_under_the_pr_loop_finish_leaves_the_pr_in_review(repo: Repo, gh_log: Path) -> None:
    """`git.auto_merge` turns the pull-request loop on: finishing opens the PR and neither
    waits for checks nor merges (the loop merges once approved and green); the worktree
    stays for the PR's rework rounds."""
    sid = repo.story()
    ws = GitWorkspace(repo.root, GitSettings(auto_merge=True, pr_loop=True))
    story, path = prepared(repo, ws, sid)
    (path / "a.py").write_text("a\n")
    ws.attempt_passed(story, path, attempt=1)
    done = ws.finish(story, path)
    assert done.outcome == "opened" and done.review and "in review" in done.message
    branch = f"ai-sdlc/{sid}-add-a-greeting"
    assert done.head == git(repo.root, "rev-parse", branch).strip()
    assert [c[:2] for c in gh_calls(gh_log)] == [["pr", "list"], ["pr", "create"]]
    assert path.is_dir()


def test_select_workspace(tmp_path: Path, repo: Repo) -> None:
    from ai_sdlc.config import load_config

    defaults = load_config(repo.root, environ={})  # no config file: every default
    ws, notice = select_workspace(repo.root, defaults)
    assert isinstance(ws, GitWorkspace) and notice is None
    ws, notice = select_workspace(repo.root, defaults, no_worktree=True)
    assert isinstance(ws, InPlace) and notice is None
    plain = tmp_path / "plain"
    plain.mkdir()
    ws, notice = select_workspace(plain, load_config(plain, environ={}))
    assert isinstance(ws, InPlace) and notice and "not a git repository" in notice


def test_worktrees_are_created_one_process_at_a_time(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parallel stories create worktrees under one lock in the repository's git folder (a
    concurrent `git worktree add` or `worktree list` can read another's half-made entry): while
    another process holds it, `run` waits, and says so when it gives up."""
    from ai_sdlc.git import worktrees
    from ai_sdlc.locks import SidecarLock
    from tests.conftest import run_cli

    sid = repo.story("Locked out")
    monkeypatch.setattr(worktrees, "LOCK_TIMEOUT", 0.2)
    common = Path(git(repo.root, "rev-parse", "--absolute-git-dir").strip())
    with SidecarLock(common / "ai-sdlc-worktrees.lock", timeout=0):
        refused = run_cli(repo.root, "run", sid)
        assert refused.returncode == 1, refused.output  # BusyError: the documented exit 1
        assert "stayed locked by another ai-sdlc process" in refused.stderr, refused.output
        assert not list((repo.root / ".ai-sdlc" / "worktrees").glob(f"{sid}*"))
    done = run_cli(repo.root, "run", sid)
    assert done.returncode == 0, done.output
    assert f"created worktree .ai-sdlc/worktrees/{sid}" in done.stderr  # (removed once done)
