"""Live progress of a run: NDJSON events on stdout with --json, otherwise one readable line per
event on stderr (styled when a terminal is attached, plain when not)."""

from __future__ import annotations

from typing import Any

from ai_sdlc.cli.terminal import Terminal

QUIET = {"phase_answered"}


class Progress:
    def __init__(self, out: Terminal) -> None:
        self.out = out

    def event(self, event: dict[str, Any]) -> None:
        if self.out.json_mode:
            self.out.ndjson(event)
            return
        name = event.get("event", "")
        if name in QUIET:
            return
        text = self.describe(event)
        if text:
            style = "red" if "blocked" in name else ("yellow" if name == "recovery" else None)
            self.out.line(text, style=style)

    @staticmethod
    def describe(e: dict[str, Any]) -> str | None:
        story = e.get("story", "")
        name = e.get("event", "")
        phase = e.get("phase", "")
        if name == "story_started":
            return f"[{story}] starting"
        if name == "phase_started":
            return f"[{story}] {phase} · attempt {e.get('attempt', 1)}"
        if name in ("phase_completed", "phase_passed"):
            return f"[{story}] {phase} ✓"
        if name == "phase_failed":
            return f"[{story}] {phase} ✗ verification failed"
        if name.startswith("phase_"):
            return f"[{story}] {phase}: {name.removeprefix('phase_').upper()}"
        if name == "verification_finished":
            return f"[{story}] verification {'passed' if e.get('passed') else 'failed'}"
        if name == "recovery":
            kind = str(e.get("recovery_kind", "")).replace("_", " ")
            extra = ""
            if e.get("delay") is not None:
                extra = f", waiting {float(e['delay']):.1f}s"
            reason = f": {e['reason']}" if e.get("reason") else ""
            return f"[{story}] recovery {e.get('total')}/{e.get('limit')} ({kind}{extra}){reason}"
        if name == "story_finished":
            return f"[{story}] {e.get('outcome')} in {e.get('elapsed', 0):.1f}s"
        if name == "tool_call":
            return f"[{story}]   {phase} tool {e.get('tool', '')}"
        return None
