"""Live progress of a run: NDJSON events on stdout with --json, otherwise one readable line per
event on stderr (styled when a terminal is attached, plain when not)."""

from __future__ import annotations

from typing import Any

from ai_sdlc.cli.live import LiveBoard
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.wording import attempt_label, count, plural

QUIET = {"phase_answered"}
#: Run-level events shown in red / yellow.
ALARMING = {
    "story_escalated",
    "failure_loop_detected",
    "run_stopped",
    "run_failed",
    "rollback_failed",
    "notify_failed",
}
WARNING = {
    "recovery",
    "story_bounced",
    "story_cooldown",
    "cooldown_wait",
    "cooldown",
    "rollback_initiated",
    "story_skipped",
    "story_deferred",
    "run_stopping",
    "sandbox_unavailable",
}


def _count(values: dict[str, Any], key: str, word: str) -> str:
    number = values.get(key)
    return count(number, word) if isinstance(number, int) else f"? {plural(word, 2)}"


def outcome_line(story_id: str, result: str, reason: str | None) -> str:
    """A story's result in a run, as `run` and `watch` print it: "S-0002: blocked: <why>"
    (the state owner's "S-0002 is blocked: " prefix dropped, so the id is said once)."""
    why = (reason or "").removeprefix(f"{story_id} is blocked: ")
    if result == "done" or not why:
        return f"{story_id}: {result}"
    if result == "idle":
        return f"{story_id}: nothing to do ({why})"
    if result in ("waiting", "stepped"):
        return f"{story_id}: {why}"
    return f"{story_id}: {result}: {why}"


class Progress:
    def __init__(self, out: Terminal) -> None:
        self.out = out
        #: The live board: a rich live region on a terminal, timestamped step lines otherwise.
        self.board = LiveBoard(out)

    def close(self) -> None:
        """The run ended (or broke off): leave the board's last frame on the screen."""
        self.board.close()

    def event(self, event: dict[str, Any]) -> None:
        if self.out.json_mode:
            self.out.ndjson(event)
            return
        self.board.event(event)
        name = event.get("event", "")
        if name in QUIET:
            self.out.debug(" ".join(f"{k}={v}" for k, v in event.items()))
            return
        text = self.describe(event)
        if text:
            style = None
            if "blocked" in name or name in ALARMING:
                style = "red"
            elif name in WARNING:
                style = "yellow"
            self.out.progress(text, style=style)

    @staticmethod
    def describe(e: dict[str, Any]) -> str | None:
        story = e.get("story", "")
        name = e.get("event", "")
        phase = e.get("phase", "")
        if name == "story_picked":  # `ai-sdlc run` without an id says which story it took
            return f"[{story}] picked as the next story by priority: {e.get('reason')}"
        if name == "story_started":
            return f"[{story}] starting" + (f" on {e['worker']}" if e.get("worker") else "")
        took = f" ({float(e['elapsed']):.1f}s)" if e.get("elapsed") is not None else ""
        if name == "phase_started":
            label = attempt_label(e.get("attempt", 1), e.get("step"), e.get("of"))
            return f"[{story}] {phase} · {label}"
        if name in ("phase_completed", "phase_passed"):
            return f"[{story}] {phase} ✓{took}"
        if name == "phase_failed":  # the reason when it is not verification (no work, agent)
            return f"[{story}] {phase} ✗ {e.get('reason') or 'verification failed'}{took}"
        if name.startswith("phase_"):
            return f"[{story}] {phase}: {name.removeprefix('phase_').upper()}{took}"
        if name == "verification_skipped":
            return (
                f"[{story}] no verification configured (verify.build / verify.test): "
                "nothing was built or tested"
            )
        if name == "sandbox_unavailable":
            return (
                f"[{story}] no sandbox ({e.get('reason')}): agents and verification commands "
                "can write anywhere you can (see docs/sandbox.md)"
            )
        if name == "verification_finished":
            if not e.get("passed") and phase in ("implement", "rework"):
                return None  # said once, by the phase's `✗ verification failed` line
            return f"[{story}] verification {'passed' if e.get('passed') else 'failed'}"
        if name == "baseline_started":
            return f"[{story}] verifying the untouched base {str(e.get('base', ''))[:12]} first"
        if name == "baseline_finished":
            counts = e.get("counts") or {}
            shown = (
                f": {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
                f"{counts.get('skipped', 0)} skipped"
                if counts
                else ""
            )
            failing = e.get("failing") or []
            aside = e.get("set_aside") or []
            if aside:  # the counts are those of the base without its new tests
                fails = (
                    f" with {', '.join(aside[:3])} set aside (new tests that do not build at "
                    f"the base: {e.get('reason') or '?'})"
                )
            else:
                fails = f" (failing before the change: {', '.join(failing[:3])})" if failing else ""
            return f"[{story}] base verified{shown}{fails}"
        if name == "floor_off":
            return f"[{story}] pass-count floor off: {e.get('reason')}"
        if name == "protected_restored":
            return f"[{story}] put back the agent's test files: {', '.join(e.get('paths') or [])}"
        if name == "recovery":
            kind = str(e.get("recovery_kind", "")).replace("_", " ")
            extra = ""
            if e.get("delay") is not None:
                extra = f", waiting {float(e['delay']):.1f}s"
            reason = f": {e['reason']}" if e.get("reason") else ""
            return f"[{story}] recovery {e.get('total')}/{e.get('limit')} ({kind}{extra}){reason}"
        if name == "story_finished":  # a story that stopped short (a gate, a review) is said
            # by its result line ("S-0001: waiting for approval: run 'ai-sdlc approve …'")
            if e.get("outcome") != "done":
                return None
            return f"[{story}] done in {float(e.get('elapsed') or 0):.1f}s"
        if name == "tool_call":
            return f"[{story}]   {phase} tool {e.get('tool', '')}"
        if name == "workspace":
            return f"[{story}] {e.get('notice')}"
        if name == "story_published":  # the message says what happened ("pull request opened …")
            if e.get("outcome") in ("opened", "reused", "merged"):
                return f"[{story}] {e.get('message')}"
            return f"[{story}] pull request {e.get('outcome')}: {e.get('message')}"
        return Progress.describe_run(e)

    @staticmethod
    def describe_run(e: dict[str, Any]) -> str | None:
        """Events of a multi-story run (`run --auto`, `--batch`, `--resume`)."""
        story = e.get("story", "")
        name = e.get("event", "")
        if name in ("run_started", "run_resumed"):
            verb = "started" if name == "run_started" else f"resumed (segment {e.get('segment')})"
            stories = e.get("stories") or []
            listed = f"{count(len(stories), 'story')} ({', '.join(stories)})"
            line = f"Run {e.get('run_id')} {verb}: {listed}"
            carried = e.get("carried_over")
            if isinstance(carried, dict):
                cost = carried.get("cost_usd")
                line += (
                    f"\n  carried over: {_count(carried, 'total_attempts', 'attempt')}, "
                    f"{_count(carried, 'finished_stories', 'finished story')}, "
                    f"{_count(carried, 'consecutive_fails', 'failure')} and "
                    f"{_count(carried, 'consecutive_escalations', 'escalation')} in a row"
                    + (f", ${float(cost):.4f} spent" if cost is not None else "")
                    + "; the reject and retry rates and the attempt cap start afresh with "
                    "this segment"
                )
            return line
        if name == "story_escalated":
            return f"[{story}] escalated: {e.get('reason')}"
        if name == "story_bounced":
            return f"[{story}] bounce {e.get('bounces')}: {e.get('previous')} → {e.get('phase')}"
        if name == "story_cooldown":
            return f"[{story}] crashed ({e.get('error')}); not retried before {e.get('until')}"
        if name == "cooldown_wait":
            return (
                f"[{story}] nothing else to run: waiting for its cooldown (until {e.get('until')})"
            )
        if name == "cooldown":
            return f"[{story}] cooldown: {float(e.get('remaining') or 0):.1f}s left"
        if name == "story_skipped":
            return f"[{story}] skipped: {e.get('reason')}"
        if name == "story_deferred":
            return (
                f"[{story}] deferred: its plan names {', '.join(e.get('paths') or [])}, "
                f"already changed by {', '.join(e.get('siblings') or [])}"
            )
        if name == "run_stopping":
            return f"Run stopping ({e.get('condition')}): running stories finish their phase"
        if name == "rollback_initiated" and "run_id" in e:
            return None  # the run's copy of the runner's event, which was said
        if name == "rollback_initiated":
            return (
                f"[{story}] rolled back to the checkpoint before {e.get('phase')} "
                f"({', '.join(e.get('restored') or []) or 'nothing to restore'}): {e.get('reason')}"
            )
        if name == "rollback_failed":
            return f"[{story}] rollback failed, kept for the next run: {e.get('reason')}"
        if name in ("failure_loop_detected", "run_stopped"):
            return None  # said once, by the run's summary (the loop block, then the error)
        if name == "notify_sent":
            return f"notified by {e.get('channel')} ({e.get('detail')})"
        if name == "notify_failed":
            return f"notification by {e.get('channel')} failed: {e.get('detail')}"
        return None
