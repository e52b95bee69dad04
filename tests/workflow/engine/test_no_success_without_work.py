"""No success without work (issue 23), end to end through the real CLI on a git project.

The agents are small command scripts (`ai.command.template`): each call saves the prompt it was
given (so a test reads exactly what the review was shown) and answers from a per-phase plan. A
stand-in Claude Code (`tests/support/fakes/agent_clis.py`) plays an agent whose writes are denied
while
it still reports success. An implement attempt that changes nothing, an answer without a
decision and a denied agent are each counted, and none reaches `done`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.fakes.agent_clis import install_agent
from tests.support.git_support import git, git_env, make_repo
from tests.support.records import records_folder, records_path

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

AGENT = """\
import json, pathlib, sys
plan_file, calls, phase, prompt_file = sys.argv[1:5]
calls = pathlib.Path(calls)
calls.mkdir(exist_ok=True)
n = len(list(calls.glob(phase + "-*.md"))) + 1
(calls / f"{phase}-{n}.md").write_text(pathlib.Path(prompt_file).read_text())
steps = json.loads(pathlib.Path(plan_file).read_text()).get(phase) or [{}]
step = steps[min(n, len(steps)) - 1]
for name, content in (step.get("files") or {}).items():
    path = pathlib.Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
defaults = {
    "refine": "A clear story.\\n\\nDECISION: APPROVED",
    "review": "Clean and tested.\\n\\nDECISION: APPROVED",
}
print(step.get("say", defaults.get(phase, "## Notes\\n\\nDone.")))
"""

MUL = "def mul(a, b):\n    return a * b\n"


class Project:
    """A git project (no remote) whose phases are done by the command agent above."""

    def __init__(
        self, tmp_path: Path, plan: dict[str, list[dict[str, Any]]], extra: str = ""
    ) -> None:
        self.root = make_repo(tmp_path, remote=False).root
        self.calls = records_path(self.root) / "calls"
        agent, plan_file = tmp_path / "agent.py", tmp_path / "plan.json"
        agent.write_text(AGENT)
        plan_file.write_text(json.dumps(plan))
        template = [sys.executable, str(agent), str(plan_file), str(self.calls)]
        template += ["{phase}", "{prompt_file}"]
        self.verified = records_path(self.root) / "verified.log"  # one line per verification
        count = f"open({str(self.verified)!r}, 'a').write('ran\\n')"
        test = shlex.join([sys.executable, "-c", count])
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"ai:\n  command:\n    template: {json.dumps(template)}\n"
            f"verify:\n  test: {json.dumps(test)}\n"
            "limits:\n  implementation_retries: 1\n  refinement_iterations: 1\n"
            "  review_rejections: 1\n" + extra
        )
        records_folder(self.root)  # the agent's calls, the verifications
        self.sid = StoryStore(self.root).add("Add multiplication").id

    def run(self) -> CliResult:
        return run_cli(self.root, "run", self.sid, "--provider", "command", timeout=120)

    def prompts(self, phase: str) -> list[str]:
        found = sorted(self.calls.glob(f"{phase}-*.md"), key=lambda p: int(p.stem.split("-")[1]))
        return [p.read_text() for p in found]

    def story(self) -> dict[str, Any]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def body(self) -> str:
        return StoryStore(self.root).get(self.sid).body


def test_an_implement_attempt_that_changes_nothing_is_counted_and_never_reviewed(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path, {"implement": [{"say": "Implemented mul() as planned."}]})

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.story()
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    assert "implement ✗ The implementation changed no file" in result.output
    assert "not making progress" in result.output
    assert len(project.prompts("implement")) == 2
    assert project.prompts("review") == []  # the reviewer was never asked
    # the second attempt was told why the first failed
    assert "Your previous attempt changed no file" in project.prompts("implement")[1]
    branch = str(fm["branch"])
    assert git(project.root, "rev-list", "--count", f"main..{branch}").strip() == "0"


def test_in_the_project_folder_itself_an_attempt_that_changes_nothing_is_counted_too(
    tmp_path: Path,
) -> None:
    """No worktree (`git.worktrees: false`): no story base, so the attempt's own change is
    judged (asked of git: the folder is a repository)."""
    project = Project(tmp_path, {"implement": [{}]}, extra="git:\n  worktrees: false\n")

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.story()
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    assert "changed no file in the project folder" in result.output
    assert project.prompts("review") == []


def test_a_story_with_no_change_at_review_is_sent_back_without_asking_the_reviewer(
    tmp_path: Path,
) -> None:
    """A story marked implemented whose branch holds nothing (its work lost, or never done):
    the review is not asked to approve nothing; the story goes back to implement, counted."""
    project = Project(tmp_path, {"implement": [{"files": {"calc.py": MUL}}]})
    with StoryStore(project.root).edit(project.sid) as story:
        for flag in ("research_complete", "plan_complete", "implementation_complete"):
            story.frontmatter[flag] = True
        story.frontmatter["status"] = "in-progress"

    result = project.run()

    assert result.returncode == 0, result.output
    fm = project.story()
    assert fm["status"] == "done" and fm["recovery_breakdown"] == {"implementation_retry": 1}
    assert "review: NO_CHANGE" in result.output
    (review,) = project.prompts("review")  # asked once, after the change was made
    assert "calc.py" in review.split("## The change", 1)[1]
    assert len(project.prompts("implement")) == 1


def test_the_review_is_shown_the_change_itself(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        {"implement": [{"files": {"calc.py": MUL, "README.md": "# project\n\nmul()\n"}}]},
    )

    result = project.run()

    assert result.returncode == 0, result.output
    assert project.story()["status"] == "done"
    (review,) = project.prompts("review")
    change = review.split("## The change", 1)[1].split("## Verification", 1)[0]
    assert "2 files changed (+4 -0)" in change
    assert "- A calc.py (+2 -0)" in change and "- M README.md (+2 -0)" in change
    assert "diff --git a/calc.py b/calc.py\nnew file mode 100644" in change
    assert "+    return a * b" in change and "+mul()" in change
    assert "passed on this change" in review
    # the suite ran once on the untouched base (the baseline) and once for the attempt: the
    # review reused the attempt's verdict (the commit in between changed no content)
    assert project.verified.read_text() == "ran\nran\n"


def test_a_refine_answer_without_a_decision_is_asked_again_then_counted(
    tmp_path: Path,
) -> None:
    error = "Error: litellm.APIConnectionError: the model provider could not be reached"
    project = Project(tmp_path, {"refine": [{"say": error}]})
    body = project.body()

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.story()
    assert fm["status"] == "blocked" and fm["refinement_count"] == 2
    assert fm["recovery_breakdown"] == {"refinement": 2}
    assert "Refinement did not converge" in result.output
    prompts = project.prompts("refine")
    assert len(prompts) == 4  # two refinements, each asked again once
    assert "Your previous answer had no decision" not in prompts[0]
    assert "Your previous answer had no decision" in prompts[1] and error in prompts[1]
    assert error not in project.body() and project.body() == body
    assert project.prompts("research") == []


def test_a_refine_answer_decided_when_asked_again_goes_on_uncounted(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        {
            "refine": [
                {"say": "Here is the refined story."},
                {"say": "# Multiplication\n\nmul(a, b) returns a * b.\n\nDECISION: APPROVED"},
            ],
            "implement": [{"files": {"calc.py": MUL}}],
        },
    )

    result = project.run()

    assert result.returncode == 0, result.output
    fm = project.story()
    assert fm["status"] == "done" and fm.get("total_recovery_attempts", 0) == 0
    assert project.body().startswith("# Multiplication")
    assert len(project.prompts("refine")) == 2


def test_a_review_answer_without_a_decision_is_asked_again_then_counted_as_rework(
    tmp_path: Path,
) -> None:
    project = Project(
        tmp_path,
        {
            "implement": [{"files": {"calc.py": MUL}}],
            "rework": [{"files": {"calc.py": MUL + "\n# reworked\n"}}],
            "review": [{"say": "Looks fine to me overall."}],
        },
    )

    result = project.run()

    assert result.returncode == 5, result.output
    fm = project.story()
    assert fm["status"] == "blocked" and fm["reviews_complete"] is False
    assert fm["recovery_breakdown"] == {"rework": 2}
    reviews = project.prompts("review")
    assert len(reviews) == 4  # two reviews, each asked again once
    assert all("## The change" in r and "calc.py" in r for r in reviews)
    assert "'DECISION: APPROVED' or 'DECISION: REJECTED'" in reviews[1]
    assert "Review rejected the story 2 times" in result.output


def test_an_agent_denied_its_writes_is_a_failed_attempt(tmp_path: Path) -> None:
    """Claude Code answers "permission denied" to a write and still reports success; the
    other file it wrote does not make the attempt a success."""
    root = make_repo(tmp_path, remote=False).root
    bin_dir = tmp_path / "bin"
    install_agent(bin_dir, "claude")
    test = shlex.join([sys.executable, "-c", "pass"])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  test: {json.dumps(test)}\nlimits:\n  implementation_retries: 1\n"
    )
    sid = StoryStore(root).add("Add multiplication").id
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_AGENT_FILES": json.dumps({"calc.py": MUL, "NOTES.md": "notes\n"}),
        "FAKE_AGENT_DENY": json.dumps(["calc.py"]),
        "AI_SDLC_PROVIDER": "",
    }

    result = run_cli(root, "run", sid, "--provider", "claude", env=env, timeout=120)

    assert result.returncode == 5, result.output
    fm = dict(StoryStore(root).get(sid).frontmatter)
    assert fm["status"] == "blocked" and fm["implementation_complete"] is False
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    assert "claude was denied 1 tool call during implement: Write(" in result.output
    branch = str(fm["branch"])
    assert git(root, "rev-list", "--count", f"main..{branch}").strip() == "0"
    # each failed attempt was rolled back (its patch kept): NOTES.md is not left behind
    worktree = root / str(fm["worktree_path"])
    assert not (worktree / "NOTES.md").exists()
    assert "NOTES.md" in (root / ".ai-sdlc" / "stories" / sid / "attempts" / "1.patch").read_text()
