"""The state owner and the ledger together, in process: what the end-to-end ledger tests pin,
at the level of one operation.

Each test pins a promise that `make mutants` found no other test pinning closely enough.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.errors import StoryBlockedError
from ai_sdlc.providers.base import Phase, Usage
from tests.support.owner_support import (
    SID,
    failing_call,
    guarded_call,
    hand_edit,
    llm_section,
    owner_in,
)
from tests.support.runs_support import frontmatter, make_project, story_events

# --- the state owner, in process: what the end-to-end ledger tests used to pin ----------------


def test_a_tamper_is_told_on_stderr_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _root, owner = owner_in(tmp_path)
    for _ in range(2):  # one entry only: its copy would read as a crash before the append
        owner.record_recovery(SID, "api_retry")
    owner.journal.path(SID).unlink()
    owner.ensure_can_act(SID)
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {SID}: tamper detected: ") and err.endswith(
        "only 'ai-sdlc unblock --reset-retries' lowers them\n"
    )
    assert err.count("\n") == 1


def test_every_failed_attempt_keeps_its_own_patch(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    attempts = root / ".ai-sdlc" / "stories" / SID / "attempts"
    for n in (1, 2):
        owner.begin_action(SID, Phase.IMPLEMENT)
        owner.fail_attempt(
            SID,
            Phase.IMPLEMENT,
            "implementation_retry",
            outcome="tests_failed",
            feedback="",
            patch=(n, f"diff {n}\n"),
        )
    assert sorted(p.name for p in attempts.iterdir()) == ["1.patch", "2.patch"]
    assert (attempts / "2.patch").read_text() == "diff 2\n"
    assert owner.ledger(SID).total == 2


def test_the_guard_is_built_from_the_projects_resilience_settings(tmp_path: Path) -> None:
    from ai_sdlc.config.layers import load_config
    from ai_sdlc.errors import InvalidInputError
    from ai_sdlc.workflow.state.guard import GuardFactory

    root = tmp_path / "p"
    store = make_project(
        root, ["Story"], "resilience:\n  policies:\n    llm:\n      max_delay: 2\n"
    )
    home = {"AI_SDLC_CONFIG_HOME": str(tmp_path / "home")}
    factory = GuardFactory.from_config(store, load_config(root, environ=home))
    assert factory.manager.policy("llm").retry.max_delay == 2
    # each layer is sound alone; together the delays contradict each other: the guard names
    # the project's file
    env = {**home, "AI_SDLC_RESILIENCE__POLICIES__LLM__INITIAL_DELAY": "5"}
    with pytest.raises(InvalidInputError) as raised:
        GuardFactory.from_config(store, load_config(root, environ=env))
    assert raised.value.message == (
        f"{root / '.ai-sdlc' / 'config.yaml'}: resilience.policies.llm.max_delay must be >= "
        "initial_delay (5), got 2"
    )


def test_each_retry_is_recorded_with_its_delay_reason_and_error(tmp_path: Path) -> None:
    retries, guard = guarded_call(tmp_path, llm_section(max_attempts=3, initial_delay=0.12345))
    assert guard(failing_call("a", "b")) == "answer"
    error, reason = "TransientProviderError", "server (HTTP 503)"
    assert retries == [  # the delay in milliseconds, as the story's events show it
        {"attempt": 1, "delay": 0.123, "reason": reason, "error": error},
        {"attempt": 2, "delay": 0.247, "reason": reason, "error": error},
    ]


def test_an_action_records_its_workspace_and_names_its_phase_and_attempt(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    owner.begin_action(SID, Phase.PLAN, fields={"branch": "ai/s-0001"})  # fields, no event
    assert frontmatter(root, SID)["branch"] == "ai/s-0001"
    assert [e["action"] for e in story_events(root, SID)] == ["phase_started"]
    owner.complete_phase(SID, Phase.PLAN)
    owner.begin_action(SID, Phase.PLAN, event={"action": "worktree_reused", "path": "w"})
    events = story_events(root, SID)
    assert [(e["action"], e.get("phase"), e.get("attempt")) for e in events] == [
        ("phase_started", "plan", 1),
        ("phase", "plan", 1),
        ("worktree_reused", None, None),
        ("phase_started", "plan", 2),
    ]
    assert events[2]["path"] == "w"


def test_a_failed_attempts_event_says_what_failed_and_how(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    owner.begin_action(SID, Phase.REVIEW)
    owner.fail_attempt(
        SID,
        Phase.REVIEW,
        "rework",
        outcome="changes_requested",
        feedback="fix it",
        signature="sig-1",
        workspace_changed=False,
        reviewer="r",
    )
    failed, counted = [e for e in story_events(root, SID) if e["action"] in ("phase", "recovery")]
    assert {k: failed[k] for k in failed if k not in ("time", "counters")} == {
        "action": "phase",
        "phase": "review",
        "outcome": "changes_requested",
        "attempt": 1,
        "signature": "sig-1",
        "workspace_changed": False,
        "feedback": "fix it",
        "reviewer": "r",
    }  # no output given: no output file named
    assert (counted["phase"], counted["reason"]) == ("review", "")  # no reason given


def test_a_passed_phase_counts_one_call_and_touches_the_date_only_when_its_status_moves(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path)
    hand_edit(root, status="in-progress", updated="2020-01-01")
    owner.begin_action(SID, Phase.RESEARCH)
    owner.complete_phase(
        SID, Phase.RESEARCH, status="in-progress", usage=Usage(input_tokens=5, output_tokens=1)
    )
    fm = frontmatter(root, SID)
    assert fm["usage"] == {"input_tokens": 5, "output_tokens": 1, "calls": 1}
    assert str(fm["updated"]) == "2020-01-01"  # the status did not move
    passed = story_events(root, SID)[-1]
    assert (passed["action"], passed["phase"], passed["attempt"]) == ("phase", "research", 1)
    owner.complete_phase(SID, Phase.PLAN)  # nothing reserved for it: attempt 0
    assert story_events(root, SID)[-1]["attempt"] == 0


def test_usage_with_only_a_cost_or_only_a_call_is_kept_and_nothing_writes_nothing(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path)
    path = root / ".ai-sdlc" / "stories" / SID / "story.md"
    text = path.read_bytes()
    owner.add_usage(SID, Usage(), calls=0)
    assert path.read_bytes() == text and "usage" not in frontmatter(root, SID)
    owner.add_usage(SID, Usage(cost_usd=0.25), calls=0)
    assert frontmatter(root, SID)["usage"]["cost_usd"] == 0.25
    owner.add_usage(SID, Usage(), calls=1)
    assert frontmatter(root, SID)["usage"]["calls"] == 1


def test_a_story_blocked_without_a_reason_or_already_at_the_limit_is_refused(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path, limit=3)
    hand_edit(root, status="blocked")
    with pytest.raises(StoryBlockedError) as raised:
        owner.ensure_can_act(SID)
    assert raised.value.message == "S-0001 is blocked: no reason"
    owner.unblock(SID, reset_retries=False)
    hand_edit(root, total_recovery_attempts=3, recovery_breakdown={"rework": 3})
    with pytest.raises(StoryBlockedError, match="Global recovery limit exceeded"):
        owner.ensure_can_act(SID)
    blocked = story_events(root, SID)[-1]
    assert (blocked["action"], blocked["outcome"]) == ("blocked", "global_recovery_limit")


def test_the_files_breakdown_keeps_every_kind_it_lists(tmp_path: Path) -> None:
    root, owner = owner_in(tmp_path)
    hand_edit(root, recovery_breakdown={"rework": 0, "api_retry": 0})
    owner.record_recovery(SID, "api_retry")
    assert frontmatter(root, SID)["recovery_breakdown"] == {"rework": 0, "api_retry": 1}


def test_the_ledger_keeps_text_as_written_in_utf8(tmp_path: Path) -> None:
    _root, owner = owner_in(tmp_path)
    owner.begin_action(SID, Phase.IMPLEMENT)
    owner.fail_attempt(
        SID, Phase.IMPLEMENT, "implementation_retry", outcome="f", feedback="attendu « é » ✗"
    )
    line = owner.journal.path(SID).read_bytes().splitlines()[-1]
    assert "attendu « é » ✗".encode() in line  # readable by a person auditing the ledger


def test_an_operation_that_changes_nothing_writes_no_entry_whatever_its_keys_order(
    tmp_path: Path,
) -> None:
    _root, owner = owner_in(tmp_path)
    ledger = owner.journal.path(SID)
    owner.complete_phase(SID, Phase.IMPLEMENT, verified={"passed": True, "summary": "ok"})
    lines = ledger.read_bytes()
    owner.complete_phase(SID, Phase.IMPLEMENT, verified={"summary": "ok", "passed": True})
    assert ledger.read_bytes() == lines


def test_a_kind_lowered_or_dropped_in_the_file_is_restored_and_a_new_one_honoured(
    tmp_path: Path,
) -> None:
    root, owner = owner_in(tmp_path)
    for _ in range(2):
        owner.record_recovery(SID, "api_retry")

    def check(**values: object) -> dict[str, Any]:
        hand_edit(root, **values)
        owner.ensure_can_act(SID)
        return story_events(root, SID)[-1]

    # the total one entry back, but not the breakdown: not a crash, tamper
    event = check(total_recovery_attempts=1, recovery_breakdown={"api_retry": 0})
    assert (event["action"], event["changed"]) == (
        "tamper_detected",
        {
            "total_recovery_attempts": {"file": 1, "ledger": 2},
            "recovery_breakdown.api_retry": {"file": 0, "ledger": 2},
        },
    )
    # the breakdown one entry back, but not the total: tamper too
    event = check(total_recovery_attempts=0, recovery_breakdown={"api_retry": 1})
    assert event["action"] == "tamper_detected"
    # the kind dropped from the file, the total left alone: restored all the same
    event = check(recovery_breakdown={})
    assert event["changed"] == {"recovery_breakdown.api_retry": {"file": 0, "ledger": 2}}
    fm = frontmatter(root, SID)
    assert (fm["total_recovery_attempts"], fm["recovery_breakdown"]) == (2, {"api_retry": 2})
    # a kind the ledger never counted, written by hand: honoured, and the total follows it
    event = check(recovery_breakdown={"api_retry": 2, "rework": 3})
    assert (event["action"], event["changed"]) == (
        "counters_hand_edited",
        {"recovery_breakdown.rework": {"file": 3, "ledger": 0}},
    )
    assert frontmatter(root, SID)["total_recovery_attempts"] == 5
    assert owner.ledger(SID).breakdown == {"api_retry": 2, "rework": 3}
