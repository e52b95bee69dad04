"""Delay sequences per strategy and jitter bounds (property-based)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_sdlc.providers.base import TransientProviderError
from ai_sdlc.resilience import RetryConfig, RetryEngine, apply_jitter, base_delay, jitter_bounds
from ai_sdlc.resilience.clock import ManualClock


def _always_failing() -> None:
    raise TransientProviderError("down", kind="server", status=503)


def _delays(config: RetryConfig, rand: float = 0.5) -> list[float]:
    clock = ManualClock()
    engine = RetryEngine(config, clock=clock, sleep=clock.sleep, rand=lambda: rand)
    result = engine.execute(_always_failing)
    assert not result.success and result.stop_reason == "exhausted"
    assert [a.delay for a in result.attempts[1:]] == clock.sleeps
    return clock.sleeps


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("exponential", [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]),
        ("linear", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ("fixed", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
    ],
)
def test_exact_delay_sequence_per_strategy(strategy: str, expected: list[float]) -> None:
    config = RetryConfig(
        max_attempts=7, initial_delay=1.0, max_delay=10.0, strategy=strategy, jitter="none"
    )  # type: ignore[arg-type]
    assert _delays(config) == expected


def test_exponential_multiplier_three() -> None:
    config = RetryConfig(
        max_attempts=5, initial_delay=0.5, max_delay=100, multiplier=3, jitter="none"
    )
    assert _delays(config) == [0.5, 1.5, 4.5, 13.5]


def test_decorrelated_grows_from_previous_delay_within_cap() -> None:
    # rand = 0.5: next = initial + (max(initial, 3 * previous) - initial) / 2
    config = RetryConfig(max_attempts=5, initial_delay=1.0, max_delay=5.0, strategy="decorrelated")
    assert _delays(config) == [1.0, 2.0, 3.5, 5.0]


def test_custom_strategy_is_capped() -> None:
    config = RetryConfig(max_attempts=4, strategy=lambda n: n * 10.0, max_delay=25.0, jitter="none")
    assert _delays(config) == [10.0, 20.0, 25.0]


def test_huge_retry_numbers_do_not_overflow() -> None:
    delay = base_delay(
        "exponential",
        5000,
        initial=1.0,
        multiplier=10.0,
        max_delay=30.0,
        previous=0.0,
        rand=lambda: 0.0,
    )
    assert delay == 30.0


def test_jitter_applies_to_the_strategy_delay() -> None:
    # ±10 % with rand=0.0 gives the low end, rand→1 the high end (capped at max_delay).
    low = _delays(RetryConfig(max_attempts=3, jitter=0.1, max_delay=30), rand=0.0)
    assert low == pytest.approx([0.9, 1.8])
    full = _delays(RetryConfig(max_attempts=3, jitter="full"), rand=0.25)
    assert full == pytest.approx([0.25, 0.5])
    equal = _delays(RetryConfig(max_attempts=3, jitter="equal"), rand=0.0)
    assert equal == pytest.approx([0.5, 1.0])


jitters = st.one_of(
    st.sampled_from(["none", "full", "equal"]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)


@given(
    delay=st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
    jitter=jitters,
    r=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    max_delay=st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
)
def test_jitter_stays_within_bounds(
    delay: float, jitter: object, r: float, max_delay: float
) -> None:
    delay = min(delay, max_delay)
    low, high = jitter_bounds(delay, jitter)  # type: ignore[arg-type]
    value = apply_jitter(delay, jitter, lambda: r, max_delay)  # type: ignore[arg-type]
    assert 0.0 <= value <= max_delay
    assert min(low, max_delay) - 1e-9 <= value <= high + 1e-9


@given(
    retries=st.integers(min_value=1, max_value=12),
    jitter=jitters,
    seed=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_engine_delays_never_exceed_max_or_go_negative(
    retries: int, jitter: object, seed: float
) -> None:
    config = RetryConfig(max_attempts=retries + 1, initial_delay=0.7, max_delay=9.0, jitter=jitter)  # type: ignore[arg-type]
    for value in _delays(config, rand=seed):
        assert 0.0 <= value <= 9.0
