"""How often a story run asks git, and that asking less changed no answer.

Every git call forks a process (~2-4 ms CPU each, and a fork of a large Python process): issue
10 puts the tool's own overhead per story at 0.2 s. A scripted story run in a git project with a
bare `origin` once made 50 git calls, then 20, then 16 (`bench/bench_run.py`'s project):
refs are read from the files ref store instead of `for-each-ref` (and the new commit's sha from
the checkpoint ref `update-ref <ref> HEAD` just wrote, instead of `rev-parse HEAD`), a story
certainly new to the repository needs no `worktree list`, and its branch and checkpoint are
created in one `update-ref` transaction. It now makes 18: what an attempt changed is asked of
git (`status`, `diff` against the story's base) instead of hashing every file of the worktree
(3 listings), and the review is shown the change (its files, then its diff). The first test
counts the calls through the real CLI with a logging `git` first on PATH (counted, never timed);
the others pin the answers the fewer calls must still give: the base branch a story starts
from, the checkpoint an agent cannot move (and a new branch's checkpoint), the commit that must
not be empty, the identity a commit falls back to, refs read from files exactly as
`git for-each-ref` reports them, and a story's branch or folder already taken by another
worktree.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.git import repo as git_repo
from ai_sdlc.git import worktrees
from ai_sdlc.git.repo import RefFiles, RefSnapshot, UnknownRef
from ai_sdlc.git.run import HARDENING, GitError
from ai_sdlc.git.workspace import GitWorkspace
from ai_sdlc.store.story import Story
from tests.conftest import run_cli
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.git_support import Repo, git, git_env, make_repo, prepared, repo, story_of

__all__ = ["git_env", "repo"]

pytestmark = pytest.mark.usefixtures("git_env")

#: Git calls one story run (backlog → done, one passing attempt, push + PR) may make: 16; the
#: judge's 4 (is the base untouched for its baseline; what the baseline's run wrote there, to
#: undo; which base test files the attempt changed; the test diff the review is shown);
#: `worktree remove` of the done story's worktree (`git.keep_worktrees`); and 2 for change
#: detection from git (3 `status` and 2 `diff` instead of hashing after 3 `ls-files`); minus
#: the look before implement, answered by the read-only check of plan just before it, and the
#: review's `status`, answered by the commit of all the attempt's work just before it; plus the
#: judge's 2 for test configuration an attempt adds (untracked files, then what it changed);
#: plus the `ls-tree` of the start commit's top folders that tells whether the new worktree
#: must leave a committed `.ai-sdlc/` out (issue 26: `git/sparse`), and the `reset` of the
#: index before the commit's paths are staged (instead of `commit --only <paths>`, which
#: rebuilt a full index from HEAD: 0.06 s of CPU beside a committed backlog of 20,000 stories);
#: plus one to park the done worktree for the next story (`git/pool`: HEAD detached, then
#: `worktree move`, instead of `worktree remove`), which spares the next story a whole checkout;
#: plus the judge's look at git-ignored files (a `pytest.py` or a runner patched in an ignored
#: `.venv/`, issue 33: `verify/held`), its lists of changes shared by every check of one
#: verdict, and the review's `diff --name-status` that finds the held files (`package.json`,
#: `Makefile`...) the commit changed, to show them beside the test diff; plus, once per run, the
#: main checkout's `status`, to say that its uncommitted changes stay out of the story's worktree
#: (issue 36: a dirty checkout is not ignored without a word); plus the freshness pass before
#: the verification (`verify/freshness`: the changed files made newer than every git-ignored build
#: output, so a file's old modification time cannot make a build tool skip it): the changes and
#: the ignored outputs as they are before the run, 3 calls.
GIT_CALLS_PER_STORY = 31


def logging_git(bin_dir: Path, log: Path) -> None:
    """`bin_dir/git`: appends its arguments to `log`, then runs the real git."""
    real = shutil.which("git")
    assert real is not None, "these tests need git"
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)


@pytest.mark.skipif(os.name == "nt", reason="the logging git wrapper is a POSIX shell script")
def test_one_story_run_stays_within_its_git_call_budget(tmp_path: Path) -> None:
    project = make_repo(tmp_path)
    test = shlex.join([sys.executable, "-c", "pass"])
    (project.root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  build: {json.dumps(test)}\n  test: {json.dumps(test)}\n"
    )
    sid = project.story("Add a greeting")
    bin_dir, log, gh_log = tmp_path / "bin", tmp_path / "git.log", tmp_path / "gh.log"
    install_gh(bin_dir)
    logging_git(bin_dir, log)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_GH_LOG": str(gh_log)}

    result = run_cli(project.root, "run", sid, env=env)

    assert result.returncode == 0, result.output
    assert "status: done" in (project.root / ".ai-sdlc" / "stories" / sid / "story.md").read_text()
    assert [c[:2] for c in gh_calls(gh_log)].count(["pr", "create"]) == 1  # pushed, PR opened
    logged = log.read_text().splitlines()
    # The stand-in gh checks the push with `git ls-remote` (the real gh asks GitHub): not ours.
    ours = [c for c in logged if not c.startswith("ls-remote ")]
    # Every call of ours runs without hooks or fsmonitor (issue 22); the rest of this test
    # looks at the commands behind those options.
    hardened = " ".join(HARDENING) + " "
    assert all(c.startswith(hardened) for c in ours), "\n".join(ours)
    ours = [_subcommand(c[len(hardened) :]) for c in ours]
    listing = "\n".join(f"  {c[:160]}" for c in ours)
    assert len(ours) <= GIT_CALLS_PER_STORY, (
        f"one story run made {len(ours)} git calls (budget {GIT_CALLS_PER_STORY}; each forks "
        f"a process): ask git less, or raise the budget with a reason.\n{listing}"
    )
    # The checks that must stay: one `status` after each agent phase (refine, research, plan,
    # implement, review), the judge's two around its baseline, and the commit's; the review's
    # look at the change is one `diff` of the base and the commit for its files, one for its
    # patch. The look before implement is plan's check, the review's the commit of all the
    # work (nothing ran in between); the done worktree is parked without git's own `status`
    # of it (review's check just saw it clean): HEAD detached, then moved to the pool. Plus the
    # run's one look at the main checkout (its uncommitted changes are said to stay out).
    assert sum(c.startswith("status ") for c in ours) == 9, listing
    assert ours[-2].startswith("update-ref --no-deref -m ai-sdlc: parked HEAD HEAD"), listing
    assert ours[-1].startswith("worktree move "), listing
    diffs = [c for c in ours if c.startswith("diff ") and "--no-ext-diff --no-textconv" in c]
    assert len(diffs) >= 2, listing
    # No file is hashed: the judge's one `ls-files` lists untracked files, not every file.
    assert not [c for c in ours if c.startswith("ls-files ") and "--others" not in c], listing
    assert sum(" commit --quiet --no-verify " in c for c in ours) == 1, listing
    # Answered without a process: refs (read from files), the new commit's sha (from the
    # checkpoint ref), the worktrees of a repository a new story is not yet in.
    asked = ("for-each-ref ", "rev-parse HEAD", "worktree list", "show-ref ")
    assert not [c for c in ours if c.startswith(asked)], listing


def _subcommand(line: str) -> str:
    """A logged call without the explicit git folder and work tree of a story worktree."""
    words = line.split(" ")
    while words and words[0].startswith(("--git-dir=", "--work-tree=")):
        words.pop(0)
    return " ".join(words)


# --- the answers behind fewer calls --------------------------------------------------------------


def test_new_story_starts_from_the_remote_head_not_the_checkouts_branch(repo: Repo) -> None:
    git(repo.root, "switch", "-q", "-c", "develop")
    (repo.root / "dev.txt").write_text("develop\n")
    repo.commit_all("on develop")
    git(repo.root, "push", "-q", "origin", "develop")
    git(repo.root, "remote", "set-head", "origin", "develop")
    git(repo.root, "switch", "-q", "main")
    sid = repo.story()

    prep = GitWorkspace(repo.root).prepare(story_of(repo, sid))

    assert prep.notice and prep.notice.endswith("from develop")
    assert git(prep.path, "rev-parse", "HEAD") == git(repo.root, "rev-parse", "develop")


def test_without_a_remote_head_a_story_starts_from_the_checkouts_branch(repo: Repo) -> None:
    git(repo.root, "switch", "-q", "-c", "feature")
    (repo.root / "feature.txt").write_text("feature\n")
    repo.commit_all("on feature")
    sid = repo.story()

    ws = GitWorkspace(repo.root)
    prep = ws.prepare(story_of(repo, sid))

    assert prep.notice and prep.notice.endswith("from feature")
    assert git(prep.path, "rev-parse", "HEAD") == git(repo.root, "rev-parse", "feature")
    assert ws.base_branch.name() == "feature"


def test_a_remote_head_naming_a_deleted_branch_is_refused_as_before(repo: Repo) -> None:
    git(repo.root, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/gone")
    sid = repo.story()

    with pytest.raises(GitError, match="base branch 'gone' does not exist"):
        GitWorkspace(repo.root).prepare(story_of(repo, sid))


def test_an_agent_cannot_hide_its_commit_by_moving_the_checkpoint(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    base = git(path, "rev-parse", "HEAD").strip()
    # During a read-only phase the agent commits and points the checkpoint ref at its commit.
    (path / "sneaky.py").write_text("x = 1\n")
    git(path, "add", "sneaky.py")
    git(path, "commit", "-q", "-m", "agent")
    git(path, "update-ref", f"refs/ai-sdlc/checkpoints/{sid}", "HEAD")

    assert ws.read_only_violations(story, path) == ["HEAD (a commit was made)"]
    ws.revert(story, path)
    assert git(path, "rev-parse", "HEAD").strip() == base
    assert not (path / "sneaky.py").exists()


def test_changes_staged_back_to_head_make_no_empty_commit(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    head = git(path, "rev-parse", "HEAD")
    original = (path / "README.md").read_text()
    (path / "README.md").write_text("staged by the agent\n")
    git(path, "add", "README.md")
    (path / "README.md").write_text(original)  # ... then put back: `git status` says MM

    assert ws.attempt_passed(story, path, attempt=1).commit is None
    assert git(path, "rev-parse", "HEAD") == head


def test_a_commit_falls_back_to_our_identity_only_without_user_email(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "a.py").write_text("a = 1\n")
    ws.attempt_passed(story, path, attempt=1)
    assert git(path, "log", "-1", "--format=%ae") == "test@example.com\n"

    empty = tmp_path / "no-identity"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GIT_COMMITTER_EMAIL", raising=False)
    other = GitWorkspace(repo.root)  # a new run: `user.email` is read again
    story, path = prepared(repo, other, sid)
    (path / "b.py").write_text("b = 1\n")
    other.attempt_passed(story, path, attempt=2)
    assert git(path, "log", "-1", "--format=%an <%ae>") == "ai-sdlc <ai-sdlc@localhost>\n"


def test_status_v2_reports_what_porcelain_v1_did_plus_head(repo: Repo) -> None:
    """`staging.snapshot` reads porcelain v2 (for HEAD's sha in the same call): its changes
    are exactly porcelain v1's, awkward names, deletions, staged and unmerged paths included."""
    from ai_sdlc.git import staging

    root = repo.root
    (root / "both.txt").write_text("base\n")
    repo.commit_all("base")
    git(root, "switch", "-q", "-c", "other")
    (root / "both.txt").write_text("theirs\n")
    repo.commit_all("theirs")
    git(root, "switch", "-q", "main")
    (root / "both.txt").write_text("ours\n")
    repo.commit_all("ours")
    done = subprocess.run(["git", "merge", "-q", "other"], cwd=root, capture_output=True)
    assert done.returncode != 0  # a conflict: both.txt is unmerged
    (root / "README.md").unlink()
    (root / "with space.txt").write_text("x\n")
    (root / "line\nbreak.txt").write_text("x\n")
    (root / "staged.py").write_text("x = 1\n")
    git(root, "add", "staged.py")
    (root / "staged.py").write_text("x = 2\n")

    v1 = git(root, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames")
    expected = sorted((t[:2], t[3:]) for t in v1.split("\0") if t)
    snap = staging.snapshot(root, include_state=True)

    assert sorted((c.xy, c.path) for c in snap.changes) == expected
    assert ("UU", "both.txt") in expected and ("AM", "staged.py") in expected
    assert snap.head == git(root, "rev-parse", "HEAD").strip()


# --- refs read from files -----------------------------------------------------------------------


def common_dir(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())


def refs_repo(repo: Repo, tmp_path: Path) -> tuple[list[Path], list[str]]:
    """Refs in every form the files store keeps them: loose, packed, a loose ref newer than its
    packed copy, symbolic (to a packed ref, to a missing one), and three work trees: the checkout
    on `main`, a linked worktree on `linked`, a detached one."""
    root = repo.root
    for name in ("packed", "later"):
        git(root, "branch", name)
    git(root, "tag", "-a", "-m", "annotated", "v1")  # packed with a peeled `^` line
    git(root, "pack-refs", "--all")
    (root / "x.txt").write_text("x\n")
    repo.commit_all("x")
    git(root, "update-ref", "refs/heads/later", "HEAD")
    git(root, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    git(root, "symbolic-ref", "refs/remotes/origin/dangling", "refs/remotes/origin/gone")
    linked, detached = tmp_path / "linked", tmp_path / "detached"
    git(root, "worktree", "add", "-q", "-b", "linked", str(linked))
    git(root, "worktree", "add", "-q", "--detach", str(detached))
    names = [
        "refs/heads/main",
        "refs/heads/packed",
        "refs/heads/later",
        "refs/heads/linked",
        "refs/tags/v1",
        "refs/remotes/origin/main",
        "refs/remotes/origin/HEAD",
        "refs/remotes/origin/dangling",
        "refs/heads/missing",
        "refs/ai-sdlc/checkpoints/S-0001",
    ]
    return [root, linked, detached], names


def test_refs_read_from_files_are_what_for_each_ref_reports(repo: Repo, tmp_path: Path) -> None:
    trees, names = refs_repo(repo, tmp_path)
    common = common_dir(repo.root)
    assert "refs/heads/packed" in (common / "packed-refs").read_text()
    assert (common / "refs" / "heads" / "later").is_file()  # loose, newer than the packed one
    for tree in trees:
        files = RefFiles.of(tree, common)
        assert files is not None, tree
        expected = git_repo.refs(tree, *names)
        answered = {n: r for n in names if (r := files.ref(n)) is not None}
        assert answered == expected, tree
        snapshot = RefSnapshot(tree, common)
        assert {n: snapshot.get(n) for n in names} == {n: expected.get(n) for n in names}
    assert expected["refs/heads/later"].sha == git(repo.root, "rev-parse", "HEAD").strip()
    assert git_repo.refs(trees[1], "refs/heads/linked")["refs/heads/linked"].checked_out


@pytest.mark.parametrize(
    "name", ["refs/heads/a..b", "refs/heads/x.lock", "refs/heads/../../config", "HEAD"]
)
def test_names_files_cannot_answer_for_certain_are_asked_of_git(repo: Repo, name: str) -> None:
    files = RefFiles.of(repo.root, common_dir(repo.root))
    assert files is not None
    with pytest.raises(UnknownRef):
        files.ref(name)
    assert RefSnapshot(repo.root, common_dir(repo.root)).get(name) is None  # git says: none


def test_git_is_asked_when_the_ref_store_is_not_plain_files(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reftable store, or a `packed-refs` too large to search: the same answers, from git."""
    _, names = refs_repo(repo, tmp_path)
    common = common_dir(repo.root)
    expected = git_repo.refs(repo.root, *names)
    (common / "reftable").mkdir()
    assert RefFiles.of(repo.root, common) is None
    snapshot = RefSnapshot(repo.root, common)
    assert {n: r for n in names if (r := snapshot.get(n))} == expected
    (common / "reftable").rmdir()

    head = common / "HEAD"  # a symbolic ref stored as a link (`core.preferSymlinkRefs`)
    head.unlink()
    head.symlink_to("refs/heads/main")
    assert git_repo.refs(repo.root, "refs/heads/main")["refs/heads/main"].checked_out
    assert RefFiles.of(repo.root, common) is None
    snapshot = RefSnapshot(repo.root, common)
    assert {n: r for n in names if (r := snapshot.get(n))} == expected
    head.unlink()
    head.write_text("ref: refs/heads/main\n")

    monkeypatch.setattr(git_repo, "PACKED_REFS_LIMIT", 10)
    files = RefFiles.of(repo.root, common)
    assert files is not None
    with pytest.raises(UnknownRef):
        files.ref("refs/heads/packed")  # not loose: its packed line would be needed
    snapshot = RefSnapshot(repo.root, common)
    assert {n: r for n in names if (r := snapshot.get(n))} == expected


def test_the_commit_sha_is_the_checkpoint_just_set_to_head(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    checkpoint = f"refs/ai-sdlc/checkpoints/{sid}"

    def commit(name: str, attempt: int) -> str | None:
        """Commit a new file `name`: the sha returned is HEAD and the checkpoint."""
        (path / name).write_text("x = 1\n")
        sha = ws.attempt_passed(story, path, attempt=attempt).commit
        head, point = (git(path, "rev-parse", ref).strip() for ref in ("HEAD", checkpoint))
        assert sha == head == point
        return sha

    first = commit("a.py", 1)
    assert git(path, "log", "-1", "--format=%s") == f"feat({sid}): Add a greeting\n"
    (common_dir(repo.root) / "reftable").mkdir()  # cannot be read from files: git is asked
    commit("b.py", 2)
    assert git(path, "rev-parse", "HEAD~1").strip() == first


def test_a_new_branch_gets_a_fresh_checkpoint_over_a_stale_one(repo: Repo) -> None:
    """An earlier branch of the story was deleted by hand, its checkpoint ref left behind on a
    commit the new branch does not contain: the new branch's checkpoint is where it starts (the
    stale one would make the first read-only check see a commit, and roll the work back)."""
    root = repo.root
    sid = repo.story()
    git(root, "switch", "-q", "-c", "old")
    (root / "old.txt").write_text("old\n")
    git(root, "add", "old.txt")
    git(root, "commit", "-q", "-m", "old")
    stale = git(root, "rev-parse", "HEAD").strip()
    git(root, "switch", "-q", "main")
    git(root, "branch", "-q", "-D", "old")
    git(root, "update-ref", f"refs/ai-sdlc/checkpoints/{sid}", stale)

    ws = GitWorkspace(root)
    story, path = prepared(repo, ws, sid)

    start = git(root, "rev-parse", "main").strip()
    assert git(root, "rev-parse", f"refs/ai-sdlc/checkpoints/{sid}").strip() == start
    assert git(path, "rev-parse", "HEAD").strip() == start
    assert ws.read_only_violations(story, path) == []
    branch = story.frontmatter["branch"]
    assert git(root, "reflog", "-1", "--format=%gs", f"refs/heads/{branch}") == (
        "branch: Created from main\n"
    )


def test_a_new_storys_branch_checked_out_elsewhere_is_refused_as_before(
    repo: Repo, tmp_path: Path
) -> None:
    sid = repo.story()
    other = tmp_path / "other"
    git(repo.root, "worktree", "add", "-q", "--detach", str(other))
    git(other, "switch", "-q", "--orphan", f"ai-sdlc/{sid}-add-a-greeting")  # no ref yet

    with pytest.raises(GitError, match=f"is checked out in {other}"):
        GitWorkspace(repo.root).prepare(story_of(repo, sid))


def test_a_stale_worktree_entry_at_a_new_storys_folder_is_pruned_as_before(repo: Repo) -> None:
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    branch, folder = ws.location(story_of(repo, sid))
    git(repo.root, "worktree", "add", "-q", "-b", "elsewhere", str(folder))
    shutil.rmtree(folder)  # deleted by hand: git still lists it (prunable)
    common = common_dir(repo.root)
    assert worktrees.claimed(common, folder, f"refs/heads/{branch}") is True

    prep = ws.prepare(story_of(repo, sid))

    assert prep.notice and "created worktree" in prep.notice
    assert git(folder, "symbolic-ref", "--short", "HEAD").strip() == branch
    assert "elsewhere" not in git(repo.root, "worktree", "list", "--porcelain")
    other = folder.parent / "S-9999"
    assert worktrees.claimed(common, other, "refs/heads/ai-sdlc/S-9999") is False


def test_a_recorded_branch_name_cannot_smuggle_a_second_ref_update(repo: Repo) -> None:
    """The branch and checkpoint are created through `update-ref --stdin`: a story whose
    recorded branch holds a line break is refused (as `worktree add -b` refused it), and no ref
    changes."""
    sid = repo.story()
    main = git(repo.root, "rev-parse", "main")
    story = story_of(repo, sid)
    smuggled = "ai-sdlc/x HEAD\ndelete refs/heads/main\ncreate refs/heads/ai-sdlc/y"
    story = Story(story.id, story.path, {**dict(story.frontmatter), "branch": smuggled})

    with pytest.raises(GitError, match="not a valid branch name"):
        GitWorkspace(repo.root).prepare(story)

    assert git(repo.root, "rev-parse", "main") == main
    assert git(repo.root, "for-each-ref", "refs/heads/ai-sdlc", "refs/ai-sdlc") == ""
