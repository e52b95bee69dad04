"""Where the suite's own files are, for tests at any depth of `tests/`."""

from pathlib import Path

#: The `tests/` folder.
TESTS = Path(__file__).resolve().parents[1]
#: The repository root (README, docs/, src/).
ROOT = TESTS.parent
#: Stand-in agents and tools (`tests/support/fakes/`).
FAKES = TESTS / "support" / "fakes"
#: Story files, runner outputs and other data (`tests/fixtures/`).
FIXTURES = TESTS / "fixtures"
