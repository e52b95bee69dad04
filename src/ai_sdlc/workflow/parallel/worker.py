"""The worker's end of a parallel run, shared by local worker processes and Ray tasks.

A worker opens its own session on the project through an `OpenSession` the composition root
(`workflow.session`) hands down in the worker's spec: a module-level function, so it crosses
process boundaries by reference (pickle, Ray's cloudpickle) and this package never imports the
session. The `Link` relays the runner's events and questions to the coordinator; `run_to_stop`
takes the story to its next stop and names the outcome as `WorkerDone` fields.
"""

from __future__ import annotations

import queue as queue_mod
import threading
from collections.abc import Callable
from typing import Any

from ai_sdlc.errors import AiSdlcError, BusyError, RunHaltedError, StoryBlockedError
from ai_sdlc.git.stacking import DependenciesConflictError
from ai_sdlc.workflow.state.runlock import run_lock

Answer = dict[str, Any]

#: `open_session(store, *, provider_name, no_worktree=False, no_sandbox=False)`: a worker's own
#: session (its `runner` and event `relay`), opened quietly. Given by the composition root.
OpenSession = Callable[..., Any]

#: Seconds a worker waits for the coordinator's answer before checking it is still alive.
ASK_POLL = 1.0


class StopRequested(Exception):
    """Raised in a worker's `before_phase` when the coordinator stops the run."""


class Link:
    """The worker's end: runner events and questions go to the coordinator."""

    def __init__(self, token: int, outbox: Any, replies: Any, stop: Any, runner: Any) -> None:
        self.token = token
        self.outbox = outbox
        self.replies = replies
        self.stop = stop
        self.runner = runner
        self.baseline: dict[str, Any] = usage_dict(runner.run_usage)
        #: Set by the lifeline watcher when the coordinator is gone.
        self.lost = threading.Event()

    def send(self, kind: str, payload: Any) -> None:
        self.outbox.put((self.token, kind, payload))

    def observe(self, event: dict[str, Any]) -> None:
        self.send("event", event)

    def ask(self, kind: str, data: dict[str, Any]) -> Answer:
        self.send("ask", {"kind": kind, "data": data})
        while True:
            try:
                answer: Answer = self.replies.get(timeout=ASK_POLL)
                return answer
            except queue_mod.Empty:
                if self.lost.is_set():  # the coordinator is gone: stop here
                    raise StopRequested("the coordinator of the run is gone") from None

    def usage_delta(self) -> dict[str, Any]:
        now = usage_dict(self.runner.run_usage)
        base = self.baseline
        cost = None
        if now["cost_usd"] is not None:
            cost = now["cost_usd"] - (base["cost_usd"] or 0.0)
        return {
            "input_tokens": now["input_tokens"] - base["input_tokens"],
            "output_tokens": now["output_tokens"] - base["output_tokens"],
            "cost_usd": cost,
        }

    def sync(self, kind: str, **data: Any) -> Answer:
        """Report spend since the last sync; adopt the run's total (all workers)."""
        answer = self.ask(kind, {**data, "usage": self.usage_delta()})
        total = answer.get("usage") or {}
        usage = self.runner.run_usage
        usage.input_tokens = int(total.get("input_tokens") or 0)
        usage.output_tokens = int(total.get("output_tokens") or 0)
        usage.cost_usd = total.get("cost_usd")
        self.baseline = usage_dict(usage)
        return answer

    def before_phase(self, story_id: str, phase: Any) -> str | None:
        if self.stop.is_set():
            raise StopRequested("the run is stopping")
        answer = self.sync("before_phase", phase=phase.value)
        if answer.get("stop"):
            raise StopRequested(str(answer.get("stop")))
        reason = answer.get("reason")
        return str(reason) if reason else None

    def guard_factory(self, inner: Any) -> Any:
        """Wrap the runner's call guard: sync the run's spend before every provider call."""

        def factory(story_id: str, phase: Any, record: Any) -> Any:
            guard = inner(story_id, phase, record)

            def guarded(fn: Any, /) -> Any:
                def synced() -> Any:
                    self.sync("usage")
                    return fn()

                return guard(synced)

            return guarded

        return factory


def usage_dict(usage: Any) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
    }


def run_to_stop(link: Link, story_id: str) -> tuple[str, str | None, str]:
    """Run the story under its run lock; the `WorkerDone` kind, result and reason."""
    runner = link.runner
    try:
        with run_lock(runner.store.ai_dir, story_id, what=story_id):
            outcome = runner.run(story_id)
        return "outcome", outcome.result, outcome.reason
    except StopRequested as exc:
        return "stopped", None, str(exc)
    except StoryBlockedError as exc:
        return "outcome", "blocked", exc.message
    except BusyError as exc:
        return "busy", None, exc.message
    except DependenciesConflictError as exc:  # skipped with its way out, as `MultiRun` does
        return "busy", None, f"{exc.message}: {exc.hint}"
    except RunHaltedError as exc:
        return "halted", None, exc.message
    except AiSdlcError as exc:
        return "outcome", "error", exc.message


__all__ = ["Answer", "Link", "OpenSession", "StopRequested", "run_to_stop", "usage_dict"]
