"""Live progress of a run, as a user sees it: a `--jobs 3` run under a real pseudo-terminal, its
screen rendered by a terminal emulator (pyte) and read while three verifications wait on a
handshake file; and the plain timestamped lines when stderr is no terminal (a pipe, TERM=dumb)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest

from ai_sdlc.cli.live import Board
from tests.conftest import cli_environment, run_cli
from tests.support.git_support import git_env, make_repo  # noqa: F401  (fixture)
from tests.support.runs_support import write_config
from tests.support.waits import GUARD

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

COLUMNS, LINES = 140, 60

#: A verification that says it started (a file named after its worktree), then waits until the
#: test writes `release`: the run is held mid-verification for as long as the test reads.
HOLD = """
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
(folder / (pathlib.Path.cwd().name + ".started")).touch()
while not (folder / "release").exists():
    time.sleep(0.02)
"""


def held_project(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """A project of `count` independent stories whose verification waits for `release`."""
    repo = make_repo(tmp_path, remote=False)
    for n in range(count):
        repo.story(f"Story {n + 1}")
    handshake = tmp_path / "handshake"
    handshake.mkdir()
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    write_config(  # the handshake folder: the verifications write their `.started` there
        repo.root,
        f"verify:\n  baseline: false\n  test: {sys.executable} {script} {handshake}\n"
        f"sandbox:\n  writable: [{json.dumps(str(handshake))}]\n",
    )
    return repo.root, handshake


class PtyRun:
    """`ai-sdlc` on the slave side of a pseudo-terminal; its output fed to a pyte screen."""

    def __init__(
        self, root: Path, *args: str, term: str = "xterm-256color", no_color: bool = False
    ) -> None:
        env = cli_environment({"TERM": term, "COLUMNS": str(COLUMNS)})
        if not no_color:
            env.pop("NO_COLOR", None)
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ai_sdlc", "--project", str(root), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def _read(self, timeout: float) -> bool:
        """Feed what the program wrote; False once it closed the terminal."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every slave end is closed
            return False
        if not data:
            return False
        self.raw += data
        self.stream.feed(data)
        return True

    def until(self, what: str, seen: Callable[[str], bool]) -> str:
        """The screen once `seen(screen)` holds (the program's output is the handshake)."""
        deadline = time.monotonic() + GUARD
        while not seen(self.text()):
            alive = self._read(0.1)
            if not alive or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"never on screen: {what}\n{self.text()}")
        return self.text()

    def finish(self) -> int:
        """Read to the end; the program's exit status."""
        deadline = time.monotonic() + GUARD
        while self._read(0.1):
            assert time.monotonic() < deadline, f"the run did not end:\n{self.text()}"
        code = self.proc.wait(timeout=GUARD)
        os.close(self.master)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.master)


#: `7s`, `1m05s`, `2h03m` (a loaded machine may take a minute to get here).
DURATION = r"\d+(?:s|m\d\ds|h\d\dm)"
STORY_LINE = re.compile(
    rf"^(S-000[1-3]) · implement · attempt 1 · retries 0/\d+ · verifying {DURATION} · "
    rf"elapsed {DURATION} · recoveries 0/10$",
    re.M,
)
SUMMARY = re.compile(
    r"^stories (\d+)/3 · (\d+) done · (\d+) blocked · (\d+) running · [\d,]+ tokens · "
    rf"(cost —|\$[\d.]+) · ETA (—|{DURATION})$",
    re.M,
)


def test_a_jobs_3_run_shows_each_story_and_the_run_live_on_a_terminal(tmp_path: Path) -> None:
    root, handshake = held_project(tmp_path, 3)
    run = PtyRun(root, "run", "--auto", "--jobs", "3")
    # Once a story shows `verifying` it stays there until the release: its verification (or
    # its wait for a verification slot) cannot end before. So the screen read here is stable.
    try:
        screen = run.until(
            "three stories verifying and the summary",
            lambda s: len(STORY_LINE.findall(s)) == 3 and SUMMARY.search(s) is not None,
        )
    except BaseException:
        (handshake / "release").touch()
        raise
    assert sorted(STORY_LINE.findall(screen)) == ["S-0001", "S-0002", "S-0003"]
    summary = SUMMARY.search(screen)
    assert summary is not None
    ended, done, blocked, running, _cost, eta = summary.groups()
    assert (ended, done, blocked, running) == ("0", "0", "0", "3")
    # refine, research and plan finished for each story: the ETA is estimated from them.
    assert eta != "—", screen
    # The scrolling lines above the board say what happened so far.
    assert "[S-0001] plan ✓" in screen
    (handshake / "release").touch()
    final = run.until(
        "the final summary", lambda s: re.search(r"^stories 3/3 · 3 done", s, re.M) is not None
    )
    code = run.finish()
    assert code == 0, run.text()
    final = run.text()
    assert len(re.findall(r"^stories 3/3 · 3 done · 0 blocked · 0 running · ", final, re.M)) == 1
    assert not STORY_LINE.search(final)  # no story left on the board once they are done
    assert b"\x1b[?25h" in run.raw  # the cursor is shown again after the live region


PLAIN_STEP = re.compile(
    r"^\d\d:\d\d:\d\d (S-000[12]) (\w+) attempt \d+(?: · retries \d+/\d+)?: (\w+)$", re.M
)


@pytest.mark.parametrize("terminal", ["pipe", "dumb"])
def test_plain_timestamped_step_lines_when_no_live_terminal(tmp_path: Path, terminal: str) -> None:
    repo = make_repo(tmp_path, remote=False)
    for n in range(2):
        repo.story(f"Story {n + 1}")
    write_config(repo.root, f"verify:\n  test: {sys.executable} -c pass\n")
    if terminal == "pipe":
        result = run_cli(repo.root, "run", "--auto", "--jobs", "2", subprocess=True)
        assert result.returncode == 0, result.output
        err = result.stderr
    else:  # a real terminal that cannot move the cursor
        pty_run = PtyRun(repo.root, "run", "--auto", "--jobs", "2", term="dumb")
        assert pty_run.finish() == 0
        err = pty_run.raw.decode(errors="replace").replace("\r\n", "\n")
    steps = PLAIN_STEP.findall(err)
    for sid in ("S-0001", "S-0002"):
        mine = [(phase, step) for s, phase, step in steps if s == sid]
        assert ("implement", "verifying") in mine, err
        assert ("implement", "committing") in mine and ("review", "pushing") in mine, err
        # A line is said once per stream: a phase's start is the progress line
        # `[S-0001] refine · attempt 1 …`, not also a step line `… refine attempt 1: agent`.
        assert ("refine", "agent") not in mine, err
        assert re.search(rf"^\[{sid}\] refine · attempt 1", err, re.M), err
    assert re.search(
        r"^\d\d:\d\d:\d\d S-0001 implement attempt 1 · retries 0/\d+: verifying$", err, re.M
    )
    assert re.search(r"^stories 2/2 · 2 done · 0 blocked · 0 running · ", err, re.M), err
    assert "\x1b[?25l" not in err  # no live region: the cursor was never hidden


#: An SGR sequence that sets a foreground or background colour.
COLOUR = re.compile(rb"\x1b\[(?:[0-9;]*;)?(?:3|4|9|10)[0-9](?:;[0-9;]*)?m")


def test_no_color_keeps_the_live_board_without_colour(tmp_path: Path) -> None:
    """Colour is not liveness: with NO_COLOR the board is still drawn live, only colourless."""
    repo = make_repo(tmp_path, remote=False)
    repo.story("Story 1")
    write_config(repo.root, f"verify:\n  test: {sys.executable} -c pass\n")
    pty_run = PtyRun(repo.root, "run", "--auto", no_color=True)
    assert pty_run.finish() == 0
    assert b"\x1b[?25l" in pty_run.raw  # the live region hid the cursor while it drew
    assert re.search(r"^stories 1/1 · 1 done · 0 blocked · 0 running · ", pty_run.text(), re.M)
    assert COLOUR.search(pty_run.raw) is None, pty_run.raw[:2000]


def test_the_eta_waits_for_a_finished_phase_then_spreads_what_is_left() -> None:
    """The board's arithmetic on an injected clock: `ETA —` until a phase finished; then the
    finished phases' mean times the phases left, over the stories that ran at once."""
    now = [100.0]
    board = Board(clock=lambda: now[0])
    board.observe({"event": "run_started", "stories": ["S-0001", "S-0002"]})
    for sid in ("S-0001", "S-0002"):
        board.observe({"event": "story_started", "story": sid})
        board.observe(
            {"event": "phase_started", "story": sid, "phase": "refine", "step": 1, "of": 6}
        )
    assert board.summary(now[0]).endswith("ETA —")
    now[0] = 110.0
    board.observe({"event": "phase_completed", "story": "S-0001", "phase": "refine", "elapsed": 10})
    board.observe(
        {"event": "phase_started", "story": "S-0001", "phase": "research", "step": 1, "of": None}
    )
    board.observe({"event": "phase_answered", "story": "S-0001", "tokens": 1200, "cost_usd": 0.5})
    # S-0001: research (10 s) + plan, implement, review; S-0002: refine's 10 s are spent, then
    # research, plan, implement, review: 80 s of work over 2 stories at once.
    assert board.summary(now[0]) == (
        "stories 0/2 · 0 done · 0 blocked · 2 running · 1,200 tokens · $0.5000 · ETA 40s"
    )
    lines = board.lines()
    assert lines[0] == "S-0001 · research · attempt 1 · agent 0s · elapsed 10s"
    assert lines[1] == "S-0002 · refine · attempt 1 · retries 0/5 · agent 10s · elapsed 10s"
    board.observe({"event": "story_finished", "story": "S-0002", "outcome": "blocked"})
    assert board.summary(now[0]).startswith("stories 1/2 · 0 done · 1 blocked · 1 running")


def test_each_run_of_a_watch_starts_a_fresh_summary() -> None:
    board = Board(clock=lambda: 0.0)
    board.observe({"event": "run_started", "stories": ["S-0001"]})
    board.observe({"event": "story_started", "story": "S-0001"})
    board.observe({"event": "phase_answered", "story": "S-0001", "tokens": 7})
    board.observe({"event": "story_finished", "story": "S-0001", "outcome": "done"})
    assert board.summary(0.0).startswith("stories 1/1 · 1 done · 0 blocked · 0 running · 7 tokens")
    board.observe({"event": "run_started", "stories": ["S-0002", "S-0003"]})
    assert board.summary(0.0) == (
        "stories 0/2 · 0 done · 0 blocked · 0 running · 0 tokens · cost — · ETA —"
    )
