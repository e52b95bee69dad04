"""The backlog as a graph: `dependencies: [S-0003, ...]` and epics (`epic: E-01`, or the
TypeScript tool's `epic-E-01` labels). Pure functions over frontmatters, no I/O.

A run checks its stories' graph before anything runs: a missing dependency or a cycle is an
input error (exit 3) naming the story file and the cycle. During the run a story is *ready*
when each dependency is met (`run.done_means`: `done` = status done; `pr` = done with a pull
request recorded; `merged` = done with `git.auto_merge` on, where a story only becomes done
once its pull request's checks passed and it was squash-merged), *waits*
while a dependency is still to be worked on in the same run, and is *skipped* (never run) when a
dependency can no longer be met in this run (blocked, escalated, waiting at a gate, or not part
of the run and not done).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.workflow.state.readiness import dependencies_of, dependency_met

EPIC_LABEL_PREFIX = "epic-"
DONE_MEANS = ("done", "pr", "merged")


@dataclass(frozen=True)
class Node:
    story_id: str
    dependencies: tuple[str, ...] = ()
    epic: str | None = None
    status: str | None = None
    #: A pull request recorded (`pr_url`).
    has_pr: bool = False


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)

    def dependencies(self, story_id: str) -> tuple[str, ...]:
        node = self.nodes.get(story_id)
        return node.dependencies if node else ()

    def closure(self, story_ids: Iterable[str]) -> list[str]:
        """The stories and everything they depend on, transitively (known stories only)."""
        seen: dict[str, None] = {}
        stack = list(story_ids)
        while stack:
            sid = stack.pop()
            if sid in seen or sid not in self.nodes:
                continue
            seen[sid] = None
            stack.extend(self.nodes[sid].dependencies)
        return list(seen)

    def in_epic(self, epic: str) -> list[str]:
        return [sid for sid, node in self.nodes.items() if node.epic == epic]


def epic_of(frontmatter: Mapping[str, Any]) -> str | None:
    """`epic: E-01`, else the first `epic-<id>` label."""
    epic = frontmatter.get("epic")
    if isinstance(epic, str) and epic:
        return epic
    labels = frontmatter.get("labels")
    if isinstance(labels, list):
        for label in labels:
            if isinstance(label, str) and label.startswith(EPIC_LABEL_PREFIX):
                rest = label[len(EPIC_LABEL_PREFIX) :]
                if rest:
                    return rest
    return None


def node_of(story_id: str, frontmatter: Mapping[str, Any]) -> Node:
    items = dependencies_of(frontmatter)
    status = frontmatter.get("status")
    return Node(
        story_id=story_id,
        dependencies=items,
        epic=epic_of(frontmatter),
        status=status if isinstance(status, str) else None,
        has_pr=bool(frontmatter.get("pr_url")),
    )


def build(stories: Iterable[tuple[str, Mapping[str, Any]]]) -> Graph:
    """The graph of `(story id, frontmatter)` pairs."""
    return Graph({sid: node_of(sid, fm) for sid, fm in stories})


def check(graph: Graph, story_ids: Iterable[str], *, where: Mapping[str, str]) -> None:
    """Refuse (exit 3) a missing dependency or a cycle among `story_ids` and what they need.
    `where` maps a story id to its file, named in the error."""
    ids = graph.closure(story_ids)
    for sid in ids:
        for dep in graph.dependencies(sid):
            if dep == sid:
                raise InvalidInputError(
                    f"{sid} depends on itself",
                    path=where.get(sid),
                    hint=f"remove {sid} from its own dependencies",
                )
            if dep not in graph.nodes:
                raise InvalidInputError(
                    f"{sid} depends on {dep}, which does not exist",
                    path=where.get(sid),
                    hint=f"fix or remove {dep} in its dependencies ('ai-sdlc status' lists them)",
                )
    cycle = find_cycle(graph, ids)
    if cycle:
        shown = " → ".join(cycle)
        raise InvalidInputError(
            f"circular dependencies: {shown}",
            path=where.get(cycle[0]),
            hint="remove one of these dependencies so the stories can run in some order",
        )


def find_cycle(graph: Graph, story_ids: Iterable[str]) -> list[str] | None:
    """A cycle as a closed path (`[S-0001, S-0003, S-0001]`), or None. Iterative DFS."""
    white, grey, black = 0, 1, 2
    colour: dict[str, int] = {}
    for root in sorted(story_ids):
        if colour.get(root, white) != white:
            continue
        path: list[str] = [root]
        iters = [iter(graph.dependencies(root))]
        colour[root] = grey
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = black
                iters.pop()
                continue
            if nxt not in graph.nodes:
                continue
            state = colour.get(nxt, white)
            if state == grey:
                return [*path[path.index(nxt) :], nxt]
            if state == white:
                colour[nxt] = grey
                path.append(nxt)
                iters.append(iter(graph.dependencies(nxt)))
    return None


def is_met(node: Node | None, done_means: str) -> bool:
    """Whether a dependency counts as done (`run.done_means`; `merged` is only accepted with
    `git.auto_merge`, under which a done story with a pull request was merged)."""
    return node is not None and dependency_met(node.status, node.has_pr, done_means)


def order(graph: Graph, story_ids: list[str]) -> list[str]:
    """`story_ids` reordered so every story comes after its dependencies among them (stable:
    otherwise the given order). Assumes `check` passed."""
    wanted = set(story_ids)
    placed: dict[str, None] = {}

    def place(sid: str, trail: tuple[str, ...]) -> None:
        if sid in placed or sid in trail:
            return
        for dep in graph.dependencies(sid):
            if dep in wanted:
                place(dep, (*trail, sid))
        placed[sid] = None

    for sid in story_ids:
        place(sid, ())
    return list(placed)


__all__ = [
    "DONE_MEANS",
    "Graph",
    "Node",
    "build",
    "check",
    "epic_of",
    "find_cycle",
    "is_met",
    "node_of",
    "order",
]
