"""Hypothesis profiles: the same examples on every `make test` run, a random search in `make fuzz`.

`HYPOTHESIS_PROFILE` picks one: `deterministic` (the default: examples derived from each test's
name, no example database, so CI passes or fails the same way every time), `fuzz` (a fresh
random seed, `FUZZ_FACTOR` times the examples, failures kept in `.hypothesis/` and replayed) or
`mutants` (`make mutants`: deterministic, a fifth of the examples, because each of thousands of
mutants reruns the property tests that reach it).
Imported by tests/__init__.py so it is loaded before any test module builds its settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "deterministic")
FUZZ_FACTOR = 50

settings.register_profile(
    "deterministic",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    derandomize=False,
    deadline=None,
    print_blob=True,
    max_examples=100 * FUZZ_FACTOR,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("mutants", parent=settings.get_profile("deterministic"))
settings.load_profile(PROFILE)


def examples(count: int, fuzz_base: int | None = None) -> int:
    """`count` examples in `make test`; under `make fuzz`, FUZZ_FACTOR times `fuzz_base` (a test
    too slow for its full count in every `make test` keeps its long search there)."""
    if PROFILE == "fuzz":
        return (fuzz_base or count) * FUZZ_FACTOR
    return max(10, count // 5) if PROFILE == "mutants" else count
