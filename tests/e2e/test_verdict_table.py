"""The verdict table in docs/verification.md is the one the end-to-end tests' cases render
(tests/support/verdicts.py); every layout has an honest row that is done and a row never done."""

from __future__ import annotations

from tests.support.verdicts import LAYOUTS, ROWS, current, table


def test_the_docs_show_the_table_the_tests_check() -> None:
    assert current() == table(), "run `make verdict-docs`"


def test_every_layout_has_an_honest_row_and_a_refused_one() -> None:
    for layout in LAYOUTS:
        found = [r for r in ROWS if r.layout == layout and not r.allowed]
        assert any(not r.said and r.behaviour.startswith("honest-") for r in found), layout
        assert any(r.said for r in found), layout
