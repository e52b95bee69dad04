"""A real project and a scripted fake OpenAI for the real Codex CLI and Aider.

The project is a git repository whose verify command fails at the base naming its test until
`hello.greet` greets (`project.CHECK`), with a bare `origin` and the stand-in `gh`; its
config is written by hand as a user would. The model (`Model`) answers each phase by the
`## Your task (<phase>)` heading of our prompt, in the CLI's own way of editing: Codex calls
its `exec_command` tool, Aider returns a whole-file listing. Faults queued with `fail` are served
to the next requests instead of an answer; `OpenAiServer.statuses` keeps what every request got.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult, run_cli
from tests.e2e.realcli.install import tool_path
from tests.e2e.realcli.openai_server import OpenAiServer, last_tool_output, request_text
from tests.e2e.realcli.project import CHECK, HELLO, TITLE, start_story_at
from tests.support.fakes.api_server import Call, HttpError, RecordedRequest, Reply, Step
from tests.support.fakes.gh_support import install_gh
from tests.support.git_support import Repo, git, make_repo
from tests.support.worktree_env_support import copy_project

_TASK = re.compile(r"## Your task \((\w+)\)")
#: What each answered request reports as its usage (the test compares the story's usage).
TOKENS_IN, TOKENS_OUT = 1111, 222

ANSWERS = {
    "refine": "A clear story: add hello.greet(name) returning a greeting.\n\nDECISION: APPROVED",
    "research": "## Findings\n\nThe project has no hello module yet.",
    "plan": "## Plan\n\n1. Add hello.py with greet(name).\n2. The project's check passes.",
    "implement": "Implemented hello.greet as planned.",
    "rework": "Reworked hello.greet as the review asked.",
    "review": "Clean and tested.\n\nDECISION: APPROVED",
}


def phase_of(request: RecordedRequest) -> str | None:
    found = _TASK.findall(request_text(request))
    return found[-1] if found else None


@dataclass
class Model:
    """The scripted model behind the fake server, for `cli` ("codex" or "aider")."""

    cli: str
    server: OpenAiServer
    answers: dict[str, list[str]] = field(default_factory=dict)  # phase → answers in turn
    writes: dict[str, dict[str, str]] = field(default_factory=dict)  # phase → files it writes
    served: list[str] = field(default_factory=list)  # the phase of each answered request

    def __post_init__(self) -> None:
        self.server.responder = self.respond
        self.writes.setdefault("implement", {"hello.py": HELLO})
        self.writes.setdefault("rework", {"hello.py": HELLO})

    def fail(self, *steps: Step) -> None:
        self.server.script(*steps)

    def answer(self, phase: str) -> str:
        queue = self.answers.get(phase)
        if queue and len(queue) > 1:
            return queue.pop(0)
        return queue[0] if queue else ANSWERS[phase]

    def respond(self, request: RecordedRequest) -> Step:
        phase = phase_of(request)
        if phase is None:
            return Reply(text="ok", input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)
        self.served.append(phase)
        files = self.writes.get(phase, {})
        if self.cli == "codex":
            if files and last_tool_output(request) is None:
                script = " && ".join(
                    f"mkdir -p {os.path.dirname(path) or '.'} && printf %s {_sh(text)} > {path}"
                    for path, text in files.items()
                )
                return Reply(
                    calls=(Call("exec_command", {"cmd": script, "tty": False}),),
                    input_tokens=TOKENS_IN,
                    output_tokens=TOKENS_OUT,
                )
            return Reply(self.answer(phase), input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)
        listing = "".join(f"\n{path}\n```\n{text}```\n" for path, text in files.items())
        return Reply(
            self.answer(phase) + "\n" + listing, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT
        )


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def refusal(status: int) -> HttpError:
    kinds = {401: "invalid_request_error", 429: "rate_limit_exceeded", 503: "server_error"}
    message = "Incorrect API key provided" if status == 401 else "scripted failure"
    code = "invalid_api_key" if status == 401 else None
    return HttpError(status, kinds.get(status, "server_error"), message, code=code)


def build_template(folder: Path) -> Path:
    """The project, built once per module and copied per test: no venv for each worktree to
    set up (what a real CLI does does not depend on one; the worktree's environment has its
    own tests), and a verify command that needs none (`project.CHECK`, failing at the base
    naming its test), written into the config by hand as a user of such a project would."""
    root = make_repo(folder, remote=False).root
    test = shlex.join([sys.executable, "-c", CHECK])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        "ai:\n  provider: command\n  model: null\n\n"
        f"verify:\n  test: {json.dumps(test)}\n\nlimits:\n  implementation_retries: 2\n"
    )
    return root


class Project:
    """A copy of the template, driven by one real CLI against its own fake OpenAI."""

    def __init__(self, template: Path, tmp_path: Path, cli: str, server: OpenAiServer) -> None:
        self.cli = cli
        self.tmp = tmp_path
        self.repo: Repo = copy_project(template, tmp_path)
        self.root = self.repo.root
        origin = tmp_path / "origin.git"
        subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
        git(self.root, "remote", "add", "origin", str(origin))
        git(self.root, "push", "-q", "origin", "main")
        self.origin = origin
        self.server = server
        self.model = Model(cli, server)
        self.bin = tmp_path / "bin"
        install_gh(self.bin)
        exe = tool_path(cli)
        (self.bin / cli).symlink_to(exe)
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.env = {
            "PATH": f"{self.bin}{os.pathsep}{exe.parent}{os.pathsep}{os.environ['PATH']}",
            "FAKE_GH_LOG": str(tmp_path / "gh.log"),
            "AI_SDLC_PROVIDER": "",
            # Exactly the sandbox a user gets (no sandbox.writable anywhere), the CLI's
            # state in ai-sdlc's private homes under this test's own state folder.
            "AI_SDLC_STATE_HOME": str(tmp_path / "state"),
            # The user's home is the test's own: no dotfiles of this machine's (Codex sources
            # the login shell's profile at each start to snapshot its environment).
            "HOME": str(self.home),
        }
        model = "null"
        if cli == "codex":
            self._codex()
        else:
            self.env["OPENAI_API_KEY"] = "sk-test-aider"
            self.env["OPENAI_API_BASE"] = server.openai_base_url
            model = "openai/gpt-fake"
        self._configure(model)
        self.sid = self.repo.story(TITLE)

    def _configure(self, model: str) -> None:
        """The model and preset, and room for the tests' faults in ai-sdlc's own retries
        (Codex's failed turns) with no waiting: written into the project's config file by
        hand, as a user would, in one write (each `ai-sdlc config` call is a YAML round trip)."""
        path = self.root / ".ai-sdlc" / "config.yaml"
        text = path.read_text()
        assert "\n  model: null\n" in text and "\nresilience:" not in text, text
        text = text.replace(
            "\n  model: null\n", f"\n  model: {model}\n  command:\n    preset: {self.cli}\n", 1
        )
        text += (
            "\nresilience:\n  policies:\n    llm:\n"
            "      max_attempts: 5\n      initial_delay: 0.05\n      max_delay: 0.2\n"
        )
        path.write_text(text)

    def _codex(self) -> None:
        """The user's CODEX_HOME in the test's folder: a provider of their own at the fake
        server, written as users write it (no retry settings: Codex would retry 4 times by
        itself). ai-sdlc runs Codex on a private copy with those retries off, so its `llm`
        policy retries and counts each; the user's folder is never written."""
        codex_home = self.tmp / "codex-home"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model = "gpt-fake"\nmodel_provider = "fake"\n\n[model_providers.fake]\n'
            f'name = "fake"\nbase_url = "{self.server.openai_base_url}"\n'
            'wire_api = "responses"\nenv_key = "FAKE_OPENAI_KEY"\n'
        )
        self.env["CODEX_HOME"] = str(codex_home)
        self.env["FAKE_OPENAI_KEY"] = "sk-test-codex"
        self.codex_home = codex_home

    def command(self, **values: str) -> None:
        """More `ai.command` keys (values as YAML), written into the config file by hand like
        `_configure`'s."""
        path = self.root / ".ai-sdlc" / "config.yaml"
        marker = f"\n    preset: {self.cli}\n"
        text = path.read_text()
        assert marker in text, text
        lines = "".join(f"    {key}: {value}\n" for key, value in values.items())
        path.write_text(text.replace(marker, marker + lines, 1))

    def start_at(self, phase: str) -> None:
        """The story left by hand at `phase` (`project.start_story_at`)."""
        start_story_at(self.root, self.sid, phase)

    def limit(self, global_recovery: int) -> None:
        """`limits.global_recovery`, written into the config file by hand like `_configure`'s."""
        path = self.root / ".ai-sdlc" / "config.yaml"
        marker = "\nlimits:\n"
        text = path.read_text()
        assert marker in text and "global_recovery" not in text, text
        path.write_text(text.replace(marker, f"{marker}  global_recovery: {global_recovery}\n", 1))

    def run(self, *args: str) -> CliResult:
        result = run_cli(self.root, "run", self.sid, *args, env=self.env, timeout=600)
        assert "sandbox widened" not in result.stderr, result.stderr  # the user's defaults
        return result

    def fm(self) -> dict[str, Any]:
        return dict(StoryStore(self.root).get(self.sid).frontmatter)

    def events(self) -> list[dict[str, Any]]:
        log = self.root / ".ai-sdlc" / "stories" / self.sid / "events.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    def recoveries(self, kind: str | None = None) -> list[dict[str, Any]]:
        found = [e for e in self.events() if e.get("action") == "recovery"]
        return [e for e in found if kind is None or e.get("recovery_kind") == kind]

    def artifact(self, name: str) -> str:
        return (self.root / ".ai-sdlc" / "stories" / self.sid / name).read_text()

    def commits(self) -> list[str]:
        branch = str(self.fm()["branch"])
        return git(self.root, "log", "--format=%s", f"main..{branch}").splitlines()

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp / "home", ignore_errors=True)
