"""The dependency rule for every `run.done_means` value the config accepts (taken from the
config model, so a new value cannot go untested): only `done` is met by a done story without a
pull request; `pr` and `merged` need one; nothing but `done` is met at all."""

from __future__ import annotations

import typing

import pytest

from ai_sdlc.config.sections import RunSection
from ai_sdlc.workflow.state.readiness import dependency_met

VALUES = typing.get_args(
    typing.get_args(typing.get_type_hints(RunSection, include_extras=True)["done_means"])[0]
)
STATUSES = ("backlog", "ready", "in-progress", "blocked", "done")


def test_the_values_are_read_from_the_model() -> None:
    assert set(VALUES) == {"done", "pr", "merged"}


@pytest.mark.parametrize("done_means", VALUES)
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("has_pr", [False, True])
def test_a_dependency_is_met_only_as_run_done_means_says(
    done_means: str, status: str, has_pr: bool
) -> None:
    wanted = status == "done" and (has_pr or done_means == "done")
    assert dependency_met(status, has_pr, done_means) is wanted
