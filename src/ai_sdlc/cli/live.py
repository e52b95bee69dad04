"""The live board of a run: what each running story is doing now, and the run at a glance.

Built from the core's events alone (`phase_started`, `step`, `phase_answered`, `recovery`,
`story_finished`, ...), so the core never knows a terminal exists. On a terminal (stderr a TTY,
`TERM` not `dumb`; `NO_COLOR` drops only the colour) it is a rich live region under the
scrolling progress lines: one line per running story (phase, attempt, step and its elapsed
time, the story's elapsed time, the recovery counter) and one summary line (done / blocked /
running, tokens, cost, an ETA from the finished phases' durations). Anywhere else each step is
one timestamped line, so a log file or a CI console still says what a story is doing; a step
that only repeats the progress line (a phase starting with its agent) is not said again.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.wording import attempt_label

#: The phases a story goes through, in order: what is left of a story for the ETA.
PIPELINE = ("refine", "research", "plan", "implement", "review")
#: `phase_*` events that do not end a phase (the others carry `elapsed`, its duration).
NOT_ENDS = {"phase_started", "phase_answered"}
RUN_ENDS = {"run_completed", "run_stopped", "run_failed"}


def live_terminal(out: Terminal) -> bool:
    """True when the live region may be drawn: a terminal that understands cursor moves
    (`NO_COLOR` drops colour, not liveness: the region is drawn without colour)."""
    return out.is_tty and not out.json_mode and not out.quiet and os.environ.get("TERM") != "dumb"


def duration(seconds: float) -> str:
    """`7s`, `1m05s`, `2h03m`: short enough for a line per story."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class Running:
    """One story of the run as the board shows it."""

    phase: str = ""
    attempt: str = ""
    step: str = "starting"
    recoveries: str = ""
    started: float = 0.0
    phase_started: float = 0.0
    step_started: float = 0.0


class Board:
    """The run's state as the events tell it, rendered as lines (live or plain)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        """A new run (a watch runs one after another): nothing of the last one counts."""
        self.stories: list[str] = []
        self.running: dict[str, Running] = {}
        self.done: set[str] = set()
        self.blocked: set[str] = set()
        self.ended: set[str] = set()
        self.tokens = 0
        self.cost: float | None = None
        self.phase_seconds: list[float] = []
        self.widest = 1  # the most stories seen running at once: the run's parallelism

    def observe(self, e: dict[str, Any]) -> None:
        name = str(e.get("event", ""))
        story = str(e.get("story", ""))
        now = self.clock()
        with self.lock:
            if name in ("run_started", "run_resumed"):  # a watch runs one after another
                self._reset()
                self.stories = [str(s) for s in e.get("stories") or []]
            elif name == "story_started":
                self.running.setdefault(story, Running(started=now, step_started=now))
            elif name == "phase_started":
                r = self.running.setdefault(story, Running(started=now))
                r.phase = str(e.get("phase", ""))
                r.attempt = attempt_label(e.get("attempt", 1), e.get("step"), e.get("of"))
                r.step, r.phase_started, r.step_started = "agent", now, now
                if e.get("recovery_limit"):
                    r.recoveries = f"{e.get('recoveries', 0)}/{e['recovery_limit']}"
                self.widest = max(self.widest, len(self.running))
            elif name == "step" and story in self.running:
                r = self.running[story]
                r.step, r.step_started = str(e.get("step", "")), now
                if e.get("phase"):
                    r.phase = str(e["phase"])
            elif name == "recovery" and story in self.running and e.get("limit"):
                self.running[story].recoveries = f"{e.get('total')}/{e['limit']}"
            elif name == "phase_answered":
                self.tokens += int(e.get("tokens") or 0)
                if e.get("cost_usd") is not None:
                    self.cost = (self.cost or 0.0) + float(e["cost_usd"])
            elif name.startswith("phase_") and name not in NOT_ENDS and e.get("elapsed"):
                self.phase_seconds.append(float(e["elapsed"]))
            elif name in ("story_finished", "story_blocked"):
                self._finish(story, str(e.get("outcome") or "blocked"))
            elif name in RUN_ENDS:  # nothing runs once the run ended (interrupted, stopped)
                self.running.clear()
            if story and story not in self.stories and name == "story_started":
                self.stories.append(story)

    def _finish(self, story: str, outcome: str) -> None:
        self.running.pop(story, None)
        self.ended.add(story)
        if outcome == "done":
            self.done.add(story)
            self.blocked.discard(story)
        elif outcome == "blocked":
            self.blocked.add(story)

    # --- what is shown ---------------------------------------------------------------------
    def story_line(self, story: str, r: Running, now: float) -> str:
        parts = [story, r.phase or "starting"]
        if r.attempt:
            parts.append(r.attempt)
        parts.append(f"{r.step} {duration(now - r.step_started)}")
        parts.append(f"elapsed {duration(now - r.started)}")
        if r.recoveries:
            parts.append(f"recoveries {r.recoveries}")
        return " · ".join(parts)

    def eta(self, now: float) -> str:
        """From the finished phases' mean duration: the phases left of every unfinished story,
        spread over as many stories as have run at once. "—" until one phase finished."""
        if not self.phase_seconds:
            return "—"
        mean = sum(self.phase_seconds) / len(self.phase_seconds)
        left = 0.0
        for story in self.stories or list(self.running):
            if story in self.ended:
                continue
            r = self.running.get(story)
            if r is None or r.phase not in PIPELINE:
                left += mean * len(PIPELINE)
                continue
            after = len(PIPELINE) - PIPELINE.index(r.phase) - 1
            left += max(0.0, mean - (now - r.phase_started)) + mean * after
        return duration(left / max(1, self.widest))

    def summary(self, now: float) -> str:
        total = len(self.stories) or len(self.ended | set(self.running))
        cost = f"${self.cost:.4f}" if self.cost is not None else "cost —"
        return (
            f"stories {len(self.ended)}/{total} · {len(self.done)} done · "
            f"{len(self.blocked)} blocked · {len(self.running)} running · "
            f"{self.tokens:,} tokens · {cost} · ETA {self.eta(now)}"
        )

    def lines(self) -> list[str]:
        now = self.clock()
        with self.lock:
            shown = [self.story_line(s, r, now) for s, r in sorted(self.running.items())]
            return [*shown, self.summary(now)]

    def __rich__(self) -> Any:
        from rich.text import Text

        lines = self.lines()
        text = Text("\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else ""))
        text.append(lines[-1], style="bold")
        return text


class LiveBoard:
    """The board on a terminal (a rich live region) or as timestamped plain lines."""

    def __init__(self, out: Terminal, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.board = Board(clock)
        self.live_mode = live_terminal(out)
        self._live: Any = None

    def event(self, e: dict[str, Any]) -> None:
        if self.out.json_mode:
            return
        name = str(e.get("event", ""))
        before = self.board.running.get(str(e.get("story", "")))
        # A step that only repeats what the progress line just said (a phase starts with
        # its agent): a line is said once per stream.
        repeats = name == "step" and before is not None and before.step == e.get("step")
        self.board.observe(e)
        if self.live_mode:
            if name == "phase_started" and self._live is None:
                from rich.live import Live

                self._live = Live(
                    self.board, console=self.out.console, refresh_per_second=4, transient=False
                )
                self._live.start()
            elif name in RUN_ENDS:
                self.close()
        elif name == "step" and not repeats:
            self._plain(e)
        elif name in RUN_ENDS and self.board.stories:  # the live region's last frame says it
            self.out.progress(self.board.summary(self.board.clock()))

    def _plain(self, e: dict[str, Any]) -> None:
        story = str(e.get("story", ""))
        r = self.board.running.get(story)
        attempt = f" {r.attempt}" if r is not None and r.attempt else ""
        when = _clock_time(e.get("time"))
        self.out.progress(f"{when} {story} {e.get('phase', '')}{attempt}: {e.get('step')}")

    def close(self) -> None:
        """Stop the live region, leaving its last frame on the screen."""
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()


def _clock_time(iso: Any) -> str:
    """`12:03:04` from the event's own time (the run's clock), local time otherwise."""
    try:
        when = _dt.datetime.fromisoformat(str(iso))
    except ValueError:
        when = _dt.datetime.now()
    return when.strftime("%H:%M:%S")
