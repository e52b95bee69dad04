"""A real project for the real agent CLIs: a git repository with a bare `origin`, the stand-in
`gh`, a story and a verify command that imports the agent's module, run through the real
`ai-sdlc` CLI. The tool-specific environment (base URL, key, config folder) comes from the test.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.fakes.gh_support import install_gh
from tests.support.git_support import git, make_repo

TITLE = "Add a greeting"
HELLO = 'def greet(name):\n    return f"Hello, {name}!"\n'
HELLO_DOC = '"""Greetings."""\n\n\n' + HELLO
#: The project's test: fails naming its test, as a runner does (a base whose test command names
#: no failing test is a broken verify command), until `hello.greet` greets.
CHECK = (
    "import sys, importlib.util as u; s = u.find_spec('hello'); "
    "s or print(\"ModuleNotFoundError: No module named 'hello'\"); "
    "ok = s is not None and __import__('hello').greet('Ada') == 'Hello, Ada!'; "
    "ok or print('FAILED test_hello.py::test_greet'); sys.exit(0 if ok else 1)"
)
ANSI = "\x1b["
#: The flags a researched and planned story has set.
PLANNED = ("research_complete", "plan_complete")


class RealProject:
    """The project, the story and the `ai-sdlc run` of it."""

    def __init__(
        self, tmp_path: Path, tool_bin: Path, env: dict[str, str], config: str = ""
    ) -> None:
        self.repo = make_repo(tmp_path)
        self.root = self.repo.root
        bin_dir = tmp_path / "bin"
        install_gh(bin_dir)
        self.env = {
            "PATH": os.pathsep.join([str(bin_dir), str(tool_bin.parent), os.environ["PATH"]]),
            "FAKE_GH_LOG": str(tmp_path / "gh.log"),
            "AI_SDLC_PROVIDER": "",
            # Exactly the sandbox a user gets (no sandbox.writable anywhere), the CLI's
            # state in ai-sdlc's private homes under this test's own state folder.
            "AI_SDLC_STATE_HOME": str(tmp_path / "state"),
            **env,
        }
        test = shlex.join([sys.executable, "-c", CHECK])
        (self.root / ".ai-sdlc" / "config.yaml").write_text(
            f"verify:\n  test: {json.dumps(test)}\n{config}"
        )
        self.sid = self.repo.story(TITLE)

    def start_at(self, phase: str) -> None:
        """The story left by hand at `phase` (`start_story_at`)."""
        start_story_at(self.root, self.sid, phase)

    def run(self, *args: str, timeout: float = 180) -> CliResult:
        result = run_cli(self.root, "run", self.sid, *args, env=self.env, timeout=timeout)
        assert "sandbox widened" not in result.stderr, result.stderr  # the user's defaults
        return result

    def story(self) -> dict[str, Any]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def events(self) -> list[dict[str, Any]]:
        path = self.root / ".ai-sdlc" / "stories" / self.sid / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def commits(self) -> list[str]:
        branch = str(self.story()["branch"])
        return git(self.root, "log", "--format=%s", f"main..{branch}").splitlines()

    def committed(self, path: str) -> str:
        return git(self.root, "show", f"{self.story()['branch']}:{path}")

    def committed_files(self) -> list[str]:
        """The files the story branch's commits changed."""
        branch = str(self.story()["branch"])
        return git(self.root, "diff", "--name-only", f"main...{branch}").split()


def start_story_at(root: Path, sid: str, phase: str) -> None:
    """The story as a user leaves it by editing its frontmatter by hand: refined (`ready`),
    and for "implement" researched and planned too, so a run starts at `phase` where the
    earlier phases are not what a test is about."""
    assert phase in ("research", "implement"), phase
    edits = [("status: backlog", "status: ready")]
    if phase == "implement":
        edits += [(f"{flag}: false", f"{flag}: true") for flag in PLANNED]
    path = root / ".ai-sdlc" / "stories" / sid / "story.md"
    text = path.read_text()
    for old, new in edits:
        assert f"\n{old}\n" in text, (old, text)
        text = text.replace(f"\n{old}\n", f"\n{new}\n", 1)
    path.write_text(text)
