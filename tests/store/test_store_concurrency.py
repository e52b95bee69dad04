"""Real processes: no lost updates, no torn files after SIGKILL, no duplicate ids."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from tests.support.store_support import bump_recovery, make_project, minimal, write_story

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork (POSIX)"
    ),
]
BIG = 2_000_000


def _context() -> multiprocessing.context.BaseContext:
    return multiprocessing.get_context("fork")


def _bump(root: str, times: int) -> None:
    store = StoryStore(Path(root))
    for _ in range(times):
        with store.edit("S-0001") as story:
            bump_recovery(story, "rework")
            story.increment("retry_count")


def test_eight_processes_fifty_increments_each_lose_nothing(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    write_story(store, "S-0001", minimal())
    workers = [_context().Process(target=_bump, args=(str(tmp_path), 50)) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    story = store.get("S-0001")
    assert story.counter("retry_count") == 400
    assert story.counter("total_recovery_attempts") == 400
    assert story.recovery_breakdown == {"rework": 400}


def _rewrite_forever(root: str, ready: multiprocessing.synchronize.Event) -> None:
    store = StoryStore(Path(root))
    while True:
        with store.edit("S-0001") as story:
            count = story.increment("retry_count")
            letter = "ab"[count % 2]
            story.frontmatter["payload"] = letter
            story.body = letter * BIG + "\n"
        ready.set()


def test_sigkill_during_writes_leaves_old_or_new_content(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    path = write_story(store, "S-0001", minimal(payload="a"))
    rng = random.Random(7)
    counts = set()
    for _ in range(20):
        ready = _context().Event()
        child = _context().Process(target=_rewrite_forever, args=(str(tmp_path), ready))
        child.start()
        assert ready.wait(timeout=30)
        time.sleep(rng.uniform(0, 0.03))
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
        assert child.exitcode == -signal.SIGKILL
        story = store.get("S-0001")  # parses: never a torn file
        count = story.counter("retry_count")
        letter = "ab"[count % 2]
        assert story.frontmatter["payload"] == letter
        assert story.body == letter * BIG + "\n"
        counts.add(count)
    assert len(counts) == 20  # every round wrote and was cut off at a different point
    assert path.read_bytes().startswith(b"---\nid: S-0001\n")
    with store.edit("S-0001") as story:  # the next write sweeps temp files of killed writers
        story.body = "done\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["story.md"]


def _add_many(root: str, worker: int, times: int) -> None:
    store = StoryStore(Path(root))
    for n in range(times):
        store.add(f"Story {worker}-{n}")


def test_concurrent_adds_get_unique_ids(tmp_path: Path) -> None:
    store = make_project(tmp_path, [])
    workers = [_context().Process(target=_add_many, args=(str(tmp_path), w, 5)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    stories = store.list()
    assert [s.id for s in stories] == [f"S-{n:04d}" for n in range(1, 21)]
    assert len({s.title for s in stories}) == 20
    assert sorted(s.frontmatter["priority"] for s in stories) == list(range(10, 210, 10))
