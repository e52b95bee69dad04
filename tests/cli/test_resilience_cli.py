"""`ai-sdlc metrics` through the real entry point, on metrics written with the real API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.errors import ExitCode
from ai_sdlc.providers.base import TransientProviderError
from ai_sdlc.resilience import CircuitBreakerOpenError, PolicyManager
from ai_sdlc.resilience.clock import ManualClock

pytestmark = pytest.mark.e2e


def ai_sdlc(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_SDLC_")}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "ai_sdlc", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".ai-sdlc").mkdir()
    return tmp_path


def record_some_calls(project: Path) -> None:
    """One first-try success, one success after a retry, then an outage that trips the breaker."""
    clock = ManualClock()
    manager = PolicyManager(
        project_root=project, clock=clock, sleep=clock.sleep, rand=lambda: 0.5, budget=False
    )
    manager.execute_with_policy("llm", lambda: "ok")
    outcomes = iter([TransientProviderError("busy", kind="overloaded", status=529), "ok"])

    def flaky() -> str:
        value = next(outcomes)
        if isinstance(value, Exception):
            raise value
        return value

    manager.execute_with_policy("llm", flaky)

    def down() -> str:
        raise TransientProviderError("down", kind="server", status=503)

    for _ in range(3):
        with pytest.raises((TransientProviderError, CircuitBreakerOpenError)):
            manager.execute_with_policy("llm", down)
    manager.execute_with_policy("verification", lambda: "passed")


def test_metrics_json(project: Path) -> None:
    record_some_calls(project)
    result = ai_sdlc(project, "metrics", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    llm = report["policies"]["llm"]
    assert llm["operations"] == 5 and llm["successes"] == 2 and llm["failures"] == 3
    assert llm["first_try_successes"] == 1 and llm["successes_after_retry"] == 1
    assert llm["exhausted_retries"] == 1 and llm["breaker_rejections"] == 2
    # delays: 1 (flaky), 1 + 2 (exhausted), 1 (the retry the open breaker rejected)
    assert llm["retries"] == 4 and llm["total_retry_delay"] == 5.0
    assert llm["average_retry_delay"] == 1.25
    assert llm["failure_rate"] == 0.6
    assert report["policies"]["verification"]["successes"] == 1
    assert report["policies"]["github"]["operations"] == 0
    breaker = report["breakers"]["llm"]
    assert breaker["state"] == "open" and 0 < breaker["retry_in"] <= 60
    assert (breaker["calls"], breaker["failed"], breaker["rejected"]) == (7, 5, 2)
    assert breaker["state_changes"] == 1
    assert "verification" not in report["breakers"]


def test_metrics_human_table_goes_to_stdout(project: Path) -> None:
    record_some_calls(project)
    result = ai_sdlc(project, "metrics")
    assert result.returncode == 0 and result.stderr == ""
    for text in ("Retry policies", "llm", "verification", "Circuit breakers", "open ("):
        assert text in result.stdout


def test_metrics_before_any_run(project: Path) -> None:
    result = ai_sdlc(project, "metrics")
    assert result.returncode == 0 and "No resilience metrics yet" in result.stderr
    empty = json.loads(ai_sdlc(project, "metrics", "--json").stdout)
    assert empty["breakers"] == {} and empty["policies"]["llm"]["operations"] == 0


def test_metrics_errors_are_messages_not_tracebacks(project: Path, tmp_path: Path) -> None:
    state = project / ".ai-sdlc" / "state"
    state.mkdir()
    (state / "metrics.json").write_text("{not json")
    bad = ai_sdlc(project, "metrics", "--json")
    assert bad.returncode == int(ExitCode.INVALID_INPUT)
    assert "metrics.json:1:2" in bad.stderr and "Traceback" not in bad.stderr

    elsewhere = tmp_path / "not-a-project"
    elsewhere.mkdir()
    missing = ai_sdlc(elsewhere, "metrics")
    assert missing.returncode != 0 and "no ai-sdlc project" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.parametrize(
    ("attempts", "trips"),
    [(2, False), (1, False), (2, True)],
    ids=["exhausted", "one-attempt", "breaker-open"],
)
def test_a_provider_still_failing_is_unavailable_with_why_and_what_to_do(
    tmp_path: Path, attempts: int, trips: bool
) -> None:
    """Through the real CLI: retries exhausted, or the breaker opened by the first failure,
    end the run with exit 4 and a message that says which, with the policy's own words."""
    from tests.conftest import run_cli
    from tests.support.runs_support import make_project, write_rules

    root = tmp_path / "p"
    make_project(
        root,
        ["Flaky"],
        f"resilience:\n  policies:\n    llm:\n      max_attempts: {attempts}\n"
        "      initial_delay: 0.001\n      max_delay: 0.002\n      jitter: 0\n"
        f"      breaker:\n        failure_threshold: {1 if trips else 100}\n",
    )
    write_rules(
        root,
        "rules:\n  - phase: refine\n    times: 5\n"
        "    fault: {kind: server, message: '503 from the upstream proxy'}\n",
    )
    result = run_cli(root, "run", "S-0001")
    assert result.returncode == ExitCode.PROVIDER_UNAVAILABLE, result.output
    lines = result.stderr.splitlines()
    if trips:
        # the time left is the real clock's (60 s, less the run's own time since it opened)
        opened = re.compile(
            r"error: S-0001 refine: the provider's circuit breaker is open \(circuit breaker "
            r"'llm' is open; next trial call in (\d+\.\d) s\)"
        )
        shown = [m for m in map(opened.fullmatch, lines) if m]
        assert len(shown) == 1 and 0 < float(shown[0][1]) <= 60, lines
        assert "  hint: the provider failed repeatedly; wait, or see 'ai-sdlc metrics'" in lines
    else:
        said = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        assert (
            f"error: S-0001 refine: the provider is still failing after {said} "
            "(retries exhausted): 503 from the upstream proxy"
        ) in lines, lines
        assert "  hint: run again later; every retry so far is counted on the story" in lines
