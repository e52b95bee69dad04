"""Failure-loop detection through the real CLI: consecutive escalations halt the run with a
diagnostic that notifiers receive; a bounce loop escalates its story; a failing notifier never
crashes the run."""

from __future__ import annotations

import http.server
import json
import shlex
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.conftest import run_cli
from tests.support.runs_support import (
    FAIL,
    frontmatter,
    make_project,
    only_run,
    phases_started,
    run_events,
    story_events,
    story_states,
    write_rules,
)

pytestmark = pytest.mark.e2e

NOTIFY_SCRIPT = (
    "import sys, pathlib; pathlib.Path(sys.argv[1]).write_bytes(sys.stdin.buffer.read())\n"
)


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.received.append((self.path, self.headers.get("Content-Type") or "", body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    handler = type("Hook", (_Hook,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token", received
    finally:
        server.shutdown()
        server.server_close()


def test_two_escalations_halt_with_diagnostic_and_notify(
    tmp_path: Path, webhook: tuple[str, list[tuple[str, str, bytes]]]
) -> None:
    url, received = webhook
    root = tmp_path / "p"
    script = tmp_path / "notify.py"
    script.write_text(NOTIFY_SCRIPT)
    sink = tmp_path / "notified.json"
    make_project(
        root,
        ["A", "B", "C"],
        f"verify:\n  test: {json.dumps(shlex.join(FAIL))}\n"
        "limits:\n  implementation_retries: 0\n"
        f"notify:\n  command: {json.dumps([sys.executable, str(script), str(sink)])}\n"
        f"  webhook: {url}\n",
    )
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 6, result.output
    assert "FAILURE LOOP DETECTED (consecutive escalations)" in result.output
    # Each halt reason is said once (issue 12): the loop block, not also a progress line and
    # the final error.
    assert result.stderr.count("FAILURE LOOP DETECTED") == 1, result.stderr
    assert "halted (failure_loop): the failure loop above" in result.output
    assert "boom: widget count is 3, expected 4" in result.output
    state = only_run(root)
    assert state["stop_reason"]["condition"] == "failure_loop"
    assert (state["stop_reason"]["value"], state["stop_reason"]["threshold"]) == (2, 2)
    assert phases_started(root, "S-0003") == []
    folder = root / ".ai-sdlc" / "runs" / state["run_id"]
    diagnostic = json.loads((folder / "diagnostic.json").read_text())
    loop = diagnostic["failure_loop"]
    assert loop["loop_type"] == "consecutive escalations"
    assert loop["stories"] == ["S-0001", "S-0002"]
    assert loop["last_phase"] == "implement"
    assert "failed verification" in loop["reason"]
    assert "boom: widget count is 3, expected 4" in loop["output_tail"]
    assert diagnostic["resume_command"].endswith(f"run --resume {state['run_id']}")
    # Both notifiers got exactly the diagnostic.
    assert json.loads(sink.read_text()) == diagnostic
    assert len(received) == 1
    path, content_type, body = received[0]
    assert path == "/hooks/secret-token" and content_type == "application/json"
    assert json.loads(body) == diagnostic
    events = run_events(root, state["run_id"])
    names = [e["action"] for e in events]
    assert names.count("story_escalated") == 2
    assert names.index("failure_loop_detected") < names.index("run_stopped")
    sent = [e for e in events if e["action"] == "notify_sent"]
    assert len(sent) == 2
    # The webhook's secret path is never written anywhere.
    assert "secret-token" not in (folder / "events.jsonl").read_text()
    assert "secret-token" not in (folder / "state.json").read_text()
    assert any(e["action"] == "story_escalated" for e in story_events(root, "S-0002"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_failing_notifier_is_logged_and_never_crashes_the_run(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(
        root,
        ["A", "B"],
        "limits:\n  refinement_iterations: 0\n"
        "notify:\n  command: [ai-sdlc-no-such-notifier]\n"
        f"  webhook: http://127.0.0.1:{_closed_port()}/hook\n",
    )
    write_rules(root, "rules:\n  - phase: refine\n    decision: REJECTED\n    feedback: no\n")
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 6, result.output
    assert "notification by command ai-sdlc-no-such-notifier failed" in result.stderr
    state = only_run(root)
    failed = [e for e in run_events(root, state["run_id"]) if e["action"] == "notify_failed"]
    assert sorted(e["channel"] for e in failed) == [
        "command ai-sdlc-no-such-notifier",
        "webhook http://127.0.0.1",
    ]
    assert state["run_status"] == "stopped"


def test_a_bounce_loop_escalates_the_story(tmp_path: Path) -> None:
    root = tmp_path / "p"
    make_project(root, ["Keeps bouncing", "Fine"], "")
    write_rules(
        root,
        "rules:\n  - phase: review\n    story: S-0001\n    decision: RECOVERY\n"
        "    feedback: The implementation changed nothing; do it again.\n",
    )
    result = run_cli(root, "run", "--auto")
    assert result.returncode == 5, result.output  # S-0002 done, S-0001 blocked
    fm = frontmatter(root, "S-0001")
    assert fm["status"] == "blocked"
    assert "Bounce loop" in fm["blocked_reason"]
    assert "4 times" in fm["blocked_reason"] and "run.max_bounces = 3" in fm["blocked_reason"]
    # Four step-backs (review → implement) were counted; the fifth implement never started.
    assert phases_started(root, "S-0001").count("implement") == 4
    # The global recovery counter was not what stopped it.
    assert fm["total_recovery_attempts"] == 4
    state = only_run(root)
    stories = story_states(state)
    assert stories["S-0001"]["bounces"] == 4
    assert stories["S-0001"]["escalated"] is True
    assert stories["S-0002"]["status"] == "done"
    bounced = [e for e in run_events(root, state["run_id"]) if e["action"] == "story_bounced"]
    assert [(e["previous"], e["phase"]) for e in bounced] == [("review", "implement")] * 4
    # Nothing else left to run but an escalated story: the run stops (resumable) instead of
    # "completing", and says which story is left and why.
    assert state["stop_reason"]["condition"] == "all_escalated"
    message = state["stop_reason"]["message"]
    assert message.startswith("every remaining story is escalated: S-0001 (blocked: ")
    assert "Bounce loop" in message
