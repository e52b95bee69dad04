"""Tests written to kill mutants that `make mutants` found surviving.

Each test pins a promise of the state owner, the ledger, the store, resilience or the stop
conditions that no other selected test pinned closely enough; docs/testing.md names the
mutants each one kills. Real files, real git, no mocks of our own code.
"""

from __future__ import annotations
