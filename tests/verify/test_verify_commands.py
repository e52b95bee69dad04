"""run_commands with real subprocesses: pass, fail, timeout (whole group), no shell, bounds."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest

from ai_sdlc.errors import ExitCode, InvalidInputError
from ai_sdlc.verify import SECRET_ENV_VARS, run_commands
from ai_sdlc.verify.commands import EXIT_NOT_FOUND
from tests.support.waits import GUARD, NEVER, wait_until_gone

PY = shlex.quote(sys.executable)


def py(code: str) -> str:
    """A command line running `code` with this interpreter (quoted for shlex.split)."""
    return f"{PY} -c {shlex.quote(code)}"


def test_all_steps_pass(tmp_path: Path) -> None:
    result = run_commands(
        [("build", py("print('built')")), ("test", py("print('tested')"))],
        cwd=tmp_path,
        timeout=30,
    )
    assert result.passed
    assert [s.name for s in result.steps] == ["build", "test"]
    assert [s.output for s in result.steps] == ["built\n", "tested\n"]
    assert all(s.exit_code == 0 and not s.timed_out for s in result.steps)
    assert (result.failure_output, result.normalised_failure, result.signature) == ("", "", "")
    assert result.failed_step is None


def test_empty_command_list_passes_with_no_steps(tmp_path: Path) -> None:
    result = run_commands([], cwd=tmp_path, timeout=1)
    assert result.passed
    assert result.steps == ()


def test_stops_at_first_failure_and_interleaves_stderr(tmp_path: Path) -> None:
    failing = py(
        "import sys\n"
        "print('out-1', flush=True)\n"
        "print('err-2', file=sys.stderr, flush=True)\n"
        "print('out-3', flush=True)\n"
        "sys.exit(3)"
    )
    marker = tmp_path / "never"
    result = run_commands(
        [("build", failing), ("test", py(f"open({str(marker)!r}, 'w')"))],
        cwd=tmp_path,
        timeout=30,
    )
    assert not result.passed
    assert [s.name for s in result.steps] == ["build"]
    assert result.steps[0].exit_code == 3
    assert result.failure_output == (
        "out-1\nerr-2\nout-3\n"
        "[ai-sdlc] step 'build' failed with exit status 3 (last output line: out-3)\n"
    )
    assert result.normalised_failure.startswith("step build failed (exit 3)\n")
    assert len(result.signature) == 16
    assert result.failed_step is result.steps[0]
    assert not marker.exists()


def test_runs_in_cwd_with_closed_stdin(tmp_path: Path) -> None:
    code = "import os, sys; print(os.getcwd()); print(repr(sys.stdin.read()))"
    result = run_commands([("test", py(code))], cwd=tmp_path, timeout=30)
    assert result.passed
    cwd_line, stdin_line = result.steps[0].output.splitlines()
    assert Path(cwd_line).resolve() == tmp_path.resolve()
    assert stdin_line == "''"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """The command and its child sleep `NEVER` seconds: only the kill ends them within the
    guard. The 3 s limit leaves the command time to start its child and say so on a loaded
    machine (the handshake the test reads) before it is killed."""
    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({NEVER})'])\n"
        f"open({str(pid_file)!r} + '.tmp', 'w').write(str(child.pid))\n"
        f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\n"
        "print('spawned', flush=True)\n"
        f"time.sleep({NEVER})"
    )
    started = time.monotonic()
    result = run_commands([("test", py(code))], cwd=tmp_path, timeout=3.0)
    assert time.monotonic() - started < GUARD  # killed, not waited for
    step = result.steps[0]
    assert step.timed_out and not result.passed
    assert pid_file.exists(), f"the command never started its child within 3 s:\n{step.output}"
    assert "spawned" in step.output and "timed out after 3s" in step.output
    assert "timed out" in result.normalised_failure
    wait_until_gone(int(pid_file.read_text()), "the timed-out command's child")


def test_output_held_open_by_a_leftover_child_does_not_hang(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({NEVER})'])\n"
        "print('parent done')"
    )
    started = time.monotonic()
    result = run_commands([("test", py(code))], cwd=tmp_path, timeout=GUARD)
    assert time.monotonic() - started < GUARD  # the leftover was killed, not waited for
    assert result.passed
    assert result.steps[0].output.startswith("parent done")


def test_missing_executable_is_a_failed_step(tmp_path: Path) -> None:
    result = run_commands(
        [("build", "definitely-not-a-real-tool-xyz --flag")], cwd=tmp_path, timeout=5
    )
    assert not result.passed
    step = result.steps[0]
    assert step.exit_code == EXIT_NOT_FOUND
    assert "definitely-not-a-real-tool-xyz" in step.output
    assert "not found" in step.output and "verify.build" in step.output
    assert result.signature


def test_shell_metacharacters_are_not_interpreted(tmp_path: Path) -> None:
    result = run_commands(
        [("test", "echo $(touch pwned) ; touch pwned2 && touch pwned3 | cat > pwned4")],
        cwd=tmp_path,
        timeout=10,
    )
    assert result.passed
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert (
        result.steps[0].output == "$(touch pwned) ; touch pwned2 && touch pwned3 | cat > pwned4\n"
    )


def test_malformed_command_line_names_the_config_key(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        run_commands([("test", "pytest 'unclosed")], cwd=tmp_path, timeout=5)
    assert "verify.test" in str(caught.value)
    assert caught.value.exit_code is ExitCode.INVALID_INPUT


def test_blank_command_line_is_invalid_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(InvalidInputError, match=r"verify\.build is an empty command line"):
        run_commands(
            [("test", py(f"open({str(marker)!r}, 'w')")), ("build", "   ")],
            cwd=tmp_path,
            timeout=5,
        )
    assert not marker.exists()


def test_output_is_bounded_keeping_head_and_tail(tmp_path: Path) -> None:
    code = "for i in range(20000): print(f'line {i:05d}')"
    result = run_commands([("test", py(code))], cwd=tmp_path, timeout=30, max_output=2000)
    output = result.steps[0].output
    assert len(output) < 2200
    assert output.startswith("line 00000\n")
    assert output.endswith("line 19999\n")
    assert "bytes of output not kept" in output


def test_secrets_are_not_passed_unless_env_is_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("AI_SDLC_VISIBLE", "yes")
    code = "import os; print(os.environ.get('OPENAI_API_KEY'), os.environ.get('AI_SDLC_VISIBLE'))"
    inherited = run_commands([("test", py(code))], cwd=tmp_path, timeout=30)
    assert inherited.steps[0].output == "None yes\n"
    explicit = run_commands(
        [("test", py(code))], cwd=tmp_path, timeout=30, env={"OPENAI_API_KEY": "given"}
    )
    assert explicit.steps[0].output == "given None\n"
    assert "OPENAI_API_KEY" in SECRET_ENV_VARS


def test_duration_uses_the_injected_clock(tmp_path: Path) -> None:
    ticks = iter([100.0, 102.5])
    result = run_commands(
        [("test", py("pass"))], cwd=tmp_path, timeout=30, clock=lambda: next(ticks)
    )
    assert result.steps[0].duration == 2.5


def test_result_serialises_for_logs(tmp_path: Path) -> None:
    result = run_commands([("test", py("raise SystemExit(2)"))], cwd=tmp_path, timeout=30)
    data = result.to_dict()
    assert data["passed"] is False
    assert data["steps"][0]["exit_code"] == 2
    assert data["steps"][0]["passed"] is False
    assert data["steps"][0]["argv"][0] == sys.executable
    assert data["signature"] == result.signature


def test_same_failure_twice_has_the_same_signature(tmp_path: Path) -> None:
    code = (
        "import os, sys, tempfile, time\n"
        f"d = tempfile.mkdtemp(dir={str(tmp_path)!r})\n"
        "print(f'FAILED {d}/test_x.py:3 - assert 1 == 2 (pid {os.getpid()}) in "
        "{time.perf_counter() % 1:.4f}s')\n"
        "sys.exit(1)"
    )
    first = run_commands([("test", py(code))], cwd=tmp_path, timeout=30)
    second = run_commands([("test", py(code))], cwd=tmp_path, timeout=30)
    assert first.failure_output != second.failure_output
    assert first.signature == second.signature


def test_missing_cwd_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such folder"):
        run_commands([("test", py("pass"))], cwd=tmp_path / "gone", timeout=5)
