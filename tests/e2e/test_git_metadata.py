"""Issue 32, case 2, end to end through the real CLI with the sandbox on: a hostile `command`
agent or `verify.test` (itself, or a `setsid` double-forked grandchild of it) redirects the
story worktree's `.git` pointer to a git folder of its own and makes nested repositories (an
empty `git init sub`, one whose own config sets `core.fsmonitor`, a `.git` file deep down).

Every such attempt is counted, named in its reason, and undone before anything else runs; the
story ends blocked at exactly the global limit (never uncounted, the count never lowered); and
afterwards the user's plain `git status`, `git diff` and `git log` in the main checkout and in
the blocked story's kept worktree run none of the planted programs (each writes a marker file).
The throwaway HOME (fake keys, tool folders) is unchanged and no process of the run is left.
The test also shows that the planted programs do run when the pointer is left as the child
wrote it, so no marker means something.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from errno import EBUSY, EROFS
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import ExitCode
from ai_sdlc.sandbox import landlock
from tests.conftest import CliResult, run_cli
from tests.support.attack_support import (
    home_sums,
    make_home,
    mount_namespace_here,
    processes_naming,
    users_git,
    users_git_on_a_terminal,
)
from tests.support.git_support import Repo, git, git_env, make_repo
from tests.support.paths import FAKES
from tests.support.runs_support import start_cli, stop_or_explain
from tests.support.waits import wait_for_pid

__all__ = ["git_env"]

try:
    landlock.abi_version()
except OSError as exc:  # pragma: no cover - the CI and dev kernels have Landlock
    NO_LANDLOCK = f"this kernel has no usable Landlock ({exc.strerror})"
else:
    NO_LANDLOCK = ""

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(bool(NO_LANDLOCK), reason=NO_LANDLOCK or "-"),
]

HOSTILE = FAKES / "hostile_gitmeta.py"
#: The project's global recovery limit (a project may lower it): every attempt is counted up to
#: it, whatever the limit, and two attempts (a count that must still rise, never fall) keep each
#: run short.
LIMIT = 2
NESTED = ("sub", "nest", "deep/er", "build/nest")


class Project:
    """A repository with a bare `origin`, one story, the hostile script as agent or verify."""

    def __init__(
        self, tmp_path: Path, *, child: str, attacks: str, where: str, extra: str = ""
    ) -> None:
        self.repo: Repo = make_repo(tmp_path)
        assert self.repo.origin is not None
        self.root = self.repo.root
        self.state = tmp_path / "state"
        self.state.mkdir()
        (self.state / "attacks").write_text(attacks)
        (self.state / "where").write_text(where)
        self.home, self.home_state = make_home(tmp_path / "home")  # fake keys, tool folders
        self.sid = self.repo.story("Add a greeting")
        hostile = [sys.executable, str(HOSTILE)]
        benign = [sys.executable, "-c", "print('1 passed')"]
        setup = ""
        if child == "agent":
            agent = [*hostile, "agent", "{phase}", str(self.state)]
            verify = shlex.join(benign)
        else:
            agent = [*hostile, "agent", "{phase}", str(self.state / "none")]
            (self.state / "none").mkdir()
            (self.state / "none" / "attacks").write_text("")
            (self.state / "none" / "where").write_text("direct")
            verify = shlex.join([*hostile, "verify", str(self.state)])
            if child == "setup":
                setup = f"worktree:\n  setup: {json.dumps([verify])}\n"
                verify = shlex.join(benign)
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
            f"verify:\n  test: {json.dumps(verify)}\n"
            f"limits:\n  global_recovery: {LIMIT}\n  implementation_retries: {LIMIT}\n"
            f"sandbox:\n  writable: [{json.dumps(str(self.state))}]\n" + setup + extra
        )
        self.repo.commit_all("config")
        assert self.run("config", "--accept").returncode == 0

    def run(self, *args: str) -> CliResult:
        return run_cli(self.root, *args, env=self.env(), timeout=600)

    def env(self) -> dict[str, str]:
        return {
            "AI_SDLC_PROVIDER": "command",
            "HOME": str(self.home),
            "AI_SDLC_STATE_HOME": str(self.home_state),
        }

    def frontmatter(self) -> dict[str, Any]:
        shown = self.run("show", self.sid, "--json")
        assert shown.returncode == 0, shown.output
        return dict(json.loads(shown.stdout)["frontmatter"])

    def ledger_totals(self) -> list[int]:
        path = self.root / ".ai-sdlc" / "state" / "ledger" / f"{self.sid}.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [int(line["total"]) for line in lines]

    def failures(self) -> list[dict[str, Any]]:
        path = self.root / ".ai-sdlc" / "stories" / self.sid / "events.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        ended = [e for e in events if e.get("action") == "phase"]
        return [e for e in ended if e.get("outcome") not in ("completed", "passed", "approved")]

    def marks(self) -> dict[str, str]:
        folder = self.state / "markers"
        if not folder.is_dir():
            return {}
        return {p.name: p.read_text() for p in sorted(folder.iterdir())}

    def worktrees(self) -> list[Path]:
        return sorted(p for p in (self.root / ".ai-sdlc" / "worktrees").iterdir() if p.is_dir())


def plain_git_everywhere(project: Project) -> None:
    """`git status`, `git diff` and `git log` where a user would run them: the main checkout,
    every story worktree (with a change of the user's to a tracked file, so `git diff` has
    something to show), and the folders the child made nested repositories of."""
    folders = [project.root]
    for tree in project.worktrees():
        (tree / "README.md").write_text("# project\n\nthe user's own change\n")
        nested = [*NESTED, "bare"]
        folders += [tree] + [tree / n for n in nested if (tree / n).is_dir()]
    for folder in folders:
        for args in (("status",), ("diff",), ("log", "-1"), ("log",)):
            users_git(folder, *args)
        for args in (("diff",), ("log",)):
            users_git_on_a_terminal(folder, *args)


def assert_git_metadata_is_ours(project: Project, tree: Path) -> None:
    dot_git = tree / ".git"
    assert dot_git.is_file() and not dot_git.is_symlink()
    admin = (project.root / ".git" / "worktrees" / tree.name).resolve()
    assert dot_git.read_text() == f"gitdir: {admin}\n"
    for name in NESTED:
        assert not os.path.lexists(tree / name / ".git"), name
    assert not os.path.lexists(tree / "bare" / "HEAD")
    assert not os.path.lexists(tree / "linked")


@pytest.mark.parametrize("where", ["direct", "grandchild"])
@pytest.mark.parametrize(
    ("child", "attacks"),
    [("agent", "pointer,empty"), ("verify", "pointer,nested,gitfile,bare,link")],
    ids=["agent-pointer-and-empty-repo", "verify-pointer-and-nested-repos"],
)
def test_a_child_taking_over_the_worktrees_git_metadata_is_counted_and_undone(
    tmp_path: Path, child: str, attacks: str, where: str
) -> None:
    project = Project(tmp_path, child=child, attacks=attacks, where=where)
    home = home_sums(project.home, project.home_state)

    result = project.run("run", project.sid)

    assert processes_naming(tmp_path) == []
    assert home_sums(project.home, project.home_state) == home
    assert result.returncode == ExitCode.BLOCKED, result.output
    assert "Traceback" not in result.output
    fm = project.frontmatter()
    assert fm["status"] == "blocked", fm
    assert fm.get("total_recovery_attempts") == LIMIT, fm  # every attempt counted, none more
    totals = project.ledger_totals()
    assert totals == sorted(totals), totals  # never lowered
    failures = project.failures()
    assert len(failures) == LIMIT, failures
    for failure in failures:  # each one names what the child did to the git metadata
        assert failure["outcome"] == "git_metadata_changed", failure
        reason = str(failure.get("feedback") or "")
        assert "worktree's .git" in reason or "nested git repository" in reason, failure
    assert (project.state / "attacked").exists()  # the child did attack
    if mount_namespace_here():  # the pointer was read-only to it: written, renamed over
        refused = (project.state / "pointer-refused").read_text().splitlines()
        assert refused and all(r == f"write {EROFS} rename {EBUSY}" for r in refused), refused
    (tree,) = project.worktrees()  # the blocked story's worktree is kept
    assert_git_metadata_is_ours(project, tree)
    # Nothing the child planted was committed to the story branch.
    branch = git(project.root, "branch", "--list", "ai-sdlc/*").strip().lstrip("*+ ")
    assert git(project.root, "log", "--format=%s", f"main..{branch}").strip() == ""

    plain_git_everywhere(project)

    assert project.marks() == {}, project.marks()
    # What the planted programs do when the child's pointer is left in place: they run.
    (tree / ".git").write_text(f"gitdir: {project.state / 'evil' / '.git'}\n")
    users_git(tree, "status")
    users_git_on_a_terminal(tree, "log")
    assert {"fsmonitor", "pager-log"} <= set(project.marks()), project.marks()


def test_a_setup_command_taking_over_the_git_metadata_is_counted_and_undone(
    tmp_path: Path,
) -> None:
    """`worktree.setup` runs in `prepare`, before the attempt is reserved: what it did is
    counted on the attempt that follows, and undone before that attempt's agent runs. (A setup
    that changes files git would commit stops the run first, exit 3, as any such setup.)"""
    project = Project(
        tmp_path,
        child="setup",
        attacks="pointer-only,ignored",
        where="grandchild",
        extra="git:\n  keep_worktrees: true\n",
    )

    result = project.run("run", project.sid)

    assert result.returncode == 0, result.output
    (failure,) = project.failures()  # the setup ran once, when the worktree was made
    assert failure["outcome"] == "git_metadata_changed", failure
    if mount_namespace_here():  # read-only to the setup command: it could not rewrite it
        refused = (project.state / "pointer-refused").read_text()
        assert refused == f"write {EROFS} rename {EBUSY}\n", refused
        assert "pointer" not in str(failure["feedback"]), failure
    else:  # put back after it, and counted
        assert "the worktree's .git pointer was rewritten" in str(failure["feedback"]), failure
    assert "nested git repository build/nest/.git" in str(failure["feedback"]), failure
    fm = project.frontmatter()
    assert (fm["status"], fm.get("total_recovery_attempts")) == ("done", 1), fm
    (tree,) = project.worktrees()
    assert_git_metadata_is_ours(project, tree)
    plain_git_everywhere(project)
    assert project.marks() == {}, project.marks()


def test_an_agent_stopped_by_the_time_limit_after_taking_over_the_git_metadata_is_counted(
    tmp_path: Path,
) -> None:
    """A path that ends the attempt uncounted (the phase's time limit, the provider then
    unavailable): the change to the git metadata is counted first, and put back."""
    project = Project(
        tmp_path,
        child="agent",
        attacks="pointer,empty",
        where="direct",
        extra="resilience:\n  policies:\n    llm:\n      max_attempts: 1\n",
    )
    (project.state / "hang").write_text("")
    config = project.root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text().replace("limits:\n", "limits:\n  phase_timeout: 2\n"))
    project.repo.commit_all("a short phase time limit")
    assert project.run("config", "--accept").returncode == 0

    result = project.run("run", project.sid)

    assert result.returncode == ExitCode.PROVIDER_UNAVAILABLE, result.output
    (failure,) = project.failures()
    assert failure["outcome"] == "git_metadata_changed", failure
    assert project.frontmatter().get("total_recovery_attempts") == 1
    (tree,) = project.worktrees()
    assert_git_metadata_is_ours(project, tree)
    plain_git_everywhere(project)
    assert project.marks() == {}, project.marks()


def test_an_agent_interrupted_after_taking_over_the_git_metadata_is_counted(
    tmp_path: Path,
) -> None:
    """Ctrl-C while the agent that changed the git metadata still runs: the run exits 130 (an
    interrupt alone counts nothing), the change is counted and put back first."""
    project = Project(tmp_path, child="agent", attacks="pointer,empty", where="grandchild")
    (project.state / "hang").write_text("")
    proc = start_cli(project.root, "run", project.sid, env=project.env())
    try:
        wait_for_pid(project.state / "hanging", timeout=120)  # attacked, now waiting
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    proc.send_signal(signal.SIGINT)
    _, stderr = stop_or_explain(proc, 60)

    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    assert "Traceback" not in stderr
    (failure,) = project.failures()
    assert failure["outcome"] == "git_metadata_changed", failure
    assert project.frontmatter().get("total_recovery_attempts") == 1
    (tree,) = project.worktrees()
    assert_git_metadata_is_ours(project, tree)
    plain_git_everywhere(project)
    assert project.marks() == {}, project.marks()
