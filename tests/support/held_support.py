"""A story run by `tests/support/fakes/held_agent.py` on a real project: the helpers the held-files
end-to-end tests share (run, frontmatter, counted recoveries, commits on the branch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.support.git_support import git
from tests.support.paths import FAKES

AGENT = FAKES / "held_agent.py"
#: PYTEST_DISABLE_PLUGIN_AUTOLOAD: a project judged by this venv's own pytest (the flat layout)
#: does not load this venv's plugins, hypothesis, xdist & co. (1 s of each run's 1.2 s).
ENV = {"AI_SDLC_PROVIDER": "command", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


class HeldStory:
    """One story of the project at `root`, its agent doing `behaviour` and logging each call to
    `log`, in a records folder of its own outside the project that the project's
    `sandbox.writable` names (as a user widens the sandbox)."""

    def __init__(
        self,
        root: Path,
        log: Path,
        behaviour: str,
        title: str = "Multiply",
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.log = log
        #: More environment for every command (a state home of the test's own, where the
        #: agent writes into the caches every story shares).
        self.env = {**ENV, **(env or {})}
        log.parent.mkdir(parents=True, exist_ok=True)
        self.config("sandbox.writable", json.dumps([str(log.parent)]))
        self.config("ai.provider", "command")
        self.config("ai.command.template", json.dumps([
            sys.executable, str(AGENT), str(log), behaviour, "{phase}", "{prompt_file}"
        ]))  # fmt: skip
        self.sid = StoryStore(root).add(title).id

    def allow_test_changes(self) -> None:
        """The story's frontmatter says `allow_test_changes: true` (a human's choice)."""
        story = self.root / ".ai-sdlc" / "stories" / self.sid / "story.md"
        text = story.read_text()
        story.write_text(text.replace("\n---\n", "\nallow_test_changes: true\n---\n", 1))

    def config(self, key: str, value: str) -> None:
        done = run_cli(self.root, "config", key, value, env=self.env)
        assert done.returncode == 0, done.output

    def run(self) -> CliResult:
        return run_cli(self.root, "run", self.sid, env=self.env, timeout=300)

    def fm(self) -> dict[str, object]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def recoveries(self) -> list[dict[str, object]]:
        log = self.root / ".ai-sdlc" / "stories" / self.sid / "events.jsonl"
        found = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        return [e for e in found if e.get("action") == "recovery"]

    def commits(self) -> int:
        branch = str(self.fm()["branch"])
        return int(git(self.root, "rev-list", "--count", f"main..{branch}").strip())

    def assert_blocked_counted(self, said: str) -> None:
        """Never done: both attempts (limits.implementation_retries: 1) failed, each counted
        with a reason naming the held file; the reviewer never asked; nothing committed."""
        fm = self.fm()
        assert fm["status"] == "blocked", fm
        assert fm["recovery_breakdown"] == {"implementation_retry": 2}
        assert fm["total_recovery_attempts"] == 2
        reasons = [str(e.get("reason")) for e in self.recoveries()]
        assert len(reasons) == 2 and all(said in r for r in reasons), reasons
        assert "review" not in self.calls()
        assert self.commits() == 0

    def assert_done(self) -> None:
        fm = self.fm()
        assert fm["status"] == "done", fm
        assert fm.get("total_recovery_attempts", 0) == 0
        assert self.commits() >= 1


def configure(root: Path, template: list[str], writable: Path, env: dict[str, str]) -> None:
    """The project's config edited by hand, as a user would (the agent's command template and
    one more writable folder), then accepted with one `ai-sdlc config --accept`: one CLI call
    where `HeldStory` makes three (each a ruamel round-trip of the file, ~0.16 s)."""
    path = root / ".ai-sdlc" / "config.yaml"
    text = path.read_text()
    command = f"  provider: command\n  command:\n    template: {json.dumps(template)}\n"
    for old, new in (
        ("  provider: command\n", command),
        ("  writable: []", f"  writable: {json.dumps([str(writable)])}"),
    ):
        assert old in text, f"{old!r} not in {path}"
        text = text.replace(old, new, 1)
    path.write_text(text)
    done = run_cli(root, "config", "--accept", env=env)
    assert done.returncode == 0, done.output


class ImplementStory(HeldStory):
    """A `HeldStory` whose config is written once (`configure`) and whose story starts at its
    implementation (`start_at_implement`): for end-to-end runs whose promise is the
    implementation's verdict and its counting."""

    def __init__(
        self, root: Path, log: Path, behaviour: str, env: dict[str, str] | None = None
    ) -> None:
        self.root = root
        self.log = log
        self.env = {**ENV, **(env or {})}
        log.parent.mkdir(parents=True, exist_ok=True)
        template = [sys.executable, str(AGENT), str(log), behaviour, "{phase}", "{prompt_file}"]
        configure(root, template, log.parent, self.env)
        self.sid = StoryStore(root).add("Multiply").id
        start_at_implement(root, self.sid)


def start_at_implement(root: Path, sid: str, status: str = "ready") -> None:
    """The story's refine, research and plan marked done in its frontmatter (its status
    `status`), as a user hand-edits a story whose earlier phases are not in question: its run
    starts at the implementation (three agent calls fewer)."""
    story = root / ".ai-sdlc" / "stories" / sid / "story.md"
    text = story.read_text()
    for old, new in (
        ("\nstatus: backlog\n", f"\nstatus: {status}\n"),
        ("\nresearch_complete: false\n", "\nresearch_complete: true\n"),
        ("\nplan_complete: false\n", "\nplan_complete: true\n"),
    ):
        assert old in text, text
        text = text.replace(old, new, 1)
    story.write_text(text)
