"""The real Gemini CLI (pinned in tests/e2e/realcli/install.py) driven by `ai-sdlc run` through the
`command` provider's `gemini` preset, against a fake Gemini API (tests/e2e/realcli/gemini_server.py)
on 127.0.0.1, reached through GOOGLE_GEMINI_BASE_URL.

Gemini CLI's own folder (GEMINI_CLI_HOME) holds what a user sets once: the auth type
(`security.auth.selectedType`) and the trusted project folder, which the story worktrees under
it inherit. A test without one of them checks the error the user gets instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.providers.command_presets import PRESETS
from ai_sdlc.providers.command_provider import render
from tests.e2e.realcli.gemini_server import INPUT_TOKENS, OUTPUT_TOKENS, GeminiServer
from tests.e2e.realcli.install import tool_path
from tests.e2e.realcli.model_server import Tool, Turn
from tests.e2e.realcli.project import ANSI, HELLO, TITLE, RealProject
from tests.support.fakes.agent_clis import install_agent
from tests.support.git_support import git_env

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.usefixtures("git_env"),
    pytest.mark.realcli,
    pytest.mark.slow,
]
#: Two xdist groups: a Gemini CLI start takes 5-10 s of a loaded machine and its backoff waits
#: 5 s and 10 s of real time, so one group would be the suite's tail; each test of a group
#: runs on one worker, in order.
FIRST = pytest.mark.xdist_group("realcli-gemini-1")
SECOND = pytest.mark.xdist_group("realcli-gemini-2")

CONFIG = "ai:\n  provider: command\n  model: gemini-test\n  command:\n    preset: gemini\n"


def write(path: str, content: str) -> Turn:
    args = {"file_path": "{cwd}/" + path, "content": content}
    return Turn(f"Writing {path}.", (Tool("write_file", args),))


def gemini_home(tmp_path: Path, *, trusted: Path | None, auth: bool = True) -> Path:
    """GEMINI_CLI_HOME: the auth type, the trusted folder, nothing sent anywhere else."""
    home = tmp_path / "gemini-home"
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    if auth:
        settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
    (folder / "settings.json").write_text(json.dumps(settings))
    if trusted is not None:
        (folder / "trustedFolders.json").write_text(json.dumps({str(trusted): "TRUST_FOLDER"}))
    return home


def gemini_env(home: Path, server: GeminiServer) -> dict[str, str]:
    return {
        "GEMINI_CLI_HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": server.url,
        "GEMINI_API_KEY": "test-key-not-a-secret",
        # no second node process with a bigger heap (2 s of each start on this machine)
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }


@pytest.fixture(scope="module")
def gemini() -> Path:
    return tool_path("gemini")


@pytest.fixture
def server() -> Any:
    with GeminiServer() as running:
        running.play("implement", [write("hello.py", HELLO), Turn("Implemented greet().")])
        yield running


def project(
    tmp_path: Path,
    gemini: Path,
    server: GeminiServer,
    config: str = "",
    *,
    trust: bool = True,
    auth: bool = True,
) -> RealProject:
    proj = RealProject(tmp_path, gemini, {}, CONFIG + config)
    home = gemini_home(tmp_path, trusted=proj.root if trust else None, auth=auth)
    proj.env.update(gemini_env(home, server))
    return proj


def recoveries(fm: dict[str, Any]) -> dict[str, int]:
    return dict(fm.get("recovery_breakdown") or {})


@FIRST
def test_a_story_goes_to_done_through_faults_and_a_refused_write(
    tmp_path: Path, gemini: Path, server: GeminiServer
) -> None:
    """One story to done with a commit, asserted each way it can fail. It starts at implement
    (refined, researched and planned by hand: each Gemini CLI start is 1.3 s of CPU; refine
    runs in the limit, auth and trust tests).

    Implement first meets a plain 500 and a 429 carrying the API's google.rpc.RetryInfo; each
    retry Gemini CLI logs is one `api_retry`, counted one for one, and the phase goes on: the
    plain one as "Attempt 1 failed with status 500. Retrying with backoff...", the other over
    several lines ("Attempt 2 failed: <message>" ... "Retrying after 10882ms..."; its backoff
    starts at 5 s and doubles, a RetryInfo only lengthens it). The review's model writes a
    file, then approves: the read-only phase's headless `default` approval mode answers the
    write with an error, nothing is written or counted, and the verdict read is the model's
    words after its tool call. The rework cycle is the runner's, run through a real CLI by
    the Codex test (rework runs the edit template implement runs here)."""
    server.retry_delay = "0.1s"
    server.retry_info_statuses = frozenset({429})
    server.fail(500)
    server.fail(429)
    server.play(
        "review",
        [write("notes.py", "x = 1\n"), Turn("Documented and tested.\n\nDECISION: APPROVED")],
    )
    proj = project(tmp_path, gemini, server)
    proj.start_at("implement")

    result = proj.run()

    assert result.returncode == 0, result.output
    fm = proj.story()
    assert fm["status"] == "done"
    assert proj.commits() == [f"feat({proj.sid}): {TITLE}"]
    assert proj.committed("hello.py") == HELLO
    assert server.phases() == ["implement", "implement", "review", "review"]
    # the faults, one for one: nothing else counted (a write let through in review would
    # have been a counted read-only violation)
    assert server.refused() == 2
    assert recoveries(fm) == {"api_retry": 2}
    assert fm["total_recovery_attempts"] == 2
    counted = [e for e in proj.events() if e.get("recovery_kind") == "api_retry"]
    assert len(counted) == 2, counted
    assert "HTTP 500" in json.dumps(counted[0]), counted  # the plain retry
    assert "exhausted" in json.dumps(counted[1]), counted  # the RetryInfo one, its message
    # the refused write: Gemini CLI answered the model's write with an error, never committed
    assert "notes.py" not in proj.committed_files()
    worktree = proj.root / str(fm.get("worktree_path") or "gone")
    assert not (worktree / "notes.py").exists()
    review = [b for b in server.bodies if "## Your task (review)" in json.dumps(b)]
    answered = json.dumps(review[1]["contents"])
    assert "functionResponse" in answered and "error" in answered
    # usage is Gemini CLI's own report (its result stats), not an estimate
    assert fm["usage"]["input_tokens"] == 4 * INPUT_TOKENS
    assert fm["usage"]["output_tokens"] == 4 * OUTPUT_TOKENS
    # the answer is the model's words after its last tool call: the review's verdict, not
    # the text before its write
    verdict = (proj.root / ".ai-sdlc" / "stories" / proj.sid / "review.md").read_text()
    assert "Documented and tested." in verdict and "Writing notes.py" not in verdict, verdict
    # Gemini CLI kept its state in ai-sdlc's private home (with copies of the user's settings
    # and trusted folders); the user's GEMINI_CLI_HOME holds only what the user wrote
    mine = tmp_path / "gemini-home" / ".gemini"
    assert sorted(p.name for p in mine.iterdir()) == ["settings.json", "trustedFolders.json"]
    private = list((tmp_path / "state" / "homes").glob("*/gemini/.gemini"))
    assert private and all((p / "trustedFolders.json").is_file() for p in private)


@SECOND
def test_the_global_limit_stops_a_session_mid_way(
    tmp_path: Path, gemini: Path, server: GeminiServer
) -> None:
    """`limits.global_recovery: 2`: a 429 carrying RetryInfo (logged over several lines),
    then plain 503s. Each retry is counted live, as Gemini CLI logs it, and the session is
    stopped at the second: no call after it."""
    server.retry_delay = "0.1s"
    server.retry_info_statuses = frozenset({429})
    server.fail(429)
    server.fail(503, times=50)
    proj = project(tmp_path, gemini, server, "limits:\n  global_recovery: 2\n")

    result = proj.run()

    assert result.returncode == 5, result.output
    fm = proj.story()
    assert fm["status"] == "blocked"
    assert recoveries(fm) == {"api_retry": 2}
    counted = [e for e in proj.events() if e.get("recovery_kind") == "api_retry"]
    assert "exhausted" in json.dumps(counted[0]) and "HTTP 503" in json.dumps(counted[1])
    # each retry was counted as Gemini CLI logged it: stopped at the second, no call after
    assert server.refused() == 2
    assert len(server.calls) == 2


@SECOND
def test_no_auth_type_an_untrusted_worktree_and_a_bad_key_are_exit_4_each_with_its_words(
    tmp_path: Path, gemini: Path, server: GeminiServer
) -> None:
    """A user fixing one thing at a time, each run exit 4 with Gemini CLI's reason, no
    terminal escapes. No auth type in the settings: the hint names the setting (Gemini CLI
    checks it first). Set as told, the story worktree, under a git.worktrees_dir outside the
    trusted project, is refused: the project's trust does not reach it, and the hint names
    the folder to trust and where. Trusted as told, Gemini CLI runs refine there and meets a
    401: the API's message, not retried. Only that last run reached the model."""
    server.fail(401, times=20)
    outside = tmp_path / "worktrees"
    proj = project(tmp_path, gemini, server, f"git:\n  worktrees_dir: {outside}\n", auth=False)

    no_auth = proj.run()

    assert no_auth.returncode == 4, no_auth.output
    assert "security.auth.selectedType" in no_auth.stderr, no_auth.stderr
    assert ANSI not in no_auth.output
    assert server.calls == []
    gemini_home(tmp_path, trusted=proj.root, auth=True)  # the auth type set as told

    untrusted = proj.run()

    assert untrusted.returncode == 4, untrusted.output
    assert "untrusted folder" in untrusted.stderr and ANSI not in untrusted.output
    assert f"trust {outside}" in untrusted.stderr, untrusted.stderr
    assert "trustedFolders.json" in untrusted.stderr  # where to trust it
    assert "security.auth.selectedType" not in untrusted.stderr  # that one was enough
    assert server.calls == []
    trust = tmp_path / "gemini-home" / ".gemini" / "trustedFolders.json"
    trust.write_text(json.dumps({str(proj.root): "TRUST_FOLDER", str(outside): "TRUST_FOLDER"}))

    bad_key = proj.run()

    assert bad_key.returncode == 4, bad_key.output
    assert "API key not valid" in bad_key.stderr, bad_key.stderr
    assert ANSI not in bad_key.output
    # Gemini CLI ran refine in the worktree it was told to trust, and did not retry the 401
    assert [(call.phase, call.status) for call in server.calls] == [("refine", 401)]
    worktree = Path(str(proj.story()["worktree_path"]))
    assert (worktree if worktree.is_absolute() else proj.root / worktree).parent == outside


# --- the stand-in against the real tool ---------------------------------------------------------


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _shape(event: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return str(event.get("type")), event.get("role"), event.get("status")


@SECOND
def test_the_stand_in_speaks_the_real_tools_stream(tmp_path: Path, gemini: Path) -> None:
    """For the same implement phase (write one file, then answer), the stand-in prints the
    event kinds the real Gemini CLI prints, with the fields the preset reads."""
    preset = PRESETS["gemini"]
    prompt = "## Your task (implement)\n\nAdd hello.py."
    streams: dict[str, list[dict[str, Any]]] = {}
    for name in ("real", "stand-in"):
        ws = tmp_path / name
        ws.mkdir()
        with GeminiServer() as server:
            server.play("implement", [write("hello.py", HELLO), Turn("Implemented greet().")])
            home = gemini_home(tmp_path / f"h-{name}", trusted=tmp_path)
            env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **gemini_env(home, server)}
            program = str(gemini)
            if name == "stand-in":
                program = str(install_agent(tmp_path / "fake-bin", "gemini"))
                env["FAKE_AGENT_FILES"] = json.dumps({"hello.py": HELLO})
            argv = render(preset.template, {"{model}": "gemini-test"})
            done = subprocess.run(
                [program, *argv[1:]],
                input=prompt,
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert done.returncode == 0, done.stderr
        assert (ws / "hello.py").read_text() == HELLO
        streams[name] = _events(done.stdout)
    real, fake = streams["real"], streams["stand-in"]
    assert [_shape(e) for e in fake] == [_shape(e) for e in real], (real, fake)
    for stream in (real, fake):
        result = stream[-1]
        assert result["type"] == "result" and result["status"] == "success"
        assert {"input_tokens", "output_tokens"} <= set(result["stats"])
        tool = next(e for e in stream if e["type"] == "tool_use")
        assert tool["tool_name"] == "write_file" and "file_path" in tool["parameters"]
