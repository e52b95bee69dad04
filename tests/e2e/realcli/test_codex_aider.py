"""Issue 27 for the real Codex CLI (0.169) and Aider (0.86): installed from their registries
(`tests/e2e/realcli/install.py`), each driven by the real `ai-sdlc` CLI through a story in a real
git project with a bare origin (`codex_aider_support.build_template`), against a fake OpenAI on
127.0.0.1
(Responses API for Codex, Chat Completions for Aider) that scripts every phase and injects
faults. Run in their own xdist group: the tools are installed once per cache folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_sdlc.providers.command_presets import PRESETS
from tests.e2e.realcli.codex_aider_support import (
    TOKENS_IN,
    TOKENS_OUT,
    Project,
    build_template,
    refusal,
)
from tests.e2e.realcli.openai_server import OpenAiServer
from tests.e2e.realcli.project import HELLO, TITLE
from tests.support.git_support import git, git_env

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")

#: One xdist group per tool: its tests run one after another on one worker, beside the rest
#: of the suite (and the other tool's group) on the others.
CLIS = [
    pytest.param("codex", marks=pytest.mark.xdist_group("realcli-codex")),
    pytest.param("aider", marks=pytest.mark.xdist_group("realcli-aider")),
]
#: What the CLIs print around the answer (Aider's banner, warnings, token lines).
CONSOLE = ("Aider v", "Model:", "Repo-map:", "Tokens:", "Git repo:", "HTTPSConnection", "Warning")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("realcli-project")
    gitconfig = folder / "gitconfig"
    gitconfig.write_text("[user]\n\tname = T\n\temail = t@example.com\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        return build_template(folder)


@pytest.fixture
def server() -> Iterator[OpenAiServer]:
    with OpenAiServer() as running:
        yield running


def project(template: Path, tmp_path: Path, cli: str, server: OpenAiServer) -> Project:
    return Project(template, tmp_path, cli, server)


@pytest.mark.parametrize("cli", CLIS)
def test_a_story_goes_to_done_through_faults_a_refused_write_and_a_rework(
    template: Path, tmp_path: Path, server: OpenAiServer, cli: str
) -> None:
    """One story to done, asserted each way it can fail.

    The first requests meet 429, 500 and 503 (Aider) or 429 and 503 (Codex: each is a start
    of its own): Aider (litellm's own retries turned off by the preset) retries each itself
    and prints it, counted as printed; Codex with its provider's `request_max_retries = 0`
    fails the turn, and ai-sdlc's `llm` policy retries and counts.
    A read-only phase's model then edits a file: the preset's read-only mode refuses it
    (Codex's read-only sandbox, Aider's --dry-run), so nothing is written, counted or
    committed. Codex goes from backlog, its refine is the read-only phase that writes; its
    first review is REJECTED and sends the story to rework, the second approves. Aider (4 s
    of CPU per start) starts at implement, researched and planned by hand: its faults meet
    implement, its review is the read-only phase that writes and approves at once (rework
    runs the edit template implement runs). One real `feat(S-…)` commit, pushed."""
    p = project(template, tmp_path, cli, server)
    rework = cli == "codex"
    faults = (
        [refusal(429), refusal(503)] if rework else [refusal(status) for status in (429, 500, 503)]
    )
    p.model.fail(*faults)
    read_only = "refine" if rework else "review"
    p.model.writes[read_only] = {"hack.py": "HACKED = True\n"}
    if rework:
        p.model.answers["review"] = [
            "The names are unclear.\n\nDECISION: REJECTED\nName the arguments a and b.",
            "Clean and tested.\n\nDECISION: APPROVED",
        ]
    else:
        p.start_at("implement")

    result = p.run()

    assert result.returncode == 0, result.output
    fm = p.fm()
    assert fm["status"] == "done", result.output
    assert p.commits() == [f"feat({p.sid}): {TITLE}"]
    branch = str(fm["branch"])
    assert git(p.root, "show", f"{branch}:hello.py") == HELLO
    assert git(p.origin, "rev-parse", f"refs/heads/{branch}").strip()
    # the faults: each refused request is one counted api_retry, and only those
    assert server.refused() == len(faults), server.statuses
    kinds = [e.get("recovery_kind") for e in p.recoveries()]
    assert kinds == ["api_retry"] * len(faults) + (["rework"] if rework else []), p.recoveries()
    assert fm["total_recovery_attempts"] == len(kinds)
    # the refused write: the read-only phase was served its edit, and no file of it exists
    # anywhere (a write let through would also have been counted as a read-only violation)
    assert read_only in p.model.served
    assert "hack.py" not in git(p.root, "diff", "--name-only", f"main...{branch}")
    worktree = p.root / str(fm.get("worktree_path") or "gone")
    assert not (worktree / "hack.py").exists()
    served = [phase for phase in p.model.served if phase in ("implement", "rework", "review")]
    if rework:
        assert "rework" in served and served.count("review") >= 2, served
    else:
        assert served == ["implement", "review"], served  # no phase before implement ran
    # the artifacts are the model's words only, never the CLI's console
    for name in ("research.md", "plan.md", "review.md") if rework else ("review.md",):
        text = p.artifact(name)
        assert not any(mark in text for mark in CONSOLE), (name, text)
    if rework:
        assert "no hello module yet" in p.artifact("research.md")
    assert "Clean and tested." in p.artifact("review.md")
    # usage as the CLI reported it: the server's own counts for every answered request
    usage = fm["usage"]
    answered = server.answered()
    assert usage["input_tokens"] == TOKENS_IN * answered, (usage, answered)
    assert usage["output_tokens"] == TOKENS_OUT * answered
    if cli == "codex":  # Codex ran on ai-sdlc's private home; the user's is as it was
        assert sorted(p.codex_home.iterdir()) == [p.codex_home / "config.toml"]
        private = list((tmp_path / "state" / "homes").glob("*/codex/config.toml"))
        assert private and all("request_max_retries = 0" in f.read_text() for f in private)


@pytest.mark.parametrize("cli", CLIS)
def test_the_global_limit_stops_the_session_midway(
    template: Path, tmp_path: Path, server: OpenAiServer, cli: str
) -> None:
    """The server refuses every call; with `limits.global_recovery: 2` the story blocks at
    the second counted retry and the CLI is stopped there: the server saw exactly 2 calls
    (each of Codex's is a start of its own, retried by ai-sdlc's `llm` policy)."""
    p = project(template, tmp_path, cli, server)
    p.limit(2)
    p.model.fail(*[refusal(503)] * 20)

    result = p.run("--step", "refine")

    assert result.returncode == 5, result.output
    fm = p.fm()
    assert fm["status"] == "blocked", result.output
    assert fm["total_recovery_attempts"] == 2
    assert len(p.recoveries("api_retry")) == 2
    assert server.refused() == 2 == len(server.statuses), server.statuses


@pytest.mark.xdist_group("realcli-codex")
def test_a_write_a_read_only_template_lets_through_is_counted_and_undone(
    template: Path, tmp_path: Path, server: OpenAiServer
) -> None:
    """A user's own read-only template that lets writes through (Codex's edit command line,
    `--sandbox danger-full-access`, for every phase): the write happens, and ai-sdlc's
    read-only check reverts it and counts the attempt. The check is the runner's, the same
    for every CLI: it runs on Codex, whose start costs a tenth of Aider's."""
    p = project(template, tmp_path, "codex", server)
    edit = json.dumps(list(PRESETS["codex"].confined_template or ()))
    assert "danger-full-access" in edit
    p.command(template=edit, read_only_template=edit, output="codex-jsonl")
    p.model.writes["refine"] = {"hack.py": "HACKED = True\n"}

    result = p.run("--step", "refine")

    assert "refine" in p.model.served, result.output  # the model was asked, and wrote
    worktree = p.root / str(p.fm()["worktree_path"])
    assert not (worktree / "hack.py").exists(), result.output
    recoveries = p.recoveries()
    assert recoveries and all("hack.py" in str(e.get("reason")) for e in recoveries), recoveries
    assert p.fm()["total_recovery_attempts"] == len(recoveries)


@pytest.mark.parametrize("cli", CLIS)
def test_an_auth_failure_is_exit_4_with_the_clis_own_words(
    template: Path, tmp_path: Path, server: OpenAiServer, cli: str
) -> None:
    """401: never retried, exit 4, the CLI's message without terminal escapes (Aider exits 0
    after printing `litellm.AuthenticationError`: still a failure)."""
    p = project(template, tmp_path, cli, server)
    p.model.fail(*[refusal(401)] * 5)

    result = p.run("--step", "refine")

    assert result.returncode == 4, result.output
    assert "Incorrect API key provided" in result.stderr, result.stderr
    assert "\x1b[" not in result.output
    assert server.refused() == 1, server.statuses
    assert p.recoveries() == []
    assert p.fm()["status"] != "done"
