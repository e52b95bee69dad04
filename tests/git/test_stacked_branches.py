"""Issue 26 (items 2 and 10, stacked branches, siblings that collide): through the real CLI on
a real repository with a bare `origin`, the stand-in `gh` and the scripted provider.

- A story whose dependency is done but not merged starts from the dependency's branch (its
  agent works against the code that will be there), and its PR targets that branch until the
  dependency merges, then is retargeted to the base branch.
- A story branch cut before the code it needs reached `main` is brought up to date (a merge)
  when it runs again.
- A story branch that no longer merges cleanly (a sibling merged first) shows `conflicts` in
  `worktrees`, and `run` sends it back as a counted rework that resolves it: pinned in
  `tests/git/test_sibling_conflicts.py`, with the board's view of it and a done story whose
  pull request is no longer open (not reopened when its branch conflicts again).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.git_support import git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

#: Imports every module of the `mods` package: a module that needs another's code fails.
CHECK = (
    "import importlib, pkgutil, mods; "
    "[importlib.import_module('mods.' + m.name) for m in pkgutil.iter_modules(mods.__path__)]"
)
A = "def a():\n    return 1\n"
B = "from mods.a import a\n\nassert a() == 1\n"
ONE, TWO = "one\n", "two\n"


class Project:
    """A repository with a bare origin, the `mods` package committed, `gh` on PATH."""

    def __init__(self, tmp: Path, *, retries: int = 3) -> None:
        self.tmp = tmp
        repo = make_repo(tmp)
        assert repo.origin is not None
        self.root, self.origin = repo.root, repo.origin
        install_gh(tmp / "bin")
        self.gh_log = tmp / "gh.log"
        self.env = {
            "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "FAKE_GH_LOG": str(self.gh_log),
            "AI_SDLC_PROVIDER": "scripted",
            "AI_SDLC_GIT__KEEP_WORKTREES": "true",
        }
        (self.root / "mods").mkdir()
        (self.root / "mods" / "__init__.py").write_text("")
        (self.root / "shared.txt").write_text("base\n")
        test = shlex.join([sys.executable, "-c", CHECK])
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"verify:\n  test: {json.dumps(test)}\nlimits:\n  implementation_retries: {retries}\n"
        )
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "mods package")
        git(self.root, "push", "-q", "origin", "main")

    def cli(self, *args: str) -> CliResult:
        return run_cli(self.root, *args, env=self.env, timeout=120)

    def add(self, title: str, *deps: str) -> str:
        extra = [a for d in deps for a in ("--depends-on", d)]
        result = self.cli("add", title, *extra, "--json")
        assert result.returncode == 0, result.output
        return str(json.loads(result.stdout)["id"])

    def rules(self, text: str) -> None:
        (self.root / ".ai-sdlc" / "scripted.yaml").write_text(text)

    def fm(self, sid: str) -> dict[str, object]:
        return dict(StoryStore(self.root).get(sid).frontmatter)

    def branch(self, sid: str) -> str:
        return str(self.fm(sid)["branch"])

    def merge_into_main(self, sid: str) -> None:
        """What merging the story's pull request does: its branch merged into `main`."""
        git(self.root, "merge", "-q", "--no-ff", "-m", f"Merge {sid}", self.branch(sid))
        git(self.root, "push", "-q", "origin", "main")

    def creates(self) -> list[list[str]]:
        return [c for c in gh_calls(self.gh_log) if c[:2] == ["pr", "create"]]

    def prs(self) -> list[dict[str, object]]:
        state = Path(str(self.gh_log) + ".state.json")
        return list(json.loads(state.read_text())["prs"])


def _files(path: str, content: str) -> str:
    return f"    files: {{{path}: {json.dumps(content)}}}\n"


def test_stories_stack_on_their_unmerged_dependencies_and_a_pr_is_retargeted(
    tmp_path: Path,
) -> None:
    """S-0003 stacks on its one unmerged dependency; S-0004 starts with both of its unmerged
    dependencies merged in. Once S-0001 merges, S-0003's PR is retargeted at `main`."""
    p = Project(tmp_path)
    one = p.add("Add a")
    two = p.add("Add c")
    three = p.add("Use a", one)
    four = p.add("Use a and c", one, two)
    c = "def c():\n    return 2\n"
    d = "from mods.a import a\nfrom mods.c import c\n\nassert a() + c() == 3\n"
    p.rules(
        f"rules:\n  - phase: implement\n    story: {one}\n{_files('mods/a.py', A)}"
        f"  - phase: implement\n    story: {two}\n{_files('mods/c.py', c)}"
        f"  - phase: implement\n    story: {three}\n{_files('mods/b.py', B)}"
        f"  - phase: implement\n    story: {four}\n{_files('mods/d.py', d)}"
    )
    assert p.cli("run", one).returncode == 0
    assert p.fm(one)["status"] == "done"

    result = p.cli("run", three)

    # S-0003's branch holds S-0001's code (its verification imports it), and nothing else
    # of S-0001's had to be redone.
    assert result.returncode == 0, result.output
    assert p.fm(three)["status"] == "done"
    assert git(p.root, "show", f"{p.branch(three)}:mods/a.py") == A
    assert git(p.root, "merge-base", "--is-ancestor", p.branch(one), p.branch(three)) == ""
    assert p.fm(three).get("total_recovery_attempts", 0) == 0
    create = p.creates()[-1]
    assert create[create.index("--head") + 1] == p.branch(three)
    assert create[create.index("--base") + 1] == p.branch(one)
    # `worktrees` shows the stack
    listed = p.cli("worktrees")
    assert f"{three} ← {one}" in listed.output, listed.output
    data = json.loads(p.cli("worktrees", "--json").stdout)
    stacked = {w["story"]: w["stacked_on"] for w in data["worktrees"]}
    assert stacked == {one: None, three: one}

    # two unmerged dependencies: the branch starts with both merged in
    assert p.cli("run", two).returncode == 0
    both = p.cli("run", four)
    assert both.returncode == 0, both.output
    branch = p.branch(four)
    for dep in (one, two):
        assert git(p.root, "merge-base", "--is-ancestor", p.branch(dep), branch) == ""
    assert f"merged in {p.branch(two)}" in both.output
    create = p.creates()[-1]
    assert create[create.index("--base") + 1] == p.branch(one)

    # The dependency merges: `ai-sdlc pr` retargets the stacked PR at the base branch.
    p.merge_into_main(one)
    again = p.cli("pr", three)
    assert again.returncode == 0, again.output
    edits = [c for c in gh_calls(p.gh_log) if c[:2] == ["pr", "edit"]]
    assert edits == [["pr", "edit", p.branch(three), "--base", "main"]]
    assert {pr["head"]: pr["base"] for pr in p.prs()}[p.branch(three)] == "main"
    assert "retargeted" in again.output
    data = json.loads(p.cli("worktrees", "--json").stdout)
    assert {w["story"]: w["stacked_on"] for w in data["worktrees"]}[three] is None


def test_a_branch_cut_before_the_code_it_needs_is_brought_up_to_date(tmp_path: Path) -> None:
    """The humanize case: S-0002 needs S-0001's code but branched from `main` before S-0001
    was merged; blocked. After S-0001 merges, a new run merges `main` in and finishes."""
    p = Project(tmp_path, retries=1)
    one = p.add("Add a")
    two = p.add("Use a")
    p.rules(
        f"rules:\n  - phase: implement\n    story: {one}\n{_files('mods/a.py', A)}"
        f"  - phase: implement\n    story: {two}\n{_files('mods/b.py', B)}"
        f"  - phase: rework\n    story: {two}\n{_files('mods/b.py', B)}"
    )
    blocked = p.cli("run", two)
    assert blocked.returncode != 0
    assert p.fm(two)["status"] == "blocked"
    branched_at = git(p.root, "rev-parse", p.branch(two)).strip()

    assert p.cli("run", one).returncode == 0
    p.merge_into_main(one)
    assert p.cli("unblock", two, "--reset-retries").returncode == 0

    result = p.cli("run", two)

    assert result.returncode == 0, result.output
    assert p.fm(two)["status"] == "done"
    branch = p.branch(two)
    main = git(p.root, "rev-parse", "main").strip()
    assert git(p.root, "merge-base", "--is-ancestor", main, branch) == ""
    assert git(p.root, "merge-base", "--is-ancestor", branched_at, branch) == ""
    merges = git(
        p.root, "log", "--merges", "--first-parent", "--format=%s", f"{branched_at}..{branch}"
    )
    assert merges.strip() == f"Merge main into {branch}"
    assert git(p.root, "show", f"{branch}:mods/b.py") == B
    assert "up to date with main" in result.output
    # no force-push: origin's branch is the local one
    assert git(p.origin, "rev-parse", f"refs/heads/{branch}").strip() == (
        git(p.root, "rev-parse", branch).strip()
    )
