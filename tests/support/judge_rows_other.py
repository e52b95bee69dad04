"""The verdict-table rows of one layout (tests/support/verdicts.py) on one project built once: a
row's end-to-end run through the real CLI pays for its own story (worktree and its set-up, agent
calls, verification, the judge), not for building the project, N `ai-sdlc config` calls and the
base's verification again.

`Layout` commits the project once per test (`template`); its honest row runs first, on a copy,
to done (from refine, or from implement); the baseline that run cached in the project's
`.ai-sdlc/state/baselines/` (keyed by base commit and verify commands: a copy has the same
commits) goes into the template, so every other row's copy finds its base already verified,
as a second story on the same base does. Each row gets its own copy of the project, its own
config file written whole (as a user writes one by hand: a project's first run records its
guardrails as accepted) and its own records folder; its story starts at implement (the
frontmatter flags a user sets by hand), the earlier phases not being what a row is about."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ai_sdlc.store import StoryStore
from tests.conftest import CliResult
from tests.support.git_support import git, make_repo, own_git_config
from tests.support.held_support import AGENT, ENV, HeldStory, start_at_implement

if TYPE_CHECKING:
    from tests.support.verdicts import Row


def config_text(
    log: Path, behaviour: str, settings: dict[str, object], *, agent: Path = AGENT
) -> str:
    """The project's whole config file: the stand-in `agent` (the held agent unless told)
    doing `behaviour` (logging to `log`, its records folder named in `sandbox.writable`) and
    `settings` (dotted key → value). JSON is YAML."""
    template = [sys.executable, str(agent), str(log), behaviour, "{phase}", "{prompt_file}"]
    values: dict[str, object] = {
        "ai.provider": "command",
        "ai.command.template": template,
        "sandbox.writable": [str(log.parent)],
        **settings,
    }
    nested: dict[str, object] = {}
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node = nested
        for name in parents:
            child = node.setdefault(name, {})
            assert isinstance(child, dict)
            node = child
        node[leaf] = value
    return json.dumps(nested, indent=2) + "\n"


class RowStory(HeldStory):
    """A `HeldStory` whose project config was written whole (no `ai-sdlc config` call)."""

    def __init__(
        self, root: Path, log: Path, env: dict[str, str] | None, *, at_implement: bool
    ) -> None:
        self.root = root
        self.log = log
        self.env = {**ENV, **(env or {})}
        self.sid = StoryStore(root).add("Multiply").id
        if at_implement:
            start_at_implement(root, self.sid, status="in-progress")

    def assert_blocked(self, said: str, attempts: int) -> None:
        """Never done: every attempt (`attempts`: limits.implementation_retries + 1) failed,
        each counted with a reason holding `said`; the reviewer never asked; nothing
        committed."""
        fm = self.fm()
        assert fm["status"] == "blocked", fm
        assert fm["recovery_breakdown"] == {"implementation_retry": attempts}
        assert fm["total_recovery_attempts"] == attempts
        reasons = [str(e.get("reason")) for e in self.recoveries()]
        assert len(reasons) == attempts and all(said in r for r in reasons), reasons
        assert self.calls().count("implement") + self.calls().count("rework") == attempts
        assert "review" not in self.calls()
        assert self.commits() == 0


class Layout:
    """One layout's project, committed once under `folder` by `build(root)`, with the config
    `settings` (verify.test, worktree.setup ...) and the environment `env(row folder)` of
    every run; its honest row from refine, or from implement (`honest_at_implement`)."""

    def __init__(
        self,
        folder: Path,
        build: Callable[[Path], None],
        settings: dict[str, object],
        env: Callable[[Path], dict[str, str]] | None = None,
        *,
        honest_at_implement: bool = False,
    ) -> None:
        self.folder = folder
        self.settings = settings
        self._env = env
        self.honest_at_implement = honest_at_implement
        folder.mkdir(parents=True, exist_ok=True)
        with own_git_config(folder):
            repo = make_repo(folder, remote=False)
            build(repo.root)
            repo.commit_all("the project, and a failing test for mul written first")
        self.template = repo.root

    def story(
        self, tmp_path: Path, behaviour: str, *, retries: int = 0, at_implement: bool = True
    ) -> RowStory:
        """A copy of the project for one row: its config (limits.implementation_retries:
        `retries`), its records folder, its story (at implement unless told otherwise)."""
        root = tmp_path / "proj"
        shutil.copytree(self.template, root, symlinks=True)
        git(root, "update-index", "-q", "--refresh")
        log = tmp_path / "records" / "agent.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        settings = {**self.settings, "limits.implementation_retries": retries}
        (root / ".ai-sdlc" / "config.yaml").write_text(config_text(log, behaviour, settings))
        env = self._env(tmp_path) if self._env is not None else None
        return RowStory(root, log, env, at_implement=at_implement)

    def run_honest(self, tmp_path: Path, behaviour: str) -> tuple[RowStory, CliResult]:
        """The honest row, run to its end; the baseline it cached (a second story on the same
        base finds it: the product's promise, asserted here) then goes into the template for
        every other row."""
        held = self.story(tmp_path, behaviour, retries=1, at_implement=self.honest_at_implement)
        result = held.run()
        cached = held.root / ".ai-sdlc" / "state" / "baselines"
        assert cached.is_dir() and any(cached.iterdir()), result.output
        shutil.copytree(cached, self.template / ".ai-sdlc" / "state" / "baselines")
        return held, result


def judge_rows(
    tmp_path: Path,
    made: Layout,
    rows: list[Row],
    *,
    two_attempts: Row | None = None,
    honest_said: Callable[[str], None] | None = None,
) -> None:
    """Every row of one layout in turn, in one test (so one process builds the project and
    verifies its base once: xdist would spread parametrised rows over its workers, each
    building it again), each in a folder of its own: the honest row first, to done (from
    refine unless `made` says otherwise), its stderr (one line per paragraph) checked by
    `honest_said`; each held row never done, each attempt counted with a reason naming the
    held file: both for `two_attempts` (limits.implementation_retries: 1), else its one. A
    row that fails does not hide the next: every failing row is reported, by name."""
    assert rows and not rows[0].said, "the layout's honest row comes first"
    failures: list[str] = []
    for row in rows:
        folder = tmp_path / row.behaviour
        try:
            if not row.said:
                held, result = made.run_honest(folder, row.behaviour)
                assert result.returncode == 0, result.output
                held.assert_done()
                if honest_said is not None:
                    honest_said(" ".join(result.stderr.split()))
                continue
            retries = 1 if row == two_attempts else 0
            held = made.story(folder, row.behaviour, retries=retries)
            result = held.run()
            assert result.returncode == 5, result.output
            held.assert_blocked(row.said, retries + 1)
        except AssertionError as exc:
            failures.append(f"{row.behaviour} ({row.change}): {exc}")
    assert not failures, "\n\n".join(failures)
