"""Issue 27 for the real Codex CLI (0.169) and Aider (0.86): installed from their registries
(`tests/realcli/install.py`), each driven by the real `ai-sdlc` CLI through a story in a real
src-layout project with its own venv and a bare origin, against a fake OpenAI on 127.0.0.1
(Responses API for Codex, Chat Completions for Aider) that scripts every phase and injects
faults. Run in their own xdist group: the tools are installed once per cache folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.git_support import git, git_env
from tests.realcli.codex_aider_support import (
    TOKENS_IN,
    TOKENS_OUT,
    Project,
    build_template,
)
from tests.realcli.openai_server import OpenAiServer

__all__ = ["git_env"]

pytestmark = [pytest.mark.xdist_group("realcli"), pytest.mark.usefixtures("git_env")]

CLIS = ["codex", "aider"]
#: What the CLIs print around the answer (Aider's banner, warnings, token lines).
CONSOLE = ("Aider v", "Model:", "Repo-map:", "Tokens:", "Git repo:", "HTTPSConnection", "Warning")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("realcli-calc")
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
def test_a_story_goes_from_backlog_to_done_with_a_real_commit(
    template: Path, tmp_path: Path, server: OpenAiServer, cli: str
) -> None:
    p = project(template, tmp_path, cli, server)

    result = p.run()

    assert result.returncode == 0, result.output
    fm = p.fm()
    assert fm["status"] == "done", result.output
    assert p.commits() == [f"feat({p.sid}): Multiply numbers"]
    branch = str(fm["branch"])
    assert git(p.root, "show", f"{branch}:src/calc/mul.py") == "def mul(a, b):\n    return a * b\n"
    assert git(p.origin, "rev-parse", f"refs/heads/{branch}").strip()
    assert p.model.served.count("implement") >= 1
    # the artifacts are the model's words only, never the CLI's console
    for name in ("research.md", "plan.md", "review.md"):
        text = p.artifact(name)
        assert not any(mark in text for mark in CONSOLE), (name, text)
    assert "calc lives in src/calc" in p.artifact("research.md")
    # usage as the CLI reported it: the server's own counts for every answered request
    usage = fm["usage"]
    answered = server.answered()
    assert usage["input_tokens"] == TOKENS_IN * answered, (usage, answered)
    assert usage["output_tokens"] == TOKENS_OUT * answered
    assert p.recoveries() == []
