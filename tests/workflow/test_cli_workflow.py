"""Issue 3 through the real entry point: the runner, every recovery path, the global limit."""

from __future__ import annotations

import json
import multiprocessing
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRunner, cli_environment
from tests.support.records import records_folder
from tests.support.waits import wait_for_pid

PASSING_CODE = "def multiply(a, b):\n    return a * b\n"
FAILING_CODE = "def multiply(a, b):\n    return a + b\n"
TEST_CODE = "from calc import multiply\n\n\ndef test_multiply():\n    assert multiply(4, 5) == 20\n"


CHECK = "from calc import multiply; assert multiply(4, 5) == 20, 'multiply(4, 5) != 20'"


#: For the verification's real pytest: the tiny project needs none of the plugins of this venv
#: (hypothesis, xdist, ...), whose loading is two thirds of a pytest run here (0.6 s to 0.2 s).
NO_PLUGINS = ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def setup_python_project(
    project: Path, *, fast_retries: bool = True, real_pytest: bool = False
) -> None:
    """A tiny package whose tests are the judge, run without a shell: real pytest, or (faster,
    for tests about the runner rather than the judge) the same assertion as a python -c check."""
    (project / "calc").mkdir()
    (project / "calc" / "__init__.py").write_text(PASSING_CODE)
    (project / "tests").mkdir()
    (project / "tests" / "test_calc.py").write_text(TEST_CODE)
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\naddopts = "-q -p no:cacheprovider"\n'
    )
    if real_pytest:
        cmd = shlex.join([sys.executable, "-m", "pytest"])
    else:
        cmd = shlex.join([sys.executable, "-c", CHECK])
    settings: dict[str, object] = {"verify.test": cmd}
    if fast_retries:
        settings["resilience.policies.llm.initial_delay"] = 0.01
        settings["resilience.policies.llm.max_delay"] = 0.05
    configure(project, settings)


def configure(project: Path, settings: dict[str, object]) -> None:
    """Set dotted config keys in one round-trip edit of .ai-sdlc/config.yaml, comments kept.
    Set-up only: `ai-sdlc config KEY VALUE` (tested in test_config_layers) edits one key per
    call, under its lock and with its validation, at ~25 ms a key; every run validates the
    file it reads, so a bad value here still fails the test."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    path = project / ".ai-sdlc" / "config.yaml"
    yaml = YAML(typ="rt")
    doc = yaml.load(path.read_text(encoding="utf-8"))
    for dotted, value in settings.items():
        *parents, key = dotted.split(".")
        node = doc
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = CommentedMap()
            node = node[part]
        node[key] = value
    with path.open("w", encoding="utf-8") as out:
        yaml.dump(doc, out)


def rules(project: Path, text: str) -> None:
    (project / ".ai-sdlc" / "scripted.yaml").write_text(text)


def frontmatter(cli: CliRunner, sid: str) -> dict[str, Any]:
    result = cli("show", sid, "--json")
    assert result.returncode == 0, result.output
    return dict(json.loads(result.stdout)["frontmatter"])


def events(project: Path, sid: str) -> list[dict[str, Any]]:
    path = project / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def story_path(project: Path, sid: str) -> Path:
    return project / ".ai-sdlc" / "stories" / sid / "story.md"


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def set_field(project: Path, sid: str, line: str) -> None:
    path = story_path(project, sid)
    text = path.read_text()
    head, body = text[4:].split("\n---\n", 1)
    path.write_text("---\n" + head + "\n" + line + "\n---\n" + body)


def test_story_goes_from_backlog_to_done(
    cli: CliRunner, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(*NO_PLUGINS)
    setup_python_project(project, real_pytest=True)
    cli("add", "Add multiply")
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    fm = frontmatter(cli, "S-0001")
    assert fm["status"] == "done"
    for flag in (
        "research_complete",
        "plan_complete",
        "implementation_complete",
        "reviews_complete",
    ):
        assert fm[flag] is True
    folder = project / ".ai-sdlc" / "stories" / "S-0001"
    for name in ("research.md", "plan.md", "review.md"):
        assert "scripted provider (no AI)" in (folder / name).read_text()
    actions = [(e["action"], e.get("phase"), e.get("outcome")) for e in events(project, "S-0001")]
    assert ("phase", "implement", "passed") in actions
    assert ("phase", "review", "approved") in actions
    assert actions[-1] == ("done", None, "completed")
    assert fm.get("total_recovery_attempts", 0) == 0
    again = cli("run", "S-0001")
    assert again.returncode == 0
    assert "done" in again.stderr


def test_json_mode_prints_ndjson_events_on_stdout(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    result = cli("run", "S-0001", "--json")
    assert result.returncode == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    names = [e["event"] for e in lines]
    assert names[0] == "story_started"
    assert "phase_started" in names
    assert names[-1] == "run_finished"
    assert lines[-1]["outcomes"][0]["result"] == "done"


def test_implementation_retry_is_counted_and_fed_back(
    cli: CliRunner, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(*NO_PLUGINS)
    setup_python_project(project, real_pytest=True)
    cli("add", "Add multiply")
    rules(
        project,
        f"""
rules:
  - phase: implement
    attempt: 1
    files: {{calc/__init__.py: {json.dumps(FAILING_CODE)}}}
  - phase: implement
    attempt: 2
    files: {{calc/__init__.py: {json.dumps(PASSING_CODE)}}}
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    fm = frontmatter(cli, "S-0001")
    assert fm["status"] == "done"
    assert fm["total_recovery_attempts"] == 1
    assert fm["recovery_breakdown"]["implementation_retry"] == 1
    failed = [e for e in events(project, "S-0001") if e.get("outcome") == "failed"]
    assert len(failed) == 1
    assert "assert" in failed[0]["feedback"]
    recovery = [e for e in events(project, "S-0001") if e["action"] == "recovery"]
    assert recovery[0]["recovery_kind"] == "implementation_retry"
    assert recovery[0]["counters"]["total_recovery_attempts"] == 1


def test_rework_after_rejection_is_counted(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    rules(
        project,
        """
rules:
  - phase: review
    times: 1
    decision: REJECTED
    feedback: Name the function clearly.
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    fm = frontmatter(cli, "S-0001")
    assert fm["status"] == "done"
    assert fm["recovery_breakdown"]["rework"] == 1
    assert fm["total_recovery_attempts"] == 1
    phases = [e.get("phase") for e in events(project, "S-0001") if e["action"] == "phase_started"]
    assert "rework" in phases


def test_refinement_iteration_is_counted(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Vague idea")
    rules(
        project,
        """
rules:
  - phase: refine
    times: 2
    decision: REJECTED
    feedback: Acceptance criteria are missing.
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    fm = frontmatter(cli, "S-0001")
    assert fm["recovery_breakdown"]["refinement"] == 2
    assert fm["refinement_count"] == 2
    assert fm["status"] == "done"


def test_api_retry_is_counted_with_its_delay(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    rules(
        project,
        """
rules:
  - phase: research
    times: 2
    fault: {kind: rate_limit, retry_after: 0.01}
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    fm = frontmatter(cli, "S-0001")
    assert fm["recovery_breakdown"]["api_retry"] == 2
    assert fm["total_recovery_attempts"] == 2
    retries = [e for e in events(project, "S-0001") if e.get("recovery_kind") == "api_retry"]
    assert len(retries) == 2
    assert all("delay" in e for e in retries)
    assert "rate" in result.stderr.lower()


def test_hand_edited_nine_blocks_at_ten_with_full_message(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    set_field(project, "S-0001", "total_recovery_attempts: 9")
    set_field(
        project,
        "S-0001",
        "recovery_breakdown:\n  implementation_retry: 3\n  rework: 2\n  api_retry: 3",
    )
    rules(
        project,
        """
rules:
  - phase: refine
    decision: REJECTED
    feedback: Not ready.
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output
    expected = (
        "Global recovery limit exceeded (10/10) for S-0001. Breakdown: 3 implementation "
        "retries, 2 rework cycles, 3 API retries, 1 refinement iteration, 1 unattributed. "
        "Run 'ai-sdlc unblock S-0001 --reset-retries' after fixing the cause."
    )
    assert expected in " ".join(result.stdout.split())
    fm = frontmatter(cli, "S-0001")
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 10
    assert fm["blocked_reason"] == expected
    assert fm["blocked_at"]


def test_a_blocked_story_runs_no_action(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    set_field(project, "S-0001", "total_recovery_attempts: 10")
    usage = project / ".ai-sdlc" / "state" / "scripted-usage.json"
    rules(project, "rules:\n  - phase: refine\n    respond: would be called\n")
    first = cli("run", "S-0001")
    assert first.returncode == 5
    assert "Global recovery limit exceeded (10/10)" in first.stdout
    assert not usage.exists()
    assert [e for e in events(project, "S-0001") if e["action"] == "phase_started"] == []
    before = tree(project / ".ai-sdlc" / "stories")
    second = cli("run", "S-0001")
    assert second.returncode == 5
    assert "blocked" in second.output
    assert tree(project / ".ai-sdlc" / "stories") == before
    assert not usage.exists()


def test_unblock_without_reset_blocks_again_on_next_recovery(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    set_field(project, "S-0001", "total_recovery_attempts: 10")
    assert cli("run", "S-0001").returncode == 5
    assert cli("unblock", "S-0001").returncode == 0
    again = cli("run", "S-0001")
    assert again.returncode == 5
    assert frontmatter(cli, "S-0001")["status"] == "blocked"
    assert cli("unblock", "S-0001", "--reset-retries").returncode == 0
    fm = frontmatter(cli, "S-0001")
    assert fm["total_recovery_attempts"] == 0
    done = cli("run", "S-0001")
    assert done.returncode == 0, done.output
    assert frontmatter(cli, "S-0001")["status"] == "done"


def test_counter_survives_separate_invocations_and_blocks(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    cli("config", "limits.global_recovery", "3")
    rules(
        project,
        """
rules:
  - phase: research
    fault: {kind: server}
""",
    )
    totals = []
    codes = []
    for _ in range(4):
        result = cli("run", "S-0001")
        codes.append(result.returncode)
        totals.append(frontmatter(cli, "S-0001").get("total_recovery_attempts", 0))
    # llm policy: 3 attempts (2 retries) per call, so the first run fails after 2 retries
    # (provider unavailable), the second reaches the limit of 3 and blocks.
    assert codes[0] == 4
    assert totals[0] == 2
    assert codes[1] == 5
    assert totals[1] == 3
    assert codes[2:] == [5, 5]
    assert totals[2:] == [3, 3]


def _record_at_nine(root: str, barrier: Any, results: Any) -> None:
    from ai_sdlc.errors import StoryBlockedError
    from ai_sdlc.store import StoryStore
    from ai_sdlc.workflow.state.transitions import StoryState

    ledger = StoryState(StoryStore(Path(root)), limit=10)
    barrier.wait()
    try:
        ledger.record_recovery("S-0001", "implementation_retry")
        results.put("recorded")
    except StoryBlockedError:
        results.put("blocked")


def test_concurrent_recoveries_at_nine_both_end_blocked(cli: CliRunner, project: Path) -> None:
    cli("add", "Race")
    set_field(project, "S-0001", "total_recovery_attempts: 9")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_record_at_nine, args=(str(project), barrier, results)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert sorted(results.get(timeout=5) for _ in procs) == ["blocked", "blocked"]
    fm = frontmatter(cli, "S-0001")
    assert fm["total_recovery_attempts"] == 11
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"]["implementation_retry"] == 2


#: A verification command that writes its pid to argv[1], then waits (at most 60 s) until the
#: file argv[2] exists: holds a run mid-phase for exactly as long as a test needs, no longer.
GATED = (
    "import os, pathlib, sys, time\n"
    "pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))\n"
    "deadline = time.monotonic() + 60\n"
    "while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline:\n"
    "    time.sleep(0.02)\n"
)


def gated_build(project: Path) -> tuple[str, Path, Path]:
    """(verify.build command, its pid file, the file that releases it); outside the project,
    the pid file in its records folder (the project's sandbox.writable names it)."""
    records = records_folder(project)
    started, release = records / "build-started", records / "build-release"
    return shlex.join([sys.executable, "-c", GATED, str(started), str(release)]), started, release


def test_second_run_on_the_same_story_is_refused(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    gated, started, release = gated_build(project)
    cli("config", "verify.build", gated)
    cli("add", "Add multiply")
    first = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), "run", "S-0001"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=cli_environment({"PYTHONFAULTHANDLER": "1"}),  # the suite's user, its own state
    )
    wait_for_pid(started, writer=first)  # the first run is verifying: it holds the run lock
    second = cli("run", "S-0001")
    release.touch()
    first.communicate(timeout=120)
    assert second.returncode == 1, second.output
    assert "already being run" in second.stderr
    assert f"pid {first.pid}" in second.stderr


def test_a_killed_run_does_not_leave_the_story_locked(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    gated, started, release = gated_build(project)
    cli("config", "verify.build", gated)
    cli("add", "Add multiply")
    killed_tmp = project.parent / "killed-tmp"
    killed_tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), "run", "S-0001"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        # The suite's user: the scripted provider named, its own state; the killed run's temp
        # folders (it cannot remove them) in the test's folder.
        env=cli_environment({"TMPDIR": str(killed_tmp), "PYTHONFAULTHANDLER": "1"}),
    )
    wait_for_pid(started, writer=proc)  # killed mid-phase, with the run lock held
    proc.kill()
    proc.wait()
    release.touch()  # the orphaned verification ends too
    cli("config", "verify.build", "null")
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output


def test_dry_run_and_status_never_change_a_byte(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    cli("add", "Second")
    before = tree(project)
    for args in (
        ["run", "--dry-run"],
        ["run", "S-0001", "--dry-run"],
        ["run", "--auto", "--dry-run", "--json"],
        ["run", "S-0001", "--provider", "dry-run"],
    ):
        result = cli(*args)
        assert result.returncode == 0, (args, result.output)
    # --dry-run writes nothing at all: no lock, no log, not even the listing cache.
    assert tree(project) == before
    plan = json.loads(cli("run", "--auto", "--dry-run", "--json").stdout)
    assert plan["stories"][0]["phases"] == ["refine", "research", "plan", "implement", "review"]

    def stories_and_config() -> dict[str, bytes]:
        # `status` may refresh the git-ignored listing cache (.ai-sdlc/.cache), nothing else.
        return {k: v for k, v in tree(project).items() if not k.startswith(".ai-sdlc/.cache")}

    before = stories_and_config()
    for args in (["status"], ["status", "--json"], ["show", "S-0001"]):
        assert cli(*args).returncode == 0
    assert stories_and_config() == before


def test_invalid_scripted_rules_exit_3(cli: CliRunner, project: Path) -> None:
    cli("add", "x")
    rules(project, "rules:\n  - phase: deploy\n    respond: hi\n")
    result = cli("run", "S-0001")
    assert result.returncode == 3, result.output
    assert "scripted.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_gate_waits_for_approval(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("config", "gates.before_implementation", "true")
    cli("add", "Gated")
    first = cli("run", "S-0001")
    assert first.returncode == 0, first.output
    assert "ai-sdlc approve S-0001" in first.stdout
    fm = frontmatter(cli, "S-0001")
    assert fm["plan_complete"] is True and not fm.get("implementation_complete")
    assert cli("approve", "S-0001").returncode == 0
    assert cli("run", "S-0001").returncode == 0
    assert frontmatter(cli, "S-0001")["status"] == "done"


def test_run_without_story_runs_the_next_story_to_done(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Later", "--priority", "9")
    cli("add", "First", "--priority", "1")
    result = cli("run")  # the next story by priority, taken to done (issue 36 item 9)
    assert result.returncode == 0, result.output
    assert frontmatter(cli, "S-0002")["status"] == "done"
    assert frontmatter(cli, "S-0001")["status"] == "backlog"
    auto = cli("run", "--auto")
    assert auto.returncode == 0, auto.output
    assert frontmatter(cli, "S-0001")["status"] == "done"
    assert frontmatter(cli, "S-0002")["status"] == "done"


@pytest.mark.parametrize("title", ['$(touch pwned) `touch pwned2`; rm -rf / && echo "x"'])
def test_story_text_is_never_executed(cli: CliRunner, project: Path, title: str) -> None:
    setup_python_project(project)
    cli("add", title)
    assert cli("run", "S-0001").returncode == 0
    assert not (project / "pwned").exists()
    assert not (project / "pwned2").exists()


def test_rate_limit_retries_alone_reach_the_global_limit(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("config", "limits.global_recovery", "5")
    cli("add", "Add multiply")
    rules(
        project,
        """
rules:
  - phase: refine
    fault: {kind: rate_limit, retry_after: 0.01}
""",
    )
    first = cli("run", "S-0001")
    assert first.returncode == 4, first.output  # 3 attempts, 2 retries: provider unavailable
    assert "still failing after 3 attempts" in first.stderr
    second = cli("run", "S-0001")
    assert second.returncode == 4, second.output
    third = cli("run", "S-0001")
    assert third.returncode == 5, third.output
    assert "Global recovery limit exceeded (5/5) for S-0001. Breakdown: 5 API retries." in (
        " ".join(third.stdout.split())
    )
    fm = frontmatter(cli, "S-0001")
    assert fm["recovery_breakdown"] == {"api_retry": 5}
    delays = [e["delay"] for e in events(project, "S-0001") if e.get("recovery_kind")]
    assert delays == [0.01] * 5


def test_two_identical_failures_with_no_change_stop_early(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    (project / "calc" / "__init__.py").write_text(FAILING_CODE)
    cli("add", "Add multiply")
    rules(project, "rules:\n  - phase: implement\n    respond: I changed nothing.\n")
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output
    assert "not making progress" in result.stdout
    fm = frontmatter(cli, "S-0001")
    assert fm["status"] == "blocked"
    # both failed attempts count; the second, identical and changing nothing, also stopped it
    assert fm["recovery_breakdown"] == {"implementation_retry": 2}
    implements = [
        e
        for e in events(project, "S-0001")
        if e["action"] == "phase_started" and e["phase"] == "implement"
    ]
    assert len(implements) == 2


def test_implementation_retry_limit_blocks_the_story(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("config", "limits.implementation_retries", "2")
    cli("add", "Add multiply")
    lines = ["rules:"]
    for attempt in range(1, 5):
        code = FAILING_CODE + f"\n# attempt {attempt}\n"
        lines += [
            "  - phase: implement",
            f"    attempt: {attempt}",
            f"    files: {{calc/__init__.py: {json.dumps(code)}}}",
        ]
    rules(project, "\n".join(lines) + "\n")
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output
    # Three failed attempts, each counted; the third is over the limit of 2 retries.
    assert "Implementation failed verification 3 times (limit 2 retries)" in result.stdout
    assert "multiply(4, 5) != 20" in result.stdout
    fm = frontmatter(cli, "S-0001")
    assert fm["total_recovery_attempts"] == 3
    assert fm["status"] == "blocked"


def test_review_recovery_is_an_implementation_retry(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    rules(
        project,
        """
rules:
  - phase: review
    times: 1
    decision: RECOVERY
    feedback: The implementation changed nothing.
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 0, result.output
    fm = frontmatter(cli, "S-0001")
    assert fm["status"] == "done"
    assert fm["recovery_breakdown"] == {"implementation_retry": 1}


def test_review_failed_blocks_with_the_reason(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("add", "Add multiply")
    rules(
        project,
        """
rules:
  - phase: review
    decision: FAILED
    feedback: The story asks for something the codebase cannot do.
""",
    )
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output
    assert "Review FAILED: The story asks for something the codebase cannot do." in result.stdout
    assert frontmatter(cli, "S-0001")["status"] == "blocked"


def test_refinement_limit_blocks_before_the_global_limit(cli: CliRunner, project: Path) -> None:
    setup_python_project(project)
    cli("config", "limits.refinement_iterations", "2")
    cli("add", "Vague")
    rules(
        project, "rules:\n  - phase: refine\n    decision: REJECTED\n    feedback: Still vague.\n"
    )
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output
    assert "Refinement did not converge after 3 iterations (limit 2): Still vague." in result.stdout
    fm = frontmatter(cli, "S-0001")
    assert fm["refinement_count"] == 3
    assert fm["total_recovery_attempts"] == 3


def test_unknown_provider_is_a_usage_error(cli: CliRunner) -> None:
    cli("add", "x")
    result = cli("run", "S-0001", "--provider", "nosuch")
    assert result.returncode == 2
    assert "unknown provider 'nosuch'" in result.stderr


def test_a_command_named_like_a_yaml_word_stays_a_command(cli: CliRunner) -> None:
    assert cli("config", "verify.test", "false").returncode == 0
    assert cli("config", "verify.test").stdout.strip() == "false"
    cli("config", "limits.implementation_retries", "0")  # one failed attempt says enough
    cli("add", "Judged by /bin/false")
    result = cli("run", "S-0001")
    assert result.returncode == 5, result.output  # `false` fails every verification
    said = " ".join(result.stdout.split())
    assert "failed verification 1 time (limit 0 retries)" in said
    assert "step 'test' failed with exit status 1" in said  # run as the command `false`
