"""`ai-sdlc log`: a story's events.jsonl as a timeline, as NDJSON, filtered, and followed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ai_sdlc.cli.log import EventReader
from ai_sdlc.workflow.state.events import append_event
from tests.conftest import CliRunner, cli_environment

pytestmark = pytest.mark.e2e


def events_file(project: Path, story_id: str = "S-0001") -> Path:
    return project / ".ai-sdlc" / "stories" / story_id / "events.jsonl"


def file_events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def failing_story(cli: CliRunner) -> None:
    """A real run whose verification always fails: retries, then a block."""
    assert cli("config", "verify.test", "false").returncode == 0
    assert cli("add", "Never passes").returncode == 0
    assert cli("run", "S-0001").returncode == 5


def test_timeline_one_line_per_event_with_recoveries_marked(cli: CliRunner, project: Path) -> None:
    failing_story(cli)
    events = file_events(events_file(project))
    result = cli("log", "S-0001")
    assert result.returncode == 0
    # one first line per event (what explains it is wrapped under it, indented)
    lines = result.stdout.splitlines()
    firsts = [line for line in lines if not line.startswith(" ")]
    assert len(firsts) == len(events)
    for line, event in zip(firsts, events, strict=True):
        assert str(event["time"]).replace("T", " ")[:19] in line
        assert f" {event['action']} " in line
    recoveries = [i for i, line in enumerate(lines) if " recovery " in line]
    assert recoveries and all(lines[i].split()[2] == "↻" for i in recoveries)
    assert "implement" in lines[recoveries[0]]
    assert "recoveries 1 (implementation_retry 1)" in lines[recoveries[0] + 1]
    (blocked,) = [i for i, line in enumerate(lines) if "■ blocked" in line]
    assert "Implementation failed verification" in " ".join(lines[blocked + 1 : blocked + 4])
    # the same through the slug, and the NDJSON form is the file's events exactly
    as_json = cli("log", "never-passes", "--json")
    assert [json.loads(x) for x in as_json.stdout.splitlines()] == events


def test_kind_filters(cli: CliRunner, project: Path) -> None:
    failing_story(cli)
    events = file_events(events_file(project))
    only = cli("log", "S-0001", "--kind", "recovery", "--json")
    assert [json.loads(x) for x in only.stdout.splitlines()] == [
        e for e in events if e["action"] == "recovery"
    ]
    both = cli("log", "S-0001", "-k", "recovery", "-k", "blocked", "--json")
    assert {json.loads(x)["action"] for x in both.stdout.splitlines()} == {"recovery", "blocked"}
    phases = cli("log", "S-0001", "--kind", "phase_started", "--json")
    assert {json.loads(x)["action"] for x in phases.stdout.splitlines()} == {"phase_started"}
    bad = cli("log", "S-0001", "--kind", "recoveries")
    assert bad.returncode == 2 and "unknown event kind 'recoveries'" in bad.stderr
    none = cli("log", "S-0001", "--kind", "gate")
    assert none.returncode == 0 and "S-0001: no matching events yet" in none.stderr


def test_story_without_events_and_unknown_story(cli: CliRunner) -> None:
    assert cli("add", "Fresh").returncode == 0
    fresh = cli("log", "S-0001")
    assert fresh.returncode == 0 and "S-0001: no events yet" in fresh.stderr
    assert cli("log", "S-0001", "--json").stdout == ""
    missing = cli("log", "S-0002")
    assert missing.returncode == 1 and "no story S-0002" in missing.stderr
    outside = cli("log", "../../etc")
    assert outside.returncode == 2 and "Traceback" not in outside.output


def test_torn_and_garbled_lines_are_skipped(cli: CliRunner, project: Path) -> None:
    assert cli("add", "Torn").returncode == 0
    assert cli("run", "S-0001", "--step", "refine").returncode == 0
    path = events_file(project)
    good = file_events(path)
    with path.open("a") as fh:
        fh.write('{"time": "2026-01-01T00:00:00.000Z", "action": "pha')  # crash mid-append
    result = cli("log", "S-0001", "--json")
    assert result.returncode == 0
    assert [json.loads(x) for x in result.stdout.splitlines()] == good
    human = cli("log", "S-0001")
    assert len([x for x in human.stdout.splitlines() if not x.startswith(" ")]) == len(good)
    assert "warning: 1 unreadable line in" in human.stderr


def test_reader_holds_a_line_until_its_end_is_written(tmp_path: Path) -> None:
    folder = tmp_path
    append_event(folder, {"time": "t1", "action": "phase_started", "phase": "refine"})
    path = folder / "events.jsonl"
    chunks = iter(['{"time": "t2", "action": "ph', 'ase", "phase": "refine"}\n', ""])
    seen: list[str] = []

    def wait() -> None:  # the run appends between two looks
        with path.open("a") as fh:
            fh.write(next(chunks))

    for event in EventReader(path).follow(wait=wait):
        seen.append(str(event["time"]))
        if len(seen) == 2:
            break
    assert seen == ["t1", "t2"]


def test_follow_prints_events_appended_while_it_runs(cli: CliRunner, project: Path) -> None:
    assert cli("add", "Followed").returncode == 0
    assert cli("run", "S-0001", "--step", "refine").returncode == 0
    folder = events_file(project).parent
    before = len(file_events(folder / "events.jsonl"))
    stop = threading.Event()

    def writer() -> None:  # appends while `log --follow` polls (ends with --max-events)
        for n in range(3):
            if stop.wait(0.02):
                return
            append_event(
                folder,
                {
                    "time": f"2030-01-01T00:00:0{n}.000Z",
                    "action": "recovery",
                    "outcome": "recorded",
                    "recovery_kind": "api_retry",
                },
            )

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        result = cli(
            "log",
            "S-0001",
            "--follow",
            "--json",
            "--max-events",
            str(before + 3),
            "--poll-interval",
            "0.01",
            timeout=30,
        )
    finally:
        stop.set()
        thread.join()
    assert result.returncode == 0, result.output
    printed = [json.loads(x) for x in result.stdout.splitlines()]
    assert printed == file_events(folder / "events.jsonl")[: before + 3]
    assert [e["time"] for e in printed[before:]] == [
        f"2030-01-01T00:00:0{n}.000Z" for n in range(3)
    ]


def test_follow_in_a_real_process_stops_cleanly_on_ctrl_c(cli: CliRunner, project: Path) -> None:
    assert cli("add", "Live").returncode == 0
    assert cli("run", "S-0001", "--step", "refine").returncode == 0
    folder = events_file(project).parent
    count = len(file_events(folder / "events.jsonl"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ai_sdlc",
            "-C",
            str(project),
            "log",
            "S-0001",
            "-f",
            "--json",
            "--poll-interval",
            "0.02",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_environment(),
    )
    try:
        assert proc.stdout is not None
        for _ in range(count):  # the events already there (read as they arrive: no timing)
            json.loads(proc.stdout.readline())
        append_event(folder, {"time": "2030-01-01T00:00:00.000Z", "action": "unblock"})
        assert json.loads(proc.stdout.readline())["action"] == "unblock"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == "" and "Traceback" not in err
