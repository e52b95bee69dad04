"""Rows of the verdict table judged one after another on one prepared story worktree.

Why: a row's end-to-end run is a whole `ai-sdlc run` (about 3 s of CPU: the worktree, its
environment, six agent calls, the base's verification, two attempts), and the rows of one
layout walk the same path; one or two end-to-end runs per layout pin that path (done; never
done with each attempt counted). What differs between the rows is the judge's verdict on the
agent's change. A `Bench` makes the story, its worktree, the worktree's environment and the
base's verification once, through the product's own `Session` (the project's config, sandbox,
verifier and judge); each row then runs the agent's implement call through the real `command`
provider under the story's sandbox, the session's sandboxed verification and `Judge.judge`,
and puts the worktree back with git. Real files, git, processes and sandbox; nothing of ours
stands in."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from ai_sdlc.providers.base import Phase, ProviderRequest, access_for
from ai_sdlc.providers.registry import create_provider
from ai_sdlc.store import StoryStore
from ai_sdlc.verify import VerificationResult
from ai_sdlc.verify.judge import Baseline
from ai_sdlc.workflow.session import Session
from tests.conftest import cli_environment, run_cli
from tests.support.git_support import git
from tests.support.held_support import AGENT, ENV, configure
from tests.support.judge_rows_other import config_text

_GITCONFIG = "[user]\n\tname = T\n\temail = t@example.com\n"


class Bench:
    """The story "Multiply" of the project at `root` (a copy this bench owns), its worktree
    prepared and its base verified; `records` is the agent's log folder, outside the project,
    named in `sandbox.writable` as a user widens the sandbox. The project's config: `init`'s,
    edited (`configure`), or, given `settings` (dotted key → value: verify.test,
    worktree.setup ...), written whole as a user writes one (`config_text`); either accepted
    with one `ai-sdlc config --accept`. `honest` is the agent's behaviour the config names."""

    def __init__(
        self,
        root: Path,
        records: Path,
        env: Mapping[str, str] = ENV,
        *,
        honest: str = "honest-py",
        settings: Mapping[str, object] | None = None,
    ) -> None:
        self.root = root
        self.records = records
        self.log = records / "agent.log"
        #: What every `run_cli` of the tests beside it passes (the held files' `ENV` unless told).
        self.env = dict(env)
        records.mkdir(parents=True, exist_ok=True)
        (records / "gitconfig").write_text(_GITCONFIG)
        with self.environment():
            if settings is None:
                configure(root, self.template(honest, AGENT), records, self.env)
            else:
                text = config_text(self.log, honest, dict(settings))
                (root / ".ai-sdlc" / "config.yaml").write_text(text)
                done = run_cli(root, "config", "--accept", env=self.env)
                assert done.returncode == 0, done.output
            self.store = StoryStore(root)
            self.sid = self.store.add("Multiply").id
            self.session = Session.open(
                self.store, provider_name="command", emit=lambda _event: None
            )
            deps = self.session.runner.deps
            story = self.store.get(self.sid)
            self.path = deps.workspaces.prepare(story).path
            base = deps.workspaces.base_commit(story, self.path)
            assert base is not None and deps.judge is not None
            self.base = base
            baseline = deps.judge.baseline(self.path, base, deps.verifier)
            assert baseline is not None
            self.baseline: Baseline = baseline
            #: The git-ignored files and folders of the prepared worktree (its environment:
            #: `.venv/`, `node_modules/` ...), which `restore` keeps.
            self.ignored = self._ignored()

    def template(self, behaviour: str, agent: Path) -> list[str]:
        return [sys.executable, str(agent), str(self.log), behaviour, "{phase}", "{prompt_file}"]

    @contextlib.contextmanager
    def environment(self, extra: Mapping[str, str] | None = None) -> Iterator[None]:
        """The process environment a `run_cli` call sees (with `extra`, and our own git
        identity) for the session's in-process calls, put back after."""
        saved = dict(os.environ)
        wanted = cli_environment({**self.env, **(extra or {})})
        os.environ.clear()
        os.environ.update(wanted)
        os.environ.update({
            "GIT_CONFIG_GLOBAL": str(self.records / "gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"
        })  # fmt: skip
        for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
            os.environ.pop(name, None)
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def judge(
        self,
        agent: Path,
        behaviour: str,
        *,
        allowed: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> VerificationResult:
        """The judge's verdict on one implement call of `agent` doing `behaviour` (with
        `allow_test_changes` as the story would say; `env`: more of the user's environment,
        e.g. PYTEST_ADDOPTS), the worktree put back after."""
        with self.environment(env):
            deps = self.session.runner.deps
            assert deps.judge is not None
            settings = dict(self.session.config.section("ai"))
            settings["command"] = {"template": self.template(behaviour, agent)}
            provider = create_provider("command", project_root=self.root, settings=settings)
            try:
                done = provider.execute(
                    ProviderRequest(
                        phase=Phase.IMPLEMENT,
                        prompt="Multiply two numbers.",
                        system_prompt="",
                        workspace=self.path,
                        access=access_for(Phase.IMPLEMENT),
                        timeout=120,
                        story_id=self.sid,
                        sandbox=deps.sandbox(self.path),
                    )
                )
                assert "Implemented." in done.text, done.text
                verdict = deps.verifier(self.path)
                return deps.judge.judge(
                    self.path, self.base, verdict, deps.verifier, allow_test_changes=allowed
                )
            finally:
                self.restore()

    def _ignored(self) -> set[str]:
        listed = git(
            self.path, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory"
        )
        return set(listed.splitlines())

    def restore(self) -> None:
        """The worktree as it was: tracked files back at the base, new files removed, new
        git-ignored ones too (a row's `test/node_modules/` must not judge the next row); the
        environment's git-ignored folders stay (the verifier makes a changed one again)."""
        git(self.path, "checkout", "-q", "-f", "HEAD", "--", ".")
        git(self.path, "clean", "-f", "-d", "-q")
        for name in sorted(self._ignored() - self.ignored):
            target = self.path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        assert git(self.path, "status", "--porcelain") == ""
        assert self._ignored() == self.ignored
