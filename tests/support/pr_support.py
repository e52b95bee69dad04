"""Shared by the pull-request loop's end-to-end tests: a git project with a bare `origin`, the
real `gh` against the fake GitHub API, the `openai` provider against the fake model API, and a
model (`PrAgent`) that writes a new version of `hello.py` on every implement or rework."""

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
from tests.support.fakes.api_server import Call, FakeApiServer, RecordedRequest, Reply, Step
from tests.support.fakes.github_api import FakeGitHub, gh_environment, real_gh, serve
from tests.support.fakes.story_agent import has_tool_results
from tests.support.git_support import Repo, git, make_repo
from tests.support.held_support import start_at_implement

_TASK = re.compile(r"## Your task \((\w+)\)")
#: The project's test: fails naming its test, as a runner does (a base that names none is a
#: broken verify command), until `hello.greet` says hello.
CHECK = (
    "import sys, importlib.util as u; s = u.find_spec('hello'); "
    "s or print(\"ModuleNotFoundError: No module named 'hello'\"); "
    "ok = s is not None and __import__('hello').greet('Ada').startswith('Hello'); "
    "ok or print('FAILED test_hello.py::test_greet'); sys.exit(0 if ok else 1)"
)


@dataclass
class PrAgent:
    """The model: implement and every rework write `hello.py` anew (a new version each time,
    so each round has work to commit); review approves; every prompt is kept by phase."""

    prompts: dict[str, list[str]] = field(default_factory=dict)
    version: int = 0
    #: What a rework answers after its edit (e.g. a `DECLINED <n>: why` line).
    rework_answer: str = "Done."

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
            return Reply(text=self.rework_answer if phase == "rework" else "Done.")
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

    def run(self, *args: str, story: str | None = None) -> CliResult:
        sid = story or self.story
        return run_cli(self.repo.root, "run", sid, *args, env=self.env, timeout=180)

    def add(self, title: str) -> str:
        return add_planned(self.repo.root, title, self.env)

    def fm(self, story: str | None = None) -> dict[str, object]:
        return dict(StoryStore(self.repo.root).get(story or self.story).frontmatter)

    def origin_tip(self, branch: str) -> str:
        assert self.repo.origin is not None
        return git(self.repo.origin, "rev-parse", f"refs/heads/{branch}").strip()

    def events(self, story: str | None = None) -> list[dict[str, object]]:
        path = self.repo.root / ".ai-sdlc" / "stories" / (story or self.story) / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line]


def add_planned(root: Path, title: str, env: dict[str, str]) -> str:
    """A story added through the CLI, then marked researched and planned by hand (as a user
    may edit its flags): the pull-request loop is the promise here, so its first run starts
    at implement."""
    added = run_cli(root, "add", title, env=env)
    assert added.returncode == 0, added.output
    sid = added.stdout.strip()
    start_at_implement(root, sid, status="in-progress")
    return sid


@pytest.fixture
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_env: None) -> Iterator[Loop]:
    """One story added (`Loop.story`, researched and planned); `auto_merge` on (and so the
    pull-request loop)."""
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
            "pr:\n  poll_seconds: 60\n"
        )
        env = {"AI_SDLC_PROVIDER": "", "OPENAI_API_KEY": "sk-test-pr-loop-0000"}
        yield Loop(repo, github, agent, env, add_planned(repo.root, "Greet people", env))
