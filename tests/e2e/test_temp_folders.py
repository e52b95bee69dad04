"""Nothing ai-sdlc makes in the temp folder outlives the command: the session's seeded bytecode,
each sandboxed child's private TMPDIR, the pytest reports and unconfined pycache of each
verification, the command agent's prompt files.

Each run goes through the real CLI with `TMPDIR` pointed at a private, empty folder, which must
be empty again when the command has ended: a sandboxed Python run to done with a command agent
(every phase, prompt files), an unconfined (`--no-sandbox`) run that blocks on failed
verification, a run halted by SIGTERM while its verification runs (a handshake: the step writes
its pid, then sleeps past any guard), and a sequence of in-process commands (a process running
many commands keeps nothing of the earlier ones until it exits: a command failing on bad
input, a sandboxed run to done and a sandboxed run blocked on failed verification)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli
from tests.e2e.test_honest_verification import ENV, Project, template
from tests.e2e.test_interrupts import GUARD, Point, _kill_leftovers, _pid_in, _running
from tests.e2e.test_interrupts import _project as blocking_project
from tests.support.git_support import git_env, make_repo
from tests.support.runs_support import frontmatter, start_cli, stop_or_explain
from tests.support.waits import wait_for_pid

__all__ = ["git_env", "template"]

pytestmark = [pytest.mark.usefixtures("git_env"), pytest.mark.e2e]


def left_in(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def run_in(project: Project, private_tmp: Path, *options: str) -> CliResult:
    """`ai-sdlc run <story> [options]` as a real process, with `TMPDIR` the test's own."""
    env = {**ENV, "TMPDIR": str(private_tmp)}
    return run_cli(
        project.root, "run", project.sid, *options, env=env, timeout=180, subprocess=True
    )


def one_verified_attempt(project: Project) -> None:
    """One attempt (`limits.implementation_retries: 0`) and no baseline run at the base
    (`verify.baseline: false`): retries and the baseline make the folders the attempt's
    verification makes (the sandboxed run to done at refine keeps its baseline)."""
    project.config("limits.implementation_retries", "0")
    project.config("verify.baseline", "false")


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    """An empty folder of the test's own for `TMPDIR`. Short, not below `tmp_path`: the fork
    server's Unix socket lives below it (at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="ai-sdlc-t-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_sandboxed_run_to_done_with_a_command_agent_leaves_nothing(
    template: Path, tmp_path: Path, private_tmp: Path
) -> None:
    """Every phase from refine to review by a command agent (a prompt file each), verified
    by pytest under the sandbox (seeded bytecode, the children's TMPDIR, pytest's reports)."""
    project = Project(template, tmp_path, "honest-py", at_refine=True)

    result = run_in(project, private_tmp)

    assert result.returncode == 0, result.output
    assert project.fm()["status"] == "done"
    assert {"refine", "implement", "review"} <= set(project.calls())
    assert left_in(private_tmp) == []


def test_an_unconfined_run_blocked_by_failed_verification_leaves_nothing(
    template: Path, tmp_path: Path, private_tmp: Path
) -> None:
    """`--no-sandbox` (each verification's own empty pycache folder and its reports), and the
    attempt fails verification (the agent breaks `add`): blocked, exit 5, in a real process.
    (One attempt, `limits.implementation_retries: 0`: the retries walk the same path. A
    sandboxed blocked run: `test_in_process_commands_leave_nothing_after_each`.)"""
    project = Project(template, tmp_path, "break-py")
    one_verified_attempt(project)

    result = run_in(project, private_tmp, "--no-sandbox")

    assert result.returncode == 5, result.output
    assert project.fm()["status"] == "blocked"
    assert project.calls().count("implement") == 1
    assert left_in(private_tmp) == []


def test_a_parallel_run_leaves_nothing_of_its_workers(tmp_path: Path, private_tmp: Path) -> None:
    """`run --auto -j 2`: each worker process (which ends without running the interpreter's
    exit hooks) closes its session, so its seeded bytecode goes with its story."""
    repo = make_repo(tmp_path)
    for n in range(2):
        repo.story(f"Story {n + 1}")
    config = repo.root / ".ai-sdlc" / "config.yaml"
    config.write_text(f"verify:\n  test: {sys.executable} -c pass\n")

    result = run_cli(
        repo.root,
        "run",
        "--auto",
        "-j",
        "2",
        env={"TMPDIR": str(private_tmp)},
        timeout=180,
        subprocess=True,
    )

    assert result.returncode == 0, result.output
    assert [frontmatter(repo.root, sid)["status"] for sid in ("S-0001", "S-0002")] == [
        "done",
        "done",
    ]
    assert left_in(private_tmp) == []


def test_a_run_halted_by_sigterm_during_verification_leaves_nothing(
    tmp_path: Path, private_tmp: Path
) -> None:
    """SIGTERM (a cancelled CI job) takes Ctrl-C's path: the hung verification step is ended,
    the run exits 130, and its temp folders (the step's TMPDIR, the session's bytecode, the
    reports folder) are gone with it."""
    root, agent_marker, verify_marker = blocking_project(tmp_path, Point("verify", verify=1))
    proc = start_cli(
        root, "run", "S-0001", env={"AI_SDLC_PROVIDER": "command", "TMPDIR": str(private_tmp)}
    )
    markers = (agent_marker, verify_marker)
    try:
        wait_for_pid(verify_marker, timeout=GUARD)
        assert left_in(private_tmp), "the run made no temp folder: nothing would be tested"
        proc.send_signal(signal.SIGTERM)
        _, stderr = stop_or_explain(proc, GUARD)
        assert proc.returncode == 130, f"exit {proc.returncode}:\n{stderr}"
        assert "error: interrupted" in stderr and "Traceback" not in stderr, stderr
        pid = _pid_in(verify_marker)
        assert pid is not None and not _running(pid, verify_marker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _kill_leftovers(markers)
    assert frontmatter(root, "S-0001").get("total_recovery_attempts", 0) == 0
    assert left_in(private_tmp) == []


def test_in_process_commands_leave_nothing_after_each(
    template: Path, tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process, many commands (as the suite, or a tool embedding ai-sdlc, runs them): the
    folders of each go when it ends, not when the process exits. A command failing on bad
    input, a blocked run and a run to done alike."""
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    project = Project(template, tmp_path, "honest-py")
    project.config("verify.baseline", "false")  # the baseline's folders: the run at refine
    config = project.root / ".ai-sdlc" / "config.yaml"
    good = config.read_text()

    config.write_text(good + "verify: [not, a, mapping\n")
    bad = run_cli(project.root, "run", project.sid, env=ENV)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr, bad.output
    assert left_in(private_tmp) == []

    config.write_text(good)
    done = run_cli(project.root, "run", project.sid, env=ENV, timeout=180)
    assert done.returncode == 0, done.output
    assert project.fm()["status"] == "done"
    assert left_in(private_tmp) == []

    (tmp_path / "broken").mkdir()
    broken = Project(template, tmp_path / "broken", "break-py")
    one_verified_attempt(broken)
    blocked = run_cli(broken.root, "run", broken.sid, env=ENV, timeout=180)
    assert blocked.returncode == 5, blocked.output
    assert left_in(private_tmp) == []
