"""The worker side of the Ray executor: one story run on a cluster node, with no ledger of its own.

This module is the Ray task (`run_story`) and how it wires the worker's own session; its
parts are `ray_links` (the way to the coordinator), `ray_remote` (state owned by the
coordinator), `ray_clone` (the workspace) and `ray_spec` (what the task is given).

A Ray task (`run_story`) takes a story to its next stop, like a local worker process, with three
differences that keep the coordinator's ledger the only one:

- **State**: the `StoryRunner` keeps its logic, but its state owner and checkpoints are
  `RemoteOwner`/`RemoteCheckpoints`: every call (begin an attempt, count a recovery, complete a
  phase, take or restore a checkpoint...) travels to the coordinator as an `Ask`, runs there on
  the project's real `StoryState`, and comes back with the result and a snapshot of the story's
  files. The snapshot is written into the worker's *replica* (its clone's `.ai-sdlc/stories/`,
  never the project's), which is all the runner ever reads.
- **Workspace**: the worker clones `git.remote` into a cached slot of its own (one slot per
  concurrent task on a node, reused by later tasks), resets the story branch to the remote's,
  runs the phase in a worktree of that clone and pushes every passing attempt's commit at once.
- **Liveness**: every action starts with an `Ask`; a worker whose coordinator is gone (the
  mailbox actor died with it) stops there (`StopRequested`), before acting.
- **Circuit breakers**: run-wide, as between local workers, whose breakers share the project's
  `.ai-sdlc/state/breakers.json`: here that file is the coordinator's. Every answer carries its
  bytes, which the worker keeps as its replica (what each operation's `refresh` reads), and a
  state change is written by the coordinator under the file's lock, an open breaker stored by
  another worker still winning (`SharedBreakerStore`).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.workflow.parallel.ray_clone import (
    PushingWorkspace,
    clone_slot,
    drop_unsettled_commit,
    reset_story_branch,
)
from ai_sdlc.workflow.parallel.ray_links import MailboxLink, SocketLink
from ai_sdlc.workflow.parallel.ray_remote import (
    BREAKERS_FILE,
    SNAPSHOT_FILES,
    RemoteCheckpoints,
    RemoteOwner,
    Replica,
    share_resilience_state,
    sync_file,
)
from ai_sdlc.workflow.parallel.ray_spec import SHIPPED_ENV_PREFIXES, RaySpec, config_json
from ai_sdlc.workflow.parallel.worker import Link, StopRequested, run_to_stop


class _NeverSet:
    """The stop flag of a cluster worker: the coordinator says "stop" in its answers instead."""

    def is_set(self) -> bool:
        return False


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def node_name() -> str:
    import ray

    return f"{ray.util.get_node_ip_address()}:{os.getpid()}"  # type: ignore[no-untyped-call]


def run_story(
    spec: RaySpec, story_id: str, token: int, mailbox: Any, endpoint: Any = None
) -> dict[str, Any]:
    """The Ray task: run one story to its next stop; returns the `WorkerDone` fields. It talks
    to the coordinator over `endpoint` (host, port, key) when it can, else through `mailbox`."""
    life = uuid.uuid4().hex[:12]
    ends: Any = SocketLink.connect(endpoint, token, life) or MailboxLink(mailbox, token, life)
    ends.put((token, "hello", {"node": node_name()}))
    link: Any = None

    def finish(kind: str, result: str | None = None, reason: str = "") -> dict[str, Any]:
        usage = link.usage_delta() if link is not None else {}
        ends.flush()
        done = {"kind": kind, "result": result, "reason": reason, "usage": usage}
        if isinstance(ends, SocketLink):
            done["sent"] = (life, ends.sent)
        return done

    try:
        with _environment(spec.environ), clone_slot(spec) as clone:
            session, link = _open(spec, clone, story_id, token, ends)
            try:
                outcome = run_to_stop(link, story_id)
            finally:
                session.close()  # its temp folders: a Ray worker runs many tasks
            link.report(story_id)
            return finish(*outcome)
    except StopRequested as exc:
        return finish("stopped", reason=str(exc))
    except KeyboardInterrupt:
        return finish("interrupted", reason="interrupted (Ctrl-C)")
    except AiSdlcError as exc:
        return finish("outcome", "error", exc.message)


def _open(spec: RaySpec, clone: Path, story_id: str, token: int, ends: Any) -> tuple[Any, Any]:
    """The task's session (the task closes it) and its link to the coordinator."""
    from ai_sdlc.config import CONFIG_RELPATH
    from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text
    from ai_sdlc.git.workspace import GitWorkspace
    from ai_sdlc.providers.scripted import RULES_FILE
    from ai_sdlc.store import StoryStore

    project = clone / spec.prefix
    (project / ".ai-sdlc").mkdir(parents=True, exist_ok=True)
    atomic_write_text(project / CONFIG_RELPATH, spec.config_json + "\n")
    if spec.scripted_rules is not None:
        atomic_write_bytes(project / RULES_FILE, spec.scripted_rules)
    # The coordinator's effective config is the whole truth: no user layer of this node.
    os.environ["AI_SDLC_CONFIG_HOME"] = str(clone.parent / "no-user-config")
    # Breaker state is the coordinator's alone (`shared_breakers`): none left by an earlier task.
    state_folder = project / ".ai-sdlc" / "state"
    sync_file(state_folder / BREAKERS_FILE, None)
    store = StoryStore(project)
    session = spec.open_session(store, provider_name=spec.provider, no_sandbox=spec.no_sandbox)
    runner = session.runner
    link = _timed_link(Link)(token, ends, ends, _NeverSet(), runner)
    link.breakers_file = state_folder / BREAKERS_FILE
    session.relay.watcher = link
    first = link.ask("snapshot", {"story": story_id})
    share_resilience_state(link, _policy_manager(runner), state_folder)
    replica = Replica(project, story_id, str(first["folder"]))
    replica.write(first["snapshot"])
    owner = RemoteOwner(link, replica, runner, int(first["limit"]))
    proxied: Any = runner  # the runner takes any object with the owner's operations
    proxied.owner = owner
    proxied.checkpoints = RemoteCheckpoints(owner)
    deps = runner.deps
    deps.guard_factory = link.guard_factory(deps.guard_factory)
    workspaces = runner.workspaces
    if isinstance(workspaces, GitWorkspace):
        story = store.get(story_id)
        branch, folder = workspaces.location(story)
        reset_story_branch(clone, spec.remote_name, branch, folder, story_id)
        if drop_unsettled_commit(clone, spec.remote_name, branch, story_id, first.get("open")):
            link.observe(
                {"event": "worker_note", "story": story_id, "note": "dropped an unsettled commit"}
            )
        runner.workspaces = PushingWorkspace(workspaces, spec.remote_name)
    return session, link


def _policy_manager(runner: Any) -> Any:
    """The resilience policies of the runner's provider calls (its `GuardFactory`'s)."""
    guards = getattr(runner.deps.guard_factory, "__self__", None)
    manager = getattr(guards, "manager", None)
    if manager is None:
        raise AiSdlcError("the worker's runner has no resilience policies to share")
    return manager


def _timed_link(base: type) -> Any:
    """The local worker's link, counting the time this story waits on the coordinator (the
    coordination overhead `bench/bench_cluster.py` reports per phase)."""

    class TimedLink(base):  # type: ignore[misc]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.asks = 0
            self.waited = 0.0
            self.phases = 0
            self.by_kind: dict[str, float] = {}
            #: The replica of the coordinator's breaker file, renewed by every answer.
            self.breakers_file: Path | None = None
            #: Seconds the coordinator spent applying this story's ledger operations.
            self.ledger = 0.0

        def ask(self, kind: str, data: dict[str, Any]) -> Any:
            started = time.perf_counter()
            try:
                answer = super().ask(kind, data)
                if "breakers" in answer and self.breakers_file is not None:
                    sync_file(self.breakers_file, answer["breakers"])
                self.ledger = float(answer.get("ledger_seconds") or self.ledger)
                return answer
            finally:
                took = time.perf_counter() - started
                self.asks += 1
                self.waited += took
                self.by_kind[kind] = round(self.by_kind.get(kind, 0.0) + took, 6)

        def guard_factory(self, inner: Any) -> Any:
            """The run's spend is synced before each provider call only when a run budget
            (`limits.run_cost_usd`) needs it; otherwise it travels with `before_phase` and the
            result, one round trip per call fewer."""
            if self.runner.deps.limits.run_cost_usd is None:
                return inner
            return super().guard_factory(inner)

        def observe(self, event: dict[str, Any]) -> None:
            if event.get("event") == "phase_started":
                self.phases += 1
            super().observe(event)

        def report(self, story_id: str) -> None:
            super().observe(
                {
                    "event": "coordination",
                    "story": story_id,
                    "asks": self.asks,
                    "seconds": round(self.waited, 6),
                    "ledger_seconds": round(self.ledger, 6),
                    "by_kind": self.by_kind,
                    "phases": self.phases,
                    "link": "direct" if isinstance(self.outbox, SocketLink) else "mailbox",
                }
            )

    return TimedLink


__all__ = [
    "BREAKERS_FILE",
    "SHIPPED_ENV_PREFIXES",
    "SNAPSHOT_FILES",
    "RaySpec",
    "RemoteCheckpoints",
    "RemoteOwner",
    "clone_slot",
    "config_json",
    "drop_unsettled_commit",
    "run_story",
]
