"""Issue 23 end to end, through the real CLI: a git project with a test-first failing
`tests/test_mul.py`, real pytest as the judge, and a `command` agent
(tests/support/fakes/judge_agent.py)
that is honest or games the test. Gaming never reaches `done` and every such attempt is
counted; a base that cannot be verified stops before any agent call; a story may opt out of
protected tests, and says so in its pull request and the run report. Stories whose promise is
the implementation start there (refine, research and plan marked done by hand); an honest
story walks from refine to done once, after the base was fixed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.git_support import git, git_env, make_repo
from tests.support.held_support import start_at_implement
from tests.support.paths import FAKES

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

AGENT = FAKES / "judge_agent.py"
TITLE = "Multiply numbers"
FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    # Written first, failing at the base: `mul` does not exist yet (a collection error).
    "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n'
    'addopts = "-q -p no:cacheprovider"\n',
}
PYTEST = shlex.join([sys.executable, "-m", "pytest"])


class Project:
    def __init__(self, tmp_path: Path) -> None:
        self.repo = make_repo(tmp_path)
        self.root = self.repo.root
        for name, text in FILES.items():
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_text(text)
        self.repo.commit_all("calc with a failing test for mul")
        self.sid = self.repo.story(TITLE)
        # The stand-in agent logs its calls in a records folder of its own, outside the
        # project, named in the project's sandbox.writable (as a user widens it).
        self.log = tmp_path / "records" / "agent.log"
        self.log.parent.mkdir()
        self.bin = tmp_path / "bin"
        install_gh(self.bin)
        self.gh_log = tmp_path / "gh.log"
        self.env = {
            "AI_SDLC_PROVIDER": "command",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "FAKE_GH_LOG": str(self.gh_log),
        }

    def configure(
        self, mode: str, *, test: str = PYTEST, build: str | None = None, retries: int = 1
    ) -> None:
        template = [sys.executable, str(AGENT), "{phase}", mode, str(self.log)]
        template += ["--prompt-file", "{prompt_file}"]
        verify = f"  test: {json.dumps(test)}\n"
        if build is not None:
            verify += f"  build: {json.dumps(build)}\n"
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            "ai:\n  provider: command\n  command:\n"
            f"    template: {json.dumps(template)}\n"
            f"verify:\n{verify}"
            f"limits:\n  implementation_retries: {retries}\n"
            f"sandbox:\n  writable: [{json.dumps(str(self.log.parent))}]\n"
        )
        # a person editing the guardrails by hand confirms them (`configguard`)
        accepted = run_cli(self.root, "config", "--accept", env=self.env)
        assert accepted.returncode == 0, accepted.output

    def run(self, *args: str) -> CliResult:
        return run_cli(self.root, "run", *args, env=self.env, timeout=120)

    def frontmatter(self) -> dict[str, object]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def events(self) -> list[dict[str, object]]:
        log = self.root / ".ai-sdlc" / "stories" / self.sid / "events.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    def agent_calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def branch(self) -> str:
        return str(self.frontmatter()["branch"])


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


GAMES = {
    "delete": "tests/test_mul.py: the story's change removes or weakens test_mul",
    "skip": "tests/test_mul.py: the story's change removes or weakens test_mul",
    "weaken": "tests/test_mul.py: the story's change removes or weakens test_mul",
    "conftest": "conftest.py: the story's change adds test configuration; without it the "
    "base's tests fail against the change",
}


#: The game whose story gets a retry, so the rework is judged too; the others are judged on
#: their one attempt (`implementation_retries: 0`, as a user may set it): the same path.
REWORKED = "delete"


def test_an_agent_gaming_the_failing_test_never_reaches_done(project: Project) -> None:
    """Each game is a story of its own on the same base (whose baseline is taken once), with
    its own agent call log, starting at its implementation (refine, research and plan marked
    done by hand: the games are the implementation's)."""
    for mode in GAMES:
        project.log = project.log.parent / f"{mode}.log"
        project.sid = project.repo.story(f"{TITLE} ({mode})")
        start_at_implement(project.root, project.sid)
        tries = 2 if mode == REWORKED else 1
        project.configure(mode, retries=tries - 1)

        result = project.run(project.sid)

        assert result.returncode == 5, (mode, result.output)  # blocked at the retry limit
        fm = project.frontmatter()
        assert fm["status"] == "blocked"
        # every attempt (the first and any retry) was counted as an implementation retry, only
        assert fm["recovery_breakdown"] == {"implementation_retry": tries}
        assert fm["total_recovery_attempts"] == tries
        assert project.agent_calls().count("implement") == tries
        reasons = [
            str(e["reason"])
            for e in project.events()
            if e.get("action") == "recovery" and e.get("recovery_kind") == "implementation_retry"
        ]
        assert len(reasons) == tries
        assert all(r.startswith(GAMES[mode]) for r in reasons), (mode, reasons)
        assert GAMES[mode] in str(fm["blocked_reason"])
        # the reviewer (who approves anything) was never asked; nothing was committed
        assert "review" not in project.agent_calls()
        assert git(project.root, "rev-list", "--count", f"main..{project.branch()}").strip() == "0"
        worktree = project.root / str(fm["worktree_path"])
        assert (worktree / "tests" / "test_mul.py").read_text() == FILES["tests/test_mul.py"]
        assert not (worktree / "conftest.py").exists()


#: Ways a base cannot be verified: (the verify settings, what the run says).
UNVERIFIABLE = (
    (
        {"build": shlex.join([sys.executable, "-c", "raise SystemExit('build broken')"])},
        "verification fails before any change: step 'build' failed (exit 1): build broken",
    ),
    (
        {"test": "no-such-test-runner-xyz -q"},
        "verification fails before any change: [ai-sdlc] cannot run "
        "'no-such-test-runner-xyz': executable not found on PATH",
    ),
)


def test_a_base_that_cannot_be_verified_stops_before_any_agent_call(project: Project) -> None:
    """Each way in turn, on the same story; then, the project fixed, an honest agent takes the
    story from refine to done, and the review sees the counts
    (`assert_honest_run_done_and_reviewed`)."""
    for settings, said in UNVERIFIABLE:
        project.configure("honest", **settings)

        result = project.run(project.sid)

        assert result.returncode == 3, (settings, result.output)
        assert said in result.output
        assert "Traceback" not in result.output
        assert project.agent_calls() == []  # the agent was never started
        fm = project.frontmatter()
        assert int(fm.get("total_recovery_attempts") or 0) == 0
        assert fm["status"] != "blocked"
        # no failing baseline is cached
        assert not list((project.root / ".ai-sdlc" / "state").glob("baselines/*.json"))
    # once the project is fixed, the story runs
    project.configure("honest")
    assert_honest_run_done_and_reviewed(project, project.run(project.sid))


def assert_honest_run_done_and_reviewed(project: Project, result: CliResult) -> None:
    """An honest agent's story is done, without a recovery, its change committed; the review
    saw the counts of the change and of the base; the base's baseline was taken once, on the
    untouched base, and cached for the next story (no failing one before it)."""
    assert result.returncode == 0, result.output
    fm = project.frontmatter()
    assert fm["status"] == "done"
    assert int(fm.get("total_recovery_attempts") or 0) == 0
    assert git(project.root, "show", f"{project.branch()}:calc.py").endswith("return a * b\n")
    review = Path(str(project.log) + ".review").read_text()
    assert "Tests: 2 passed, 0 failed, 0 skipped" in review
    assert "(at the story's base: 0 passed, 1 failed, 0 skipped)" in review
    assert "allow_test_changes" not in review
    baselines = list((project.root / ".ai-sdlc" / "state" / "baselines").glob("*.json"))
    assert len(baselines) == 1
    cached = json.loads(baselines[0].read_text())
    assert cached["failing"] == ["tests/test_mul.py"]
    assert cached["counts"]["failed"] == 1
    started = [e for e in project.events() if e.get("action") == "phase"]
    assert started, "the story's phases were logged"


def test_a_story_allowed_to_change_tests_says_so_in_its_pr_and_report(project: Project) -> None:
    project.configure("delete")
    start_at_implement(project.root, project.sid)  # the earlier phases are not the point
    story = project.root / ".ai-sdlc" / "stories" / project.sid / "story.md"
    text = story.read_text()
    story.write_text(text.replace("\n---\n", "\nallow_test_changes: true\n---\n", 1))

    result = project.run("--auto")

    assert result.returncode == 0, result.output
    fm = project.frontmatter()
    assert fm["status"] == "done"
    assert int(fm.get("total_recovery_attempts") or 0) == 0
    branch = project.branch()
    assert "tests/test_mul.py" not in git(project.root, "ls-tree", "-r", "--name-only", branch)
    review = Path(str(project.log) + ".review").read_text()
    assert "This story allows test changes (allow_test_changes: true)" in review
    assert "Test changes against the story's base:" in review
    assert "-    assert mul(2, 3) == 6" in review
    creates = [c for c in gh_calls(project.gh_log) if c[:2] == ["pr", "create"]]
    assert len(creates) == 1
    body = creates[0][creates[0].index("--body") + 1]
    assert "**Test changes allowed** (`allow_test_changes: true` in the story)" in body
    report = run_cli(project.root, "report", "--json", env=project.env)
    assert report.returncode == 0, report.output
    (story_report,) = json.loads(report.stdout)["stories"]
    assert story_report["tests"]["allow_test_changes"] is True
    assert story_report["tests"]["counts"] == {
        "passed": 1,
        "failed": 0,
        "skipped": 0,
        "runner": "pytest",
    }
    assert story_report["tests"]["base_counts"]["failed"] == 1
    assert "tests/test_mul.py" in story_report["tests"]["diff_stat"]
    html = project.root / "report.html"
    assert run_cli(project.root, "report", "--html", str(html), env=project.env).returncode == 0
    page = html.read_text()
    assert "<b>test changes allowed</b> (allow_test_changes: true)" in page
    assert "<b>Tests:</b> 1 passed, 0 failed, 0 skipped (base: 0 passed, 1 failed" in page


def test_allow_test_changes_must_be_a_boolean(project: Project) -> None:
    project.configure("delete")
    story = project.root / ".ai-sdlc" / "stories" / project.sid / "story.md"
    story.write_text(
        story.read_text().replace("\n---\n", "\nallow_test_changes: yes please\n---\n", 1)
    )

    result = project.run(project.sid)

    assert result.returncode == 3, result.output
    assert "`allow_test_changes` must be true or false" in result.stderr
    assert project.agent_calls() == []


def test_without_a_worktree_a_verify_command_that_cannot_start_is_a_config_error(
    project: Project,
) -> None:
    """No base to verify first (`--no-worktree`): the implementation's own verification finds
    the executable missing; that is exit 3 at once, the attempt released, never retried."""
    project.configure("honest", test="no-such-test-runner-xyz -q")

    result = project.run(project.sid, "--no-worktree")

    assert result.returncode == 3, result.output
    assert "verification cannot run: [ai-sdlc] cannot run 'no-such-test-runner-xyz'" in (
        result.output
    )
    assert project.agent_calls().count("implement") == 1  # not retried
    fm = project.frontmatter()
    assert int(fm.get("total_recovery_attempts") or 0) == 0
    assert fm["status"] != "blocked"
    released = [e for e in project.events() if e.get("action") == "attempt_released"]
    assert [e["phase"] for e in released] == ["implement"]


def mark_researched_and_planned(project: Project) -> None:
    """The story's research and plan marked done in its frontmatter, as a user hand-edits it."""
    story = project.root / ".ai-sdlc" / "stories" / project.sid / "story.md"
    text = story.read_text()
    for flag in ("research_complete", "plan_complete"):
        assert f"\n{flag}: false\n" in text, text
        text = text.replace(f"\n{flag}: false\n", f"\n{flag}: true\n", 1)
    story.write_text(text)


KILLED_MID_CHECK = """\
import os, sys
from pathlib import Path
from ai_sdlc.verify.protect import base_versions_in_place
worktree, base, state = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
with base_versions_in_place(worktree, base, ["tests/test_mul.py"], state):
    os._exit(9)
"""


def test_test_files_left_in_their_base_version_by_a_killed_run_are_put_back(
    project: Project,
) -> None:
    project.configure("honest")
    # up to the implementation: refine makes the worktree, research and plan marked done by
    # hand (not what this is about)
    assert project.run(project.sid, "--step", "refine").returncode == 0
    mark_researched_and_planned(project)
    worktree = project.root / str(project.frontmatter()["worktree_path"])
    extended = FILES["tests/test_mul.py"] + "\n\ndef test_mul_zero():\n    assert mul(0, 3) == 0\n"
    (worktree / "tests" / "test_mul.py").write_text(extended)  # the work of an earlier attempt
    base = git(project.root, "rev-parse", "main").strip()
    state = project.root / ".ai-sdlc" / "state" / "protected"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_CHECK, str(worktree), base, str(state)], check=False
    )
    assert killed.returncode == 9
    assert (worktree / "tests" / "test_mul.py").read_text() == FILES["tests/test_mul.py"]

    result = project.run(project.sid)

    assert result.returncode == 0, result.output
    assert "put back the agent's test files: tests/test_mul.py" in result.stderr
    assert project.frontmatter()["status"] == "done"
    assert int(project.frontmatter().get("total_recovery_attempts") or 0) == 0
    assert git(project.root, "show", f"{project.branch()}:tests/test_mul.py") == extended


NODE_HEAD = "const test = require('node:test');\nconst assert = require('node:assert');\n"
NODE_FILES = {
    "calc.js": "exports.add = (a, b) => a + b;\n",
    "test/add.test.js": NODE_HEAD + "const { add } = require('../calc.js');\n"
    "test('adds', () => { assert.strictEqual(add(2, 3), 5); });\n",
    # written first: `mul` does not exist yet
    "test/mul.test.js": NODE_HEAD + "const { mul } = require('../calc.js');\n"
    "test('multiplies', () => { assert.strictEqual(mul(2, 3), 6); });\n",
}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_node_project_judged_by_node_test(tmp_path: Path) -> None:
    """The same judge on a Node project whose tests run with node's own runner (`node --test`,
    no registry needed): the weakened test is not done, the base's version of the test named
    with node's assertion (the story starting at its implementation as a user hand-edits it:
    the earlier phases are not the point). An honest story on a node:test project reaching
    done, the base counted, is tests/e2e/test_held_node.py's `test_verdict_node_test`."""
    project = Project(tmp_path)
    for name, text in NODE_FILES.items():
        (project.root / name).parent.mkdir(parents=True, exist_ok=True)
        (project.root / name).write_text(text)
    project.repo.commit_all("calc.js with a failing test for mul")
    project.configure("node-weaken", test="node --test", retries=0)  # one attempt judged
    project.sid = project.repo.story(f"{TITLE} (node-weaken)")
    start_at_implement(project.root, project.sid)

    result = project.run(project.sid)

    assert result.returncode == 5, result.output
    fm = project.frontmatter()
    assert fm["recovery_breakdown"] == {"implementation_retry": 1}
    assert str(fm["blocked_reason"]).endswith(
        "test/mul.test.js: the story's change removes or weakens these tests; their base "
        "version fails against it: multiplies: Expected values to be strictly equal:; 5 !== 6"
    ), fm["blocked_reason"]


def test_a_lost_baseline_is_taken_again_from_a_temporary_checkout_of_the_base(
    project: Project,
) -> None:
    """The cache went (or the verification config changed) after the story's worktree moved on:
    the base is checked out on its own for one run, in the pinned story worktree's repository,
    and removed again."""
    project.configure("honest")
    start_at_implement(project.root, project.sid)  # the earlier phases are not the point
    assert project.run(project.sid, "--step", "implement").returncode == 0
    baselines = project.root / ".ai-sdlc" / "state" / "baselines"
    first = {p.name: json.loads(p.read_text()) for p in baselines.glob("*.json")}
    for cached in baselines.glob("*.json"):
        cached.unlink()

    project.env["AI_SDLC_GIT__KEEP_WORKTREES"] = "true"  # to count the trees left
    result = project.run(project.sid)

    assert result.returncode == 0, result.output
    assert "verifying the untouched base" in result.stderr
    assert project.frontmatter()["status"] == "done"
    again = {p.name: json.loads(p.read_text()) for p in baselines.glob("*.json")}
    assert again.keys() == first.keys()
    for name, verdict in again.items():  # the same base, the same verdict (the reason names
        verdict.pop("reason")  # the folder it ran in)
        first[name].pop("reason")
        assert verdict == first[name]
    trees = git(project.root, "worktree", "list", "--porcelain").count("worktree ")
    assert trees == 2  # the checkout and the story's; the temporary one is gone
