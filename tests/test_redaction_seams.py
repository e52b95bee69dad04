"""Issue 22, cases 9 and 10 through the real CLI: one redaction at every way out.

Secrets are fed in the ways they really arrive: an `sk-proj-…` token and the value of an
environment variable named like a password in a review's feedback (agent text), a Bearer token in
a provider's error messages (an auth failure, then server errors that are retried), and a token
in the story's title. Then every stream of every command, every file under the project (the
story file, a copy of what the user wrote, aside), the git history and branch names of the
project and its origin, and the pull request `gh` was asked to open are searched for them.

The fake secrets are built at run time, so the repository's own secret scan never sees one.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli
from tests.support.fakes.gh_support import gh_calls, install_gh
from tests.support.git_support import git, git_env, make_repo  # noqa: F401  (fixture)
from tests.support.runs_support import make_project, only_run, story_states, write_rules

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

SID = "S-0001"
TOKEN = "sk-" + "proj-" + "Q7w" * 8  # agent text
PASSWORD = "Tr0ub4dor" + "-and-" + "staple-77"  # the value of DEPLOY_PASSWORD, in agent text
BEARER = "eyJ" + "hbGciOi" * 4  # a provider's error message: "Bearer <this>"
TITLE_TOKEN = "sk-" + "proj-" + "T1tle" * 5  # in the story's title
AGENT_SECRETS = (TOKEN, PASSWORD, BEARER)

#: Files that are the user's own story (or a copy of it): the title they typed stays there.
USER_COPIES = ("story.md", "checkpoints", ".cache")


PLAN = f"# Plan\n\nRotate {TOKEN} first (it is in the logs).\n"


def rules() -> str:
    feedback = f"The key {TOKEN} is hard-coded; the deploy password {PASSWORD} is logged too."
    return (
        "rules:\n"
        "  - phase: research\n    times: 2\n"
        f"    fault: {{kind: auth, message: 'upstream said: Authorization: Bearer {BEARER}'}}\n"
        "  - phase: research\n    times: 2\n"
        f"    fault: {{kind: server, message: '503 from the proxy for Bearer {BEARER}'}}\n"
        "  - phase: plan\n"
        f"    respond: {json.dumps(PLAN)}\n"
        "  - phase: review\n    story: S-0001\n    times: 1\n    decision: REJECTED\n"
        f"    feedback: {json.dumps(feedback)}\n"
        "  - phase: review\n    story: S-0002\n    times: 1\n    decision: REJECTED\n"
        f"    feedback: {json.dumps(feedback)}\n"
    )


def leaks(text: str, *, title_too: bool = True) -> list[str]:
    """The secrets found in `text`, in any case (a branch name is lower-cased)."""
    folded = text.lower()
    wanted = (*AGENT_SECRETS, TITLE_TOKEN) if title_too else AGENT_SECRETS
    return [s for s in wanted if s.lower() in folded]


def test_secrets_from_agents_providers_and_titles_reach_no_stream_or_file(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    root = repo.root
    bin_dir = tmp_path / "bin"
    install_gh(bin_dir)
    gh_log = tmp_path / "gh.log"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_GH_LOG": str(gh_log),
        "DEPLOY_PASSWORD": PASSWORD,
        "AI_SDLC_PROVIDER": "scripted",
    }
    sid = repo.story(f"Fix the login {TITLE_TOKEN} leak")
    assert sid == SID
    assert repo.story("Second story") == "S-0002"
    repo.commit_all("add the story")
    passing = shlex.join([sys.executable, "-c", "pass"])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"verify:\n  test: {json.dumps(passing)}\nrun:\n  cooldown_seconds: 0\n"
    )
    (root / ".ai-sdlc" / "scripted.yaml").write_text(rules())

    results: list[CliResult] = []

    def cli(*args: str, subprocess: bool = False) -> CliResult:
        result = run_cli(root, *args, env=env, timeout=180, subprocess=subprocess)
        results.append(result)
        return result

    first = cli("run", SID, subprocess=True)  # the provider's auth failure: exit 4
    assert first.returncode == 4, first.output
    assert "***" in first.stderr  # the error line was there, masked
    # In a run: the auth failure again (its state records the error), then server errors
    # retried, a review sent back (its feedback on the recovery line), done.
    second = cli("run", "--batch", SID)
    assert second.returncode == 0, second.output
    assert "recovery 3/10 (rework): The key *** is hard-coded; the deploy password ***" in (
        second.stderr
    ), second.stderr
    assert "crashed (upstream said: Authorization: ***)" in second.stderr, second.stderr
    fm = json.loads(cli("show", SID, "--json").stdout)["frontmatter"]
    assert fm["status"] == "done", fm
    assert fm["recovery_breakdown"] == {"api_retry": 2, "rework": 1}
    third = cli("run", "S-0002", "--json")  # the same feedback, as --json progress
    assert third.returncode == 0, third.output
    progress = [json.loads(line) for line in third.stdout.splitlines()]
    reworks = [e for e in progress if e.get("recovery_kind") == "rework"]
    assert reworks and "The key *** is hard-coded" in reworks[0]["reason"], third.stdout
    cli("log", SID)
    cli("log", SID, "--json")
    cli("status")
    cli("runs")
    report = root / "report.html"
    assert cli("report", SID, "--html", str(report)).returncode == 0  # its run, the batch
    assert cli("report", "--json").returncode == 0
    verbose = cli("-v", "run", SID)  # debug lines too
    assert verbose.returncode == 0, verbose.output

    # Both streams of every command.
    for result in results:
        assert not leaks(result.stdout + result.stderr), result.output
    # Every file under the project, its git folder included (loose objects are compressed:
    # the history is searched below).
    rules_file = root / ".ai-sdlc" / "scripted.yaml"  # the scripted agent itself: the source
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p != rules_file):
        text = path.read_bytes().decode("utf-8", "replace")
        copy = any(part in USER_COPIES for part in path.relative_to(root).parts)
        assert not leaks(text, title_too=not copy), path
        if path.name == "story.md":  # the user's title stays, but the slug (the branch) is ours
            slug = [ln for ln in text.splitlines() if ln.startswith("slug:")]
            assert slug and not leaks(slug[0]), slug
    assert report.exists() and "Fix the login *** leak" in report.read_text()
    # Commit subjects, branch and worktree names, in the project and on its origin.
    for where in (root, repo.origin):
        assert where is not None
        history = git(where, "log", "--all", "--format=%s%n%b")
        refs = git(where, "for-each-ref", "--format=%(refname)")
        assert not leaks(history + refs), history + refs
    assert f"feat({SID}): Fix the login *** leak" in git(root, "log", "--all", "--format=%s")
    # The pull request: title and body.
    creates = [c for c in gh_calls(gh_log) if c[:2] == ["pr", "create"]]
    assert len(creates) == 2
    assert not leaks(json.dumps(creates)), creates
    assert creates[0][creates[0].index("--title") + 1] == f"{SID}: Fix the login *** leak"


def test_a_slug_made_before_titles_were_redacted_names_no_branch_with_it() -> None:
    from ai_sdlc.git.worktrees import branch_for

    old_slug = f"fix-the-login-{TITLE_TOKEN.lower()}-leak"
    assert branch_for(SID, old_slug) == f"ai-sdlc/{SID}-fix-the-login"  # the token is masked


def test_the_diagnostic_writer_redacts_whatever_it_is_given(tmp_path: Path) -> None:
    from ai_sdlc.workflow.runs.runstate import RunRepository

    repo = RunRepository(tmp_path / ".ai-sdlc")
    run_id = "20261125T120000Z-abcdef"
    repo.folder(run_id).mkdir(parents=True)
    path = repo.write_diagnostic(
        run_id, {"stories": [{"last_error": f"401: Bearer {BEARER}", "reason": TOKEN}]}
    )
    text = path.read_text()
    assert not leaks(text) and text.count("***") == 2, text


#: Secrets built at run time (the repository's own secret scan never sees one).
RUN_TOKEN = "sk-" + "proj-" + "Zq8" * 8
RUN_PASSWORD = "Cor4l" + "-reef-" + "lantern-19"


def test_events_and_run_state_are_written_redacted(tmp_path: Path) -> None:
    """The agent's error (a provider refusing with a token in its message) and its review
    feedback (a token and the value of a password-named variable) reach the story's
    events.jsonl and the run's state.json only masked, however the text got there."""
    root = tmp_path / "p"
    make_project(root, ["Leaky"], "run:\n  cooldown_seconds: 0\n")
    feedback = f"The key {RUN_TOKEN} is hard-coded; the deploy password {RUN_PASSWORD} is logged."
    write_rules(
        root,
        "rules:\n"
        "  - phase: research\n    times: 1\n"
        f"    fault: {{kind: auth, message: 'upstream refused key {RUN_TOKEN}'}}\n"
        "  - phase: review\n    times: 1\n    decision: REJECTED\n"
        f"    feedback: {json.dumps(feedback)}\n",
    )
    result = run_cli(root, "run", "--batch", "S-0001", env={"DEPLOY_RUN_PASSWORD": RUN_PASSWORD})
    assert result.returncode == 0, result.output
    events = (root / ".ai-sdlc" / "stories" / "S-0001" / "events.jsonl").read_text()
    assert "upstream refused key ***" in events, events
    assert "The key *** is hard-coded; the deploy password *** is logged." in events, events
    state = only_run(root)
    assert story_states(state)["S-0001"]["last_error"] == "upstream refused key ***", state
    written = (root / ".ai-sdlc" / "runs" / state["run_id"] / "state.json").read_text()
    for path in (p for p in root.rglob("*") if p.is_file() and p.name != "scripted.yaml"):
        content = path.read_bytes().decode("utf-8", "replace")
        assert RUN_TOKEN not in content and RUN_PASSWORD not in content, path
    assert RUN_TOKEN not in written and RUN_TOKEN not in result.output
