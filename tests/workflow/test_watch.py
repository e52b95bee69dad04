"""`ai-sdlc watch` through the real CLI: `--once` in-process; the daemon as a real process that
notices a story moved to ready (filesystem events, and the `--poll` fallback), survives a bad
story file, and stops on SIGINT (exit 130) and SIGTERM (exit 0) with every story file whole.

Nothing waits on a timing window: the test changes a file and then polls the story's status
with a deadline (the daemon starts watching before its first scan, so no change is missed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ai_sdlc.errors import AiSdlcError, InvalidInputError
from ai_sdlc.store import StoryStore
from tests.conftest import run_cli
from tests.support.git_support import git_env, make_repo  # noqa: F401  (fixture)
from tests.support.records import records_folder, records_path
from tests.support.runs_support import (
    frontmatter,
    start_cli,
    stop_or_explain,
    story_events,
    write_config,
    write_rules,
)
from tests.support.waits import GUARD, NEVER, host_pid, wait_until_gone

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]


def set_status(root: Path, sid: str, status: str) -> None:
    """Move a story, as an editor that saves atomically does (a torn read of a file written
    in place is its own test: a starved writer can leave one torn past the settle time)."""
    path = root / ".ai-sdlc" / "stories" / sid / "story.md"
    text = path.read_text()
    assert "\nstatus: backlog\n" in text
    staged = path.with_name(".story.md.edit")
    staged.write_text(text.replace("\nstatus: backlog\n", f"\nstatus: {status}\n", 1))
    os.replace(staged, path)


def project(tmp_path: Path, count: int) -> Path:
    repo = make_repo(tmp_path, remote=False)
    for n in range(count):
        repo.story(f"Story {n + 1}")
    return repo.root


def wait_status(root: Path, sid: str, status: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if frontmatter(root, sid)["status"] == status:
                return
        except AiSdlcError:  # e.g. its folder is being created: look again
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            _, err = stop_or_explain(proc, timeout=1) if proc.poll() is None else proc.communicate()
            raise AssertionError(f"{sid} never became {status}; daemon stderr:\n{err}")
        time.sleep(0.05)


def start_watch(root: Path, *args: str) -> subprocess.Popen[str]:
    return start_cli(root, "watch", *args)


def test_watch_once_runs_the_ready_stories_and_exits(tmp_path: Path) -> None:
    root = project(tmp_path, 3)
    set_status(root, "S-0001", "ready")
    set_status(root, "S-0002", "ready")
    bad = root / ".ai-sdlc" / "stories" / "S-0004" / "story.md"
    bad.parent.mkdir()
    bad.write_text("---\nid: S-0004\nstatus: [oops\n---\nbody\n")
    result = run_cli(root, "watch", "--once", "--jobs", "2")
    assert result.returncode == 0, result.output
    assert frontmatter(root, "S-0001")["status"] == "done"
    assert frontmatter(root, "S-0002")["status"] == "done"
    assert frontmatter(root, "S-0003")["status"] == "backlog"  # not ready: never run
    assert not [e for e in story_events(root, "S-0003") if e["action"] == "phase_started"]
    assert "skipped an unreadable story" in result.stderr and "S-0004" in result.stderr
    again = run_cli(root, "watch", "--once")
    assert again.returncode == 0 and "Nothing ready to run" in again.stderr


def test_watch_once_exits_5_when_a_story_ends_blocked(tmp_path: Path) -> None:
    root = project(tmp_path, 2)
    set_status(root, "S-0001", "ready")
    set_status(root, "S-0002", "ready")
    write_config(root, "limits:\n  review_rejections: 0\n")
    write_rules(
        root,
        "rules:\n  - phase: review\n    story: S-0001\n    decision: REJECTED\n"
        "    feedback: not good enough\n",
    )
    result = run_cli(root, "watch", "--once", "--json")
    assert result.returncode == 5, result.output
    assert frontmatter(root, "S-0001")["status"] == "blocked"
    assert frontmatter(root, "S-0002")["status"] == "done"


@pytest.mark.parametrize(
    ("how", "sig", "code"),
    [((), signal.SIGINT, 130), (("--poll", "0.1"), signal.SIGTERM, 0)],
    ids=["watchfiles-sigint", "poll-sigterm"],
)
def test_the_daemon_runs_a_story_moved_to_ready_and_stops_on_a_signal(
    tmp_path: Path, how: tuple[str, ...], sig: signal.Signals, code: int
) -> None:
    root = project(tmp_path, 2)
    set_status(root, "S-0001", "ready")
    proc = start_watch(root, *how)
    try:
        wait_status(root, "S-0001", "done", proc)  # the first scan ran; now it waits
        assert frontmatter(root, "S-0002")["status"] == "backlog"
        set_status(root, "S-0002", "ready")
        wait_status(root, "S-0002", "done", proc)
        # A bad story file: reported, skipped; the daemon goes on with the next story.
        bad = root / ".ai-sdlc" / "stories" / "S-0009" / "story.md"
        bad.parent.mkdir()
        bad.write_text("---\nid: S-0009\nstatus: [oops\n---\nbody\n")
        added = run_cli(root, "add", "Story 3")
        assert added.returncode == 0, added.output
        new = added.stdout.strip()
        set_status(root, new, "ready")
        wait_status(root, new, "done", proc)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    proc.send_signal(sig)
    _, err = stop_or_explain(proc, timeout=GUARD)  # a daemon deaf to the signal fails here
    assert proc.returncode == code, err
    expected = "filesystem events" if not how else "polling"
    assert f"Watching for ready stories ({expected})" in err, err
    assert err.count("skipped an unreadable story") == 1, err
    assert "S-0009" in err
    for story in StoryStore(root).list():  # every story file whole
        assert story.frontmatter["status"] == "done", story.id


def test_ctrl_c_during_a_phase_rolls_it_back_and_run_continue_finishes(tmp_path: Path) -> None:
    root = project(tmp_path, 1)
    marker = records_path(root) / "verify.pid"
    hang = (
        "import os, pathlib, sys, time\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    t = m.with_suffix('.tmp'); t.write_text(str(os.getpid())); t.replace(m)\n"
        f"    time.sleep({NEVER})\n"  # only the kill ends it within the guard
    )
    script = tmp_path / "verify.py"
    script.write_text(hang)
    (root / ".ai-sdlc" / "config.yaml").write_text(f"verify:\n  test: {sys.executable} {script}\n")
    records_folder(root)  # the verification's pid marker
    set_status(root, "S-0001", "ready")
    proc = start_watch(root, "--poll", "0.1")
    deadline = time.monotonic() + GUARD
    while not (marker.exists() and marker.read_text().strip().isdigit()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    pid = host_pid(int(marker.read_text()), str(script))  # its own is its namespace's
    proc.send_signal(signal.SIGINT)
    _, err = stop_or_explain(proc, timeout=GUARD, leftovers=(pid,))
    assert proc.returncode == 130, err
    wait_until_gone(pid, "the interrupted verification")
    fm = frontmatter(root, "S-0001")  # parses; the implement phase was rolled back
    assert fm["status"] != "done" and not fm.get("implementation_complete")
    finished = run_cli(root, "run", "--continue")
    assert finished.returncode == 0, finished.output
    assert frontmatter(root, "S-0001")["status"] == "done"


def test_a_story_file_caught_mid_write_is_not_reported_but_a_broken_one_is(
    tmp_path: Path,
) -> None:
    """An editor that truncates and then writes leaves the file empty for an instant: the watch
    gives a file written moments ago SETTLE_SECONDS to be finished (the sleep is injected; the
    "editor" completes its write during it) and reports only a file that stays unreadable."""
    from ai_sdlc.workflow.watch import SETTLE_SECONDS, Watch

    root = project(tmp_path, 2)
    story = root / ".ai-sdlc" / "stories" / "S-0002" / "story.md"
    whole = story.read_text()
    story.write_text("")  # caught between the truncate and the write
    events: list[dict[str, object]] = []
    slept: list[float] = []

    def finish_the_write(seconds: float) -> None:
        slept.append(seconds)
        story.write_text(whole)

    watch = Watch(
        StoryStore(root),
        run=lambda ids: None,
        emit=events.append,
        sleep=finish_the_write,
        wall_clock=lambda: story.stat().st_mtime_ns / 1e9 + 0.1,
    )
    watch.ready()
    assert events == [] and len(slept) == 1 and 0 < slept[0] <= SETTLE_SECONDS

    story.write_text("---\nid: S-0002\nstatus: [oops\n---\n")  # broken, and it stays so
    watch.sleep = slept.append
    watch.ready()
    assert [e["event"] for e in events] == ["watch_story_unreadable"]
    watch.ready()  # reported once per change of the file
    assert len(events) == 1
    # Torn when scanned, whole by the time the watch looks (the write ended in between): the
    # file reads fine now, so nothing is reported.
    first = root / ".ai-sdlc" / "stories" / "S-0001" / "story.md"
    first.write_text(first.read_text())
    watch.wall_clock = lambda: first.stat().st_mtime_ns / 1e9 + 0.1
    torn = InvalidInputError("no frontmatter", path=str(first))
    watch._report_unreadable([torn, *StoryStore(root).scan().errors])
    assert len(events) == 1
    # The same, on a machine so busy that the look comes after SETTLE_SECONDS: still nothing.
    watch.wall_clock = lambda: first.stat().st_mtime_ns / 1e9 + SETTLE_SECONDS + 5
    watch._report_unreadable([torn, *StoryStore(root).scan().errors])
    assert len(events) == 1
    # Half written when the watch took its signature, finished (still broken) by the time it
    # looked, on a machine so busy that the look came after SETTLE_SECONDS: reported once,
    # and not again by the next scan of the same, unchanged file.
    half = "---\nid: S-0002\nstatus: [oo"
    story.write_text(half)

    def writer_finishes() -> float:
        if story.read_text() == half:
            story.write_text(half + "ps again\n---\n")
        return story.stat().st_mtime_ns / 1e9 + SETTLE_SECONDS + 5

    watch.wall_clock = writer_finishes
    broken = InvalidInputError("broken", path=str(story))
    watch._report_unreadable([broken])
    assert len(events) == 2
    watch._report_unreadable([broken])
    assert len(events) == 2
    # An old broken file is reported at once, without waiting.
    slept.clear()
    watch.wall_clock = lambda: story.stat().st_mtime_ns / 1e9 + 60
    story.write_text("---\nid: S-0002\nstatus: [still oops\n---\n")
    watch.ready()
    assert len(events) == 3 and slept == []


def test_a_signal_that_came_during_a_run_stops_the_watch_after_it(tmp_path: Path) -> None:
    """Ctrl-C held back while a run's last locks were held reaches the watch's handler only when
    they are released; the run has ended by then, and did not end interrupted. The watch stops
    after that run instead of waiting for the next change (the daemon used to wait on, deaf)."""
    from ai_sdlc.workflow.watch import StopFlag, Watch

    root = project(tmp_path, 2)
    set_status(root, "S-0001", "ready")
    set_status(root, "S-0002", "ready")
    stop = StopFlag()
    ran: list[list[str]] = []

    def run(ids: list[str]) -> None:
        ran.append(ids)
        stop.signal = "SIGINT"  # the handler ran as the run's last lock was released

    class NoWait:
        name = "test"

        def start(self) -> None:
            pass

        def wait(self, timeout: float | None = None) -> None:
            raise AssertionError("the watch waited for changes after a stop signal")

        def close(self) -> None:
            pass

    watch = Watch(StoryStore(root), run=run, emit=lambda _e: None, changes=NoWait(), stop=stop)
    assert watch.serve().stopped_by == "SIGINT"
    assert len(ran) == 1
    stop.signal = None  # no signal: a cycle with nothing new to run ends unstopped
    assert watch.once().stopped_by is None and len(ran) == 1


def read_until(proc: subprocess.Popen[str], seen: str, text: str = "") -> str:
    """The daemon's stderr so far, read until it holds `seen` (its output is the handshake)."""
    import select

    assert proc.stderr is not None
    deadline = time.monotonic() + GUARD
    while seen not in text:
        ready, _, _ = select.select([proc.stderr], [], [], 0.1)
        chunk = os.read(proc.stderr.fileno(), 65536).decode() if ready else ""
        if (ready and not chunk) or time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"never said {seen!r}; stderr so far:\n{text}")
        text += chunk
    return text


@pytest.mark.parametrize(
    ("how", "when"),
    [((), "looking again when a story file changes"), (("--poll", "30"), "next check in 30 s")],
    ids=["watchfiles", "poll"],
)
def test_the_daemon_says_what_it_waits_for(tmp_path: Path, how: tuple[str, ...], when: str) -> None:
    root = project(tmp_path, 3)
    path = root / ".ai-sdlc" / "stories" / "S-0003" / "story.md"
    path.write_text(
        path.read_text().replace(
            "\nstatus: backlog\n", "\ndependencies: [S-0001]\nstatus: ready\n", 1
        )
    )
    proc = start_watch(root, *how)
    err = read_until(proc, f"none ready; {when}")
    assert "waiting for S-0001 (backlog) before S-0003" in err, err
    assert f"waiting: 2 stories in backlog, none ready; {when}" in err, err
    if not how:  # its dependency ready: both run, then the watch waits for the last one
        set_status(root, "S-0001", "ready")
        err = read_until(proc, f"waiting: 1 story in backlog, none ready; {when}", err)
        assert frontmatter(root, "S-0003")["status"] == "done"
        assert err.count("waiting for S-0001") == 1, err
    proc.send_signal(signal.SIGTERM)
    _, rest = stop_or_explain(proc, timeout=GUARD)
    assert proc.returncode == 0, err + rest
