"""Story worktrees without the backlog (issue 26, problem 5): a project that commits its
`.ai-sdlc/` (stories, config) gets story worktrees that leave that folder out (a cone-mode
sparse checkout, `git/sparse`), so a story's cost does not grow with the backlog and its agent
sees no copy of the backlog that is not the truth; the branch's tree keeps every story file
unchanged, so merging it deletes none. Through the real CLI with a bare `origin`, plus the
workspace seam for what only an agent's own git can do (a merge that brings a new folder)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.git import worktrees
from ai_sdlc.git.workspace import GitWorkspace
from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.git_support import Repo, git, git_env, make_repo, prepared, repo

__all__ = ["git_env", "repo"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

#: A verification command that records what the story's worktree holds at its top while the
#: story runs (what the agent sees there too), one JSON list per run.
LOOK = (
    "import json, os, sys\n"
    "with open(sys.argv[1], 'a', encoding='utf-8') as f:\n"
    "    f.write(json.dumps(sorted(os.listdir('.'))) + '\\n')\n"
)


def configure(root: Path, seen: Path, *, keep: bool = True) -> None:
    """Verification that records the worktree's top; done worktrees kept (`keep`) to look at;
    the scripted agent's implementation writes into a folder new to the repository."""
    look = shlex.join([sys.executable, "-c", LOOK, str(seen)])
    seen.parent.mkdir(exist_ok=True)  # a records folder the project's sandbox.writable names
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  build: {json.dumps(look)}\ngit:\n  keep_worktrees: {json.dumps(keep)}\n"
        f"sandbox:\n  writable: [{json.dumps(str(seen.parent))}]\n"
    )
    (root / ".ai-sdlc" / "scripted.yaml").write_text(
        "rules:\n  - phase: implement\n"
        '    files: {src/feature.py: "def feature() -> int:\\n    return 1\\n"}\n'
    )


def add(root: Path, title: str) -> str:
    result = run_cli(root, "add", title)
    assert result.returncode == 0, result.output
    return result.stdout.strip()


def committed_backlog(project: Repo, count: int) -> list[str]:
    """`count` stories added through the CLI, committed with the config and pushed."""
    ids = [add(project.root, f"Story {n}") for n in range(1, count + 1)]
    project.commit_all("backlog")
    git(project.root, "push", "-q", "origin", "main")
    tracked = git(project.root, "ls-files", ".ai-sdlc").split()
    assert {f".ai-sdlc/stories/{sid}/story.md" for sid in ids} <= set(tracked)
    return ids


def location(root: Path, sid: str) -> tuple[str, Path]:
    slug = StoryStore(root).get(sid).frontmatter.get("slug")
    name = worktrees.story_name(sid, slug)
    return worktrees.BRANCH_PREFIX + name, root / ".ai-sdlc" / "worktrees" / name


def status_of(root: Path, sid: str) -> str:
    return str(StoryStore(root).get(sid).frontmatter.get("status"))


def story_files(tree: str, root: Path) -> dict[str, str]:
    """Path → blob of every file under `.ai-sdlc/` in `tree` (a commit or branch)."""
    out = git(root, "ls-tree", "-r", "-z", tree, "--", ".ai-sdlc/")
    files: dict[str, str] = {}
    for entry in out.split("\0"):
        if entry:
            meta, _, path = entry.partition("\t")
            files[path] = meta.split()[2]
    return files


def test_a_story_beside_a_committed_backlog_runs_in_a_worktree_without_it(
    tmp_path: Path,
) -> None:
    project = make_repo(tmp_path)
    root = project.root
    seen = tmp_path / "records" / "seen.log"
    configure(root, seen)
    ids = committed_backlog(project, 3)
    fork = git(root, "rev-parse", "main").strip()
    backlog = story_files(fork, root)

    result = run_cli(root, "run", ids[0])

    assert result.returncode == 0, result.output
    assert status_of(root, ids[0]) == "done"
    branch, folder = location(root, ids[0])
    # The agent's (and verification's) view of the worktree: the project, no `.ai-sdlc/`.
    views = [json.loads(line) for line in seen.read_text().splitlines()]
    assert views and all(".ai-sdlc" not in view and "README.md" in view for view in views)
    assert not (folder / ".ai-sdlc").exists()
    assert (folder / "src" / "feature.py").is_file()  # a folder new to the repository
    assert git(folder, "status", "--porcelain", "--untracked-files=all") == ""
    # The branch (and what was pushed) keeps every story file of the backlog, unchanged.
    assert story_files(branch, root) == backlog
    assert git(project.origin or root, "rev-parse", f"{branch}:.ai-sdlc") == git(
        root, "rev-parse", f"{fork}:.ai-sdlc"
    )
    shown = git(root, "show", "--stat=200", "--format=", branch)
    assert "src/feature.py" in shown and ".ai-sdlc" not in shown, shown
    assert git(root, "diff", "--name-only", fork, branch).split() == ["src/feature.py"]

    # Merging the story deletes no story, not even one added on main since.
    later = add(root, "Story added later")
    project.commit_all("state and a new story")
    git(root, "merge", "-q", "--no-ff", "-m", "merge the story", branch)
    merged = story_files("HEAD", root)
    for sid in [*ids, later]:
        assert f".ai-sdlc/stories/{sid}/story.md" in merged
    assert "src/feature.py" in git(root, "ls-tree", "-r", "--name-only", "HEAD").split()


def test_the_next_story_starts_sparse_too_and_a_done_worktree_is_removed(tmp_path: Path) -> None:
    project = make_repo(tmp_path)
    root = project.root
    seen = tmp_path / "records" / "seen.log"
    configure(root, seen, keep=False)
    ids = committed_backlog(project, 2)

    for sid in ids:
        result = run_cli(root, "run", sid)
        assert result.returncode == 0, result.output
        assert status_of(root, sid) == "done"
        branch, folder = location(root, sid)
        assert not folder.exists()  # removed once done (its worktree was clean)
        assert set(story_files(branch, root)) >= {f".ai-sdlc/stories/{s}/story.md" for s in ids}
    # The main checkout and the last done worktree, parked (detached) for the next story.
    listed = git(root, "worktree", "list", "--porcelain").split("\n\n")
    assert [block for block in listed if block.strip()][1:] == [
        block for block in listed if "/.pool/" in block and "\ndetached" in block
    ]
    assert len([block for block in listed if "/.pool/" in block]) == 1
    views = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(views) >= 2 and all(".ai-sdlc" not in view for view in views)


def test_an_older_full_worktree_leaves_the_backlog_out_when_its_story_resumes(
    tmp_path: Path,
) -> None:
    project = make_repo(tmp_path)
    root = project.root
    configure(root, tmp_path / "records" / "seen.log")
    ids = committed_backlog(project, 2)
    fork = git(root, "rev-parse", "main").strip()
    branch, folder = location(root, ids[0])
    # What an older version made: a full checkout of the branch, backlog and all.
    git(root, "worktree", "add", "-q", "-b", branch, str(folder), "main")
    assert (folder / ".ai-sdlc" / "stories" / ids[1] / "story.md").is_file()

    result = run_cli(root, "run", ids[0])

    assert result.returncode == 0, result.output
    assert status_of(root, ids[0]) == "done"
    assert not (folder / ".ai-sdlc").exists()
    assert (folder / "README.md").is_file() and (folder / "src" / "feature.py").is_file()
    assert git(folder, "status", "--porcelain", "--untracked-files=all") == ""
    assert story_files(branch, root) == story_files(fork, root)


def test_a_project_in_a_subfolder_keeps_its_folder_and_leaves_only_its_backlog_out(
    tmp_path: Path,
) -> None:
    mono = tmp_path / "mono"
    (mono / "app").mkdir(parents=True)
    (mono / "lib").mkdir()
    (mono / "lib" / "util.py").write_text("UTIL = 1\n")
    (mono / "app" / "README.md").write_text("# app\n")
    git(mono, "init", "-q", "-b", "main")
    StoryStore(mono / "app").init()
    root = mono / "app"
    configure(root, tmp_path / "records" / "seen.log")
    sid = add(root, "Story in a subfolder")
    git(mono, "add", "-A")
    git(mono, "commit", "-q", "-m", "monorepo with a committed backlog")

    result = run_cli(root, "run", sid)

    assert result.returncode == 0, result.output
    assert status_of(root, sid) == "done"
    branch, folder = location(root, sid)
    # `app/` holds no folder but `.ai-sdlc/`: its own files are still checked out.
    assert (folder / "app" / "README.md").is_file()
    assert (folder / "lib" / "util.py").is_file()
    assert not (folder / "app" / ".ai-sdlc").exists()
    assert (folder / "app" / "src" / "feature.py").is_file()
    assert git(folder, "status", "--porcelain", "--untracked-files=all") == ""
    assert f"app/.ai-sdlc/stories/{sid}/story.md" in git(
        mono, "ls-tree", "-r", "--name-only", branch
    ).split("\n")


def test_a_folder_an_agent_merge_brings_in_is_checked_out_and_committed(repo: Repo) -> None:
    sid = repo.story("Use the new package")
    repo.commit_all("backlog")
    ws = GitWorkspace(repo.root)
    story, work = prepared(repo, ws, sid)
    assert not (work / ".ai-sdlc").exists()
    # Main gains a folder after the story's branch was cut; the agent merges main itself.
    (repo.root / "newpkg").mkdir()
    (repo.root / "newpkg" / "mod.py").write_text("VALUE = 2\n")
    git(repo.root, "add", "newpkg")
    git(repo.root, "commit", "-q", "-m", "newpkg")
    git(work, "merge", "-q", "--no-edit", "main")
    # git keeps a folder outside the cone off the disk: that is what widening is for.
    assert not (work / "newpkg").exists()

    change = ws.attempt_passed(story, work, attempt=1)

    assert change.commit is not None
    assert (work / "newpkg" / "mod.py").read_text() == "VALUE = 2\n"
    tree = git(repo.root, "ls-tree", "-r", "--name-only", change.commit).split("\n")
    assert "newpkg/mod.py" in tree
    assert f".ai-sdlc/stories/{sid}/story.md" in tree
    assert git(work, "status", "--porcelain", "--untracked-files=all") == ""


#: Verification that fails while `src/feature.py` says BROKEN (and records nothing).
CHECK = "import sys; sys.exit('BROKEN' in open('src/feature.py').read())"


def test_a_failed_attempt_beside_a_committed_backlog_is_saved_and_rolled_back(
    tmp_path: Path,
) -> None:
    project = make_repo(tmp_path)
    root = project.root
    configure(root, tmp_path / "records" / "seen.log")
    check = shlex.join([sys.executable, "-c", CHECK])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  build: {json.dumps(check)}\n  baseline: false\ngit:\n  keep_worktrees: true\n"
    )
    (root / ".ai-sdlc" / "scripted.yaml").write_text(
        "rules:\n"
        "  - phase: implement\n    attempt: 1\n"
        '    files: {src/feature.py: "BROKEN = 1\\n", notes/one.md: "one\\n"}\n'
        "  - phase: implement\n    attempt: 2\n"
        '    files: {src/feature.py: "FIXED = 1\\n"}\n'
    )
    ids = committed_backlog(project, 2)
    fork = git(root, "rev-parse", "main").strip()

    result = run_cli(root, "run", ids[0])

    assert result.returncode == 0, result.output
    assert status_of(root, ids[0]) == "done"
    patch = (root / ".ai-sdlc" / "stories" / ids[0] / "attempts" / "1.patch").read_text()
    assert "BROKEN = 1" in patch and "notes/one.md" in patch and ".ai-sdlc/" not in patch
    branch, folder = location(root, ids[0])
    assert not (folder / "notes").exists() and not (folder / ".ai-sdlc").exists()
    assert (folder / "src" / "feature.py").read_text() == "FIXED = 1\n"
    assert git(folder, "status", "--porcelain", "--untracked-files=all") == ""
    assert story_files(branch, root) == story_files(fork, root)
    assert git(root, "diff", "--name-only", fork, branch).split() == ["src/feature.py"]
