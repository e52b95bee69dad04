"""Breaker state and metrics shared through `.ai-sdlc/state/` by real, separate processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ai_sdlc.errors import InvalidInputError, StoryBlockedError
from ai_sdlc.providers.base import TransientProviderError
from ai_sdlc.resilience import (
    BreakerStore,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitBreakerOpenError,
    CircuitState,
    PersistentBreaker,
    PolicyManager,
    StateDir,
)
from ai_sdlc.resilience.clock import ManualClock
from ai_sdlc.resilience.errors import StateError

#: Child process: trips the project's `llm` breaker with real clocks and instant sleeps.
TRIP_LLM_BREAKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ai_sdlc.providers.base import TransientProviderError
    from ai_sdlc.resilience import CircuitBreakerOpenError, PolicyManager

    manager = PolicyManager(project_root=Path(sys.argv[1]), sleep=lambda s: None, budget=False)

    def down():
        raise TransientProviderError("overloaded", kind="overloaded", status=529)

    for _ in range(10):
        try:
            manager.execute_with_policy("llm", down)
        except CircuitBreakerOpenError:
            print("open")
            break
        except TransientProviderError:
            pass
    """
)

#: Child process: adds N successful `tool` operations, flushing after each.
COUNT_OPERATIONS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ai_sdlc.resilience import PolicyManager

    manager = PolicyManager(project_root=Path(sys.argv[1]), budget=False)
    for _ in range(int(sys.argv[2])):
        manager.execute_with_policy("tool", lambda: None)
    """
)


def run_child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60
    )


def test_an_open_breaker_is_seen_by_a_second_process(tmp_path: Path) -> None:
    # This process starts first, with a closed breaker...
    here = PolicyManager(project_root=tmp_path, budget=False)
    assert here.execute_with_policy("llm", lambda: "fine") == "fine"

    child = run_child(TRIP_LLM_BREAKER, str(tmp_path))
    assert child.returncode == 0 and child.stdout.strip() == "open", child.stderr

    # ...and at its next operation it adopts the open state without calling the service.
    calls: list[int] = []
    with pytest.raises(CircuitBreakerOpenError) as caught:
        here.execute_with_policy("llm", lambda: calls.append(1))
    assert calls == []
    assert caught.value.retry_in is not None and 50 < caught.value.retry_in <= 60


def test_a_restart_does_not_close_an_open_breaker(tmp_path: Path) -> None:
    assert run_child(TRIP_LLM_BREAKER, str(tmp_path)).stdout.strip() == "open"
    restarted = PolicyManager(project_root=tmp_path)
    breaker = restarted.breaker("llm")
    assert breaker is not None and breaker.state is CircuitState.OPEN
    stored = json.loads((tmp_path / ".ai-sdlc/state/breakers.json").read_text())
    assert stored["breakers"]["llm"]["state"] == "open"


def test_open_state_expires_by_wall_clock_across_restarts(tmp_path: Path) -> None:
    wall = ManualClock(start=1_000_000.0)
    first = PolicyManager(
        project_root=tmp_path, wall_clock=wall, sleep=lambda s: None, budget=False
    )
    first.persistent_breaker("llm").force_open(duration=30)  # type: ignore[union-attr]

    wall.advance(31)  # the process is gone for 31 s; a new one starts
    later = PolicyManager(project_root=tmp_path, wall_clock=wall, budget=False)
    assert later.execute_with_policy("llm", lambda: "trial ok") == "trial ok"
    stored = BreakerStore(StateDir(tmp_path), wall_clock=wall).load("llm")
    assert stored is not None and stored.state is CircuitState.CLOSED


def test_open_stored_by_another_process_wins_over_a_stale_close(tmp_path: Path) -> None:
    wall = ManualClock(start=5_000.0)
    store = BreakerStore(StateDir(tmp_path), wall_clock=wall)
    config = CircuitBreakerConfig(failure_threshold=1, open_timeout=60)
    clock_a, clock_b = ManualClock(), ManualClock()
    a = PersistentBreaker(CircuitBreaker(config, name="llm", clock=clock_a), store)
    b = PersistentBreaker(CircuitBreaker(config, name="llm", clock=clock_b), store)

    def down() -> None:
        raise TransientProviderError("x", kind="server")

    with pytest.raises(TransientProviderError):
        a.execute(down)  # A opens it
    b.refresh()
    assert b.breaker.state is CircuitState.OPEN
    for clock in (wall, clock_a, clock_b):
        clock.advance(60)
    with pytest.raises(TransientProviderError):
        a.execute(down)  # A's trial fails: open again until wall 5120
    # B never refreshed; its own trial succeeds, but A's newer open state wins.
    b.execute(lambda: None)
    assert b.breaker.state is CircuitState.OPEN
    stored = store.load("llm")
    assert stored is not None and stored.state is CircuitState.OPEN
    assert stored.open_until == pytest.approx(5_120.0)


def test_metrics_from_parallel_processes_add_up(tmp_path: Path) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", COUNT_OPERATIONS, str(tmp_path), "15"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for child in children:
        _, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    metrics = json.loads((tmp_path / ".ai-sdlc/state/metrics.json").read_text())
    tool = metrics["policies"]["tool"]
    assert tool["operations"] == 60 and tool["successes"] == 60 and tool["attempts"] == 60
    assert metrics["breakers"]["tool"]["calls"] == 60
    assert not list((tmp_path / ".ai-sdlc/state").glob("*.tmp"))


def test_flush_sends_only_new_counts(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = PolicyManager(project_root=tmp_path, clock=clock, auto_flush=False, budget=False)
    manager.execute_with_policy("llm", lambda: 1)
    clock.advance(10)
    manager.flush()
    manager.flush()  # nothing new: no change
    manager.execute_with_policy("llm", lambda: 2)
    clock.advance(5)
    manager.flush()
    metrics = json.loads((tmp_path / ".ai-sdlc/state/metrics.json").read_text())
    assert metrics["policies"]["llm"]["operations"] == 2
    assert metrics["breakers"]["llm"]["calls"] == 2
    assert metrics["breakers"]["llm"]["time_in_state"]["closed"] == pytest.approx(15.0)


def test_corrupt_state_file_is_a_clear_error(tmp_path: Path) -> None:
    state = tmp_path / ".ai-sdlc/state"
    state.mkdir(parents=True)
    (state / "breakers.json").write_text('{"breakers": {\n  "llm": oops}\n')
    with pytest.raises(InvalidInputError) as caught:
        PolicyManager(project_root=tmp_path)
    assert str(state / "breakers.json") + ":2:" in str(caught.value)
    assert caught.value.hint is not None and "delete the file" in caught.value.hint
    (state / "breakers.json").write_text("[1, 2]")
    with pytest.raises(InvalidInputError, match="expected a JSON object"):
        PolicyManager(project_root=tmp_path)


def test_written_files_are_not_left_private_by_mkstemp(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        manager = PolicyManager(project_root=tmp_path, budget=False)
        manager.execute_with_policy("github", lambda: None)
    finally:
        os.umask(previous)
    assert (tmp_path / ".ai-sdlc/state/metrics.json").stat().st_mode & 0o777 == 0o644


def test_state_write_failure_is_a_clear_error_and_never_hides_a_guardrail_stop(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    manager = PolicyManager(project_root=tmp_path, clock=clock, sleep=clock.sleep, budget=False)
    (tmp_path / ".ai-sdlc").mkdir()
    (tmp_path / ".ai-sdlc/state").write_text("a file where the folder should be")
    with pytest.raises(StateError, match=r"cannot read .*breakers\.json: Not a directory"):
        manager.execute_with_policy("llm", lambda: None)
    with pytest.raises(StateError, match=r"cannot lock .*metrics\.json"):
        manager.execute_with_policy("verification", lambda: None)  # no breaker: fails at flush

    def hung() -> None:
        raise TimeoutError("verification command timed out")

    def block(attempt: int, delay: float, error: BaseException, reason: str) -> None:
        raise StoryBlockedError("global recovery limit", story_id="S-0003")

    with pytest.raises(StoryBlockedError):
        manager.execute_with_policy("verification", hung, on_retry=block)
    assert manager.metrics()["verification"]["aborted"] == 1
