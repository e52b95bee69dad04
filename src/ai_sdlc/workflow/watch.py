"""Watch mode (`ai-sdlc watch`): a foreground daemon that runs stories as they become ready.

A *ready* story is one out of the backlog (`status` is not `backlog`) with an actionable next
step whose dependencies are met (or are ready themselves). Each time something may have
changed, the watch scans the stories and hands the ready ones to one multi-story run
(`Session.run_many`: the same scheduler, `--jobs`/`run.jobs`, stop conditions and recovery
limits as `run --auto`). A story handed to a run is not handed again until its file changes
after that run ended: a story the run left unfinished (it crashed, the run halted) waits for
a human instead of looping.

What "may have changed" means comes from a `Changes` source: filesystem events on
`.ai-sdlc/stories/*/story.md` through `watchfiles` (`EventChanges`), or a comparison of the
story files' stat signatures every few seconds (`PollChanges`: `--poll`, and whenever
watchfiles is missing or stops working). The source, the sleep and the run are injected.

A story file that cannot be read is reported once per change of that file, and skipped; the
watch goes on. One written moments ago is given `SETTLE_SECONDS` first: editors (and scripts)
that truncate a file and then write it leave it empty for an instant, and the watch must not
report a file that is still being written. Ctrl-C/SIGTERM end it between two checks, or
during a run as in `run --auto` (phases in flight are rolled back and the run stays resumable).

Stories `in-review` (the pull-request loop, `pr.loop`) change on GitHub, not on disk: each is
handed to a run again once `pr_interval` seconds (`pr.poll_seconds`) have passed since its PR
was last looked at, and the wait for file changes ends by then. One look at a PR is one
GraphQL query (plus one call per newly failing check's log), so a watch following N PRs makes
at most N such looks per interval.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ai_sdlc.config import load_config
from ai_sdlc.errors import AiSdlcError, BusyError, InvalidInputError
from ai_sdlc.store import StoryStore
from ai_sdlc.store.story import Story
from ai_sdlc.workflow.engine.assess import recommend
from ai_sdlc.workflow.runs import graph as G
from ai_sdlc.workflow.runs.idle import startable
from ai_sdlc.workflow.runs.multirun import RunOutcome

Emit = Callable[[dict[str, Any]], None]
Sleep = Callable[[float], None]
#: Runs the given stories as one multi-story run (None: nothing to run).
RunStories = Callable[[list[str]], "RunOutcome | None"]
#: (inode, size, mtime in ns) of a story file: any write (in place or by rename) changes it.
Signature = tuple[int, int, int]

STORY_FILE = "story.md"
#: Milliseconds watchfiles groups changes for before reporting them.
DEBOUNCE_MS = 200
#: How long an unreadable story file written moments ago gets to be finished before it is
#: reported (a write in progress changes it again, and that change wakes the watch anyway).
SETTLE_SECONDS = 0.5


class Changes(Protocol):
    """Where the watch learns that story files may have changed."""

    name: str

    def start(self) -> None:
        """Begin watching (before the first scan, so no change is missed)."""

    def wait(self, timeout: float | None = None) -> None:
        """Block until story files may have changed, or `timeout` seconds passed; raise
        `WatcherFailed` when broken."""

    def close(self) -> None: ...


class WatcherFailed(Exception):
    """The filesystem watcher stopped working (the watch falls back to polling)."""


def signature(path: Path | str) -> Signature | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def snapshot(stories_dir: Path) -> dict[str, Signature | None]:
    """The signature of every `*/story.md` under `stories_dir`."""
    found: dict[str, Signature | None] = {}
    try:
        entries = list(os.scandir(stories_dir))
    except OSError:
        return found
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            path = os.path.join(entry.path, STORY_FILE)
            found[entry.name] = signature(path)
    return found


class PollChanges:
    """Compare every story file's signature each `interval` seconds."""

    name = "poll"

    def __init__(self, stories_dir: Path, interval: float, *, sleep: Sleep = time.sleep) -> None:
        self.stories_dir = stories_dir
        self.interval = interval
        self.sleep = sleep
        self.last: dict[str, Signature | None] = {}

    def start(self) -> None:
        self.last = snapshot(self.stories_dir)

    def wait(self, timeout: float | None = None) -> None:
        waited = 0.0
        while True:
            step = (
                self.interval if timeout is None else max(0.0, min(self.interval, timeout - waited))
            )
            self.sleep(step)
            waited += step
            now = snapshot(self.stories_dir)
            if now != self.last:
                self.last = now
                return
            if timeout is not None and waited >= timeout:
                return

    def close(self) -> None:
        pass


class EventChanges:
    """Filesystem events through `watchfiles`, read on a thread; the main thread waits on a
    queue (interruptible by Ctrl-C). A watcher that fails says so through `wait`."""

    name = "watchfiles"

    def __init__(self, stories_dir: Path) -> None:
        self.stories_dir = stories_dir
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import watchfiles  # noqa: F401  (ImportError: the caller polls instead)

        self._thread = threading.Thread(target=self._watch, name="ai-sdlc-watch", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=10)

    def _watch(self) -> None:
        import watchfiles

        def story_files(_change: Any, path: str) -> bool:
            return os.path.basename(path) == STORY_FILE

        try:
            changes = watchfiles.watch(
                self.stories_dir,
                watch_filter=story_files,
                debounce=DEBOUNCE_MS,
                step=20,
                stop_event=self._stop,
                yield_on_timeout=True,
                rust_timeout=200,
                raise_interrupt=False,
            )
            for batch in changes:
                self._ready.set()  # the first (empty) timeout batch: the watcher is set up
                if batch:
                    self._queue.put(None)
            if not self._stop.is_set():
                self._queue.put("the watcher ended by itself")
        except Exception as exc:  # any failure: the main thread falls back to polling
            self._queue.put(f"{type(exc).__name__}: {exc}")
        finally:
            self._ready.set()

    def wait(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:  # short waits: Ctrl-C is seen at once on every platform
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                return
            try:
                items = [self._queue.get(timeout=left)]
                break
            except queue.Empty:
                continue
        while True:  # one scan for every change already reported
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        failures = [item for item in items if item is not None]
        if failures:
            raise WatcherFailed(failures[0])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


@dataclass
class StopFlag:
    """Which signal ended the watch (set by the command's signal handlers)."""

    signal: str | None = None


@dataclass
class WatchResult:
    runs: list[RunOutcome] = field(default_factory=list)
    #: Stories that ended blocked in one of the runs.
    blocked: list[str] = field(default_factory=list)
    #: A run halted by a stop condition (not only by its blocked stories).
    halted: bool = False
    #: "SIGINT" or "SIGTERM" when a signal ended the watch.
    stopped_by: str | None = None
    source: str = ""


class Watch:
    def __init__(
        self,
        store: StoryStore,
        *,
        run: RunStories,
        emit: Emit,
        changes: Changes | None = None,
        fallback: Callable[[], Changes] | None = None,
        stop: StopFlag | None = None,
        sleep: Sleep = time.sleep,
        wall_clock: Callable[[], float] = time.time,
        pr_interval: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.sleep = sleep
        self.wall_clock = wall_clock
        self.run = run
        self.emit = emit
        self.changes = changes
        self.fallback = fallback
        self.stop = stop or StopFlag()
        #: Signature of each story's file when the run it was handed to ended.
        self.seen: dict[str, Signature | None] = {}
        #: Signature of each unreadable file when it was reported.
        self.reported: dict[str, Signature | None] = {}
        self.busy_reported = False
        #: The last `watch_waiting` event: said again only when what it waits for changed.
        self.last_waiting: dict[str, Any] | None = None
        #: Seconds between two looks at an in-review story's PR (None: PRs are not followed).
        self.pr_interval = pr_interval
        self.monotonic = monotonic
        #: When each in-review story's PR was last looked at (a run it was handed to).
        self.pr_looked: dict[str, float] = {}

    # --- the two modes ----------------------------------------------------------------------
    def once(self) -> WatchResult:
        """Run what is ready now, then return (cron, CI)."""
        result = WatchResult(source="once")
        try:
            self._cycle(result, raise_errors=True)
            result.stopped_by = result.stopped_by or self.stop.signal
        except KeyboardInterrupt:
            result.stopped_by = self.stop.signal or "SIGINT"
        return result

    def serve(self) -> WatchResult:
        """Run what is ready, then again each time story files change, until a signal."""
        result = WatchResult()
        changes = self._start_changes()
        result.source = changes.name
        try:
            self.emit({"event": "watch_started", "source": changes.name})
            while result.stopped_by is None:
                self._cycle(result, raise_errors=False)
                result.stopped_by = result.stopped_by or self.stop.signal
                if result.stopped_by is not None:
                    break
                self._say_waiting(changes)
                try:
                    changes.wait(self._next_pr_look())
                except WatcherFailed as exc:
                    changes.close()
                    changes = self._fall_back(str(exc))
                    result.source = changes.name
        except KeyboardInterrupt:
            result.stopped_by = self.stop.signal or "SIGINT"
        finally:
            changes.close()
        self.emit({"event": "watch_stopped", "signal": result.stopped_by})
        return result

    def _start_changes(self) -> Changes:
        if self.changes is None:
            return self._fall_back(None)
        try:
            self.changes.start()
            return self.changes
        except (ImportError, OSError, RuntimeError) as exc:
            return self._fall_back(f"{type(exc).__name__}: {exc}")

    def _fall_back(self, why: str | None) -> Changes:
        if self.fallback is None:
            raise WatcherFailed(why or "no way to watch the story files")
        changes = self.fallback()
        if why is not None:
            self.emit({"event": "watch_fallback", "source": changes.name, "reason": why})
        changes.start()
        return changes

    # --- one look at the stories ------------------------------------------------------------
    def _cycle(self, result: WatchResult, *, raise_errors: bool) -> None:
        """Run the ready stories; again while runs make more of them ready. A stop signal
        that came during a run ends the watch after it, even when the run did not end
        interrupted (it came while the run's last locks were held, and the run had finished)."""
        while True:
            if self.stop.signal is not None:
                result.stopped_by = self.stop.signal
                return
            ids = self.ready()
            if not ids:
                return
            self.emit({"event": "watch_run", "stories": ids})
            try:
                report = self.run(ids)
            except BusyError as exc:
                if raise_errors:
                    raise
                if not self.busy_reported:
                    self.emit({"event": "watch_busy", "message": exc.message})
                    self.busy_reported = True
                return  # the other run's changes wake the watch again
            except AiSdlcError as exc:
                if raise_errors:
                    raise
                self.emit({"event": "watch_run_failed", "stories": ids, "message": exc.message})
                self._remember(ids)
                return
            self.busy_reported = False
            self._remember(ids)
            if report is None:
                return
            result.runs.append(report)
            blocked = [o.story_id for o in report.outcomes if o.result == "blocked"]
            result.blocked.extend(b for b in blocked if b not in result.blocked)
            state = report.state
            self.emit(
                {
                    "event": "watch_run_finished",
                    "run_id": state.run_id,
                    "status": state.run_status,
                    "outcomes": [o.to_json() for o in report.outcomes],
                    "stop_reason": state.stop_reason.message if state.stop_reason else None,
                }
            )
            if report.interrupted:
                result.stopped_by = self.stop.signal or "SIGINT"
                return
            if report.halted and not (report.loop is not None and blocked):
                result.halted = True

    def _say_waiting(self, changes: Changes) -> None:
        """Before each wait, what the watch waits for (said again only when it changed): the
        stories held back by a dependency, how many sit in the backlog or are blocked, and when
        it looks again."""
        scan = self.store.scan()
        done_means = str(load_config(self.store.root).get("run.done_means"))
        stories = {s.id: s.frontmatter for s in scan.stories}
        graph = G.build(stories.items())
        held: list[dict[str, str]] = []
        for sid, fm in sorted(stories.items()):
            if fm.get("status") in ("backlog", "blocked", "done"):
                continue
            for dep in graph.dependencies(sid):
                if not G.is_met(graph.nodes.get(dep), done_means):
                    status = str(stories[dep].get("status")) if dep in stories else "missing"
                    held.append({"story": sid, "on": dep, "status": status})
                    break
        statuses = [fm.get("status") for fm in stories.values()]
        event: dict[str, Any] = {
            "event": "watch_waiting",
            "held": held,
            "backlog": statuses.count("backlog"),
            "blocked": statuses.count("blocked"),
            "next_check": getattr(changes, "interval", None),
        }
        if event != self.last_waiting:
            self.last_waiting = event
            self.emit(event)

    def _remember(self, ids: Iterable[str]) -> None:
        for sid in ids:
            self.seen[sid] = signature(self.store.story_path(sid))

    def _pr_due(self, sid: str) -> bool:
        looked = self.pr_looked.get(sid)
        return self.pr_interval is not None and (
            looked is None or self.monotonic() - looked >= self.pr_interval
        )

    def _next_pr_look(self) -> float | None:
        """Seconds until an in-review story's PR is due for a look (None: none followed)."""
        if self.pr_interval is None or not self.pr_looked:
            return None
        now = self.monotonic()
        return max(0.0, min(t + self.pr_interval - now for t in self.pr_looked.values()))

    def ready(self) -> list[str]:
        """The stories to hand to a run now, by priority (see the module docstring)."""
        scan = self.store.scan()
        self._report_unreadable(scan.errors)
        config = load_config(self.store.root)
        gates = config.section("gates")
        limit = config.typed().limits.global_recovery
        done_means = config.typed().run.done_means
        stories: dict[str, Story] = {s.id: s for s in scan.stories}
        reviewing = {
            sid for sid, s in stories.items() if s.frontmatter.get("status") == "in-review"
        }
        for gone in set(self.pr_looked) - reviewing:  # done, blocked, or back in rework
            del self.pr_looked[gone]
        picked = {
            sid
            for sid, story in stories.items()
            if story.frontmatter.get("status") != "backlog"
            and self.seen.get(sid, ()) != signature(story.path)
        } | {sid for sid in reviewing if self._pr_due(sid)}
        graph = G.build((sid, s.frontmatter) for sid, s in stories.items())
        actions = recommend(
            (stories[sid].frontmatter for sid in picked),
            gates=gates,
            global_limit=limit,
            done_means=None,  # decided below: a dependency picked in the same run is waited for
        )
        # A story waits while a dependency is neither met nor one that runs (a blocked one
        # never does: its dependents are not handed to a run only to be skipped).
        ready = set(startable(graph, [a.story_id for a in actions], done_means))
        chosen = [a.story_id for a in actions if a.story_id in ready]
        now = self.monotonic()
        for sid in chosen:
            if sid in reviewing and self.pr_interval is not None:
                self.pr_looked[sid] = now  # the run looks at its PR
        return chosen

    def _report_unreadable(self, errors: list[InvalidInputError]) -> None:
        now: dict[str, Signature | None] = {}
        for error in errors:
            path = error.path or error.message
            now[path] = signature(path) if error.path else None
            if path in self.reported and self.reported[path] == now[path]:
                continue
            if error.path and self._still_being_written(error.path, now[path]):
                del now[path]  # its next change wakes the watch, which looks again
                continue
            if error.path:  # as it is now: the look above may have come after a write ended
                now[path] = signature(error.path)
            self.emit({"event": "watch_story_unreadable", "path": path, "message": error.message})
        self.reported = now

    def _still_being_written(self, path: str, seen: Signature | None) -> bool:
        """True when the file, written less than SETTLE_SECONDS ago, changes again within
        that time, or when it reads fine by the time of this look (a write in progress when the
        scan read it, finished since: on a busy machine the look may come well after the
        write); False when it stays unreadable as it is."""
        if seen is None:
            return False
        age = self.wall_clock() - seen[2] / 1e9
        if 0 <= age < SETTLE_SECONDS:
            self.sleep(SETTLE_SECONDS - age)
            if signature(path) != seen:
                return True
        try:
            self.store.get(Path(path).parent.name)
        except AiSdlcError:
            return False
        return True


__all__ = [
    "Changes",
    "EventChanges",
    "PollChanges",
    "StopFlag",
    "Watch",
    "WatchResult",
    "WatcherFailed",
    "signature",
    "snapshot",
]
