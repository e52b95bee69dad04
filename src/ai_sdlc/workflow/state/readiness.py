"""Whether a story may start: the two rules the state owner and every run path share.

*Gates*: a story waits at `before_implementation` (its plan complete) or `before_done` (its
review complete) until `ai-sdlc approve` lists the gate in `approved_gates`.

*Dependencies*: a story starts only when each story in its `dependencies` is met
(`run.done_means`: `done` = status done; `pr` = done with a pull request recorded; `merged` =
done under `git.auto_merge`, where a story only becomes done once its pull request merged).
`run <id>`, the next recommended action, `--auto`, `--batch`, `--epic`, `watch`, parallel and
Ray runs all decide through `dependency_met`. Pure functions over frontmatters, no I/O: the
state owner (which refuses `approve` at no gate) must not depend on the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Gate names in `gates.*` config and in a story's `approved_gates` list.
GATE_BEFORE_IMPLEMENTATION = "before_implementation"
GATE_BEFORE_DONE = "before_done"


def pending_gate(fm: Mapping[str, Any], gates: Mapping[str, Any]) -> str | None:
    """The gate a story is waiting at, if any (for `ai-sdlc approve`)."""
    approved = set(fm.get("approved_gates") or [])
    if fm.get("status") in ("blocked", "done"):
        return None
    if (
        fm.get("plan_complete")
        and not fm.get("implementation_complete")
        and gates.get(GATE_BEFORE_IMPLEMENTATION)
        and GATE_BEFORE_IMPLEMENTATION not in approved
    ):
        return GATE_BEFORE_IMPLEMENTATION
    if (
        fm.get("reviews_complete")
        and gates.get(GATE_BEFORE_DONE)
        and GATE_BEFORE_DONE not in approved
    ):
        return GATE_BEFORE_DONE
    return None


def dependency_met(status: object, has_pr: bool, done_means: str) -> bool:
    """The one rule: whether a dependency in this state counts as done (a story in review, its
    PR open, counts only for `pr`)."""
    if status == "in-review":
        return has_pr and done_means == "pr"
    if status != "done":
        return False
    return has_pr if done_means in ("pr", "merged") else True


@dataclass(frozen=True)
class Unmet:
    """A dependency that keeps a story from starting, and why."""

    story_id: str
    #: Its status ("missing" when it cannot be read).
    status: str
    #: Done, but without the pull request (or merge) `run.done_means` asks for.
    done_without_pr: bool = False

    def describe(self, done_means: str) -> str:
        if self.status == "missing":
            return f"{self.story_id} (which does not exist or cannot be read)"
        if self.done_without_pr:
            want = "merged" if done_means == "merged" else "with a pull request"
            return f"{self.story_id} (done, not {want}; run.done_means: {done_means})"
        return f"{self.story_id} ({self.status})"


def dependencies_of(fm: Mapping[str, Any]) -> tuple[str, ...]:
    deps = fm.get("dependencies")
    if not isinstance(deps, list):
        return ()
    return tuple(dict.fromkeys(d for d in deps if isinstance(d, str)))


def unmet_dependencies(
    fm: Mapping[str, Any],
    lookup: Callable[[str], Mapping[str, Any] | None],
    done_means: str,
) -> list[Unmet]:
    """The story's dependencies that are not met (`lookup`: a story's frontmatter, or None)."""
    unmet = []
    for dep in dependencies_of(fm):
        other = lookup(dep)
        if other is None:
            unmet.append(Unmet(dep, "missing"))
            continue
        status = other.get("status")
        has_pr = bool(other.get("pr_url"))
        if not dependency_met(status, has_pr, done_means):
            text = status if isinstance(status, str) else "unknown"
            unmet.append(Unmet(dep, text, done_without_pr=status == "done"))
    return unmet


__all__ = [
    "GATE_BEFORE_DONE",
    "GATE_BEFORE_IMPLEMENTATION",
    "Unmet",
    "dependencies_of",
    "dependency_met",
    "pending_gate",
    "unmet_dependencies",
]
