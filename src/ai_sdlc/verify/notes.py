"""What the review prompt and the run report are told about the tests: the passing change's
counts against the base's, the story's opt-out of protected tests, the files the change adds
that run inside the test process, the held files it changed (`held`), the test diff."""

from __future__ import annotations

from typing import Any


def note_on_tests(context: dict[str, Any]) -> str:
    """The counts, the story's opt-out of protected tests, and the test diff, for the review."""
    parts: list[str] = []
    counts, base = context.get("test_counts"), context.get("base_test_counts")
    if isinstance(counts, dict):
        line = f"Tests: {counts_text(counts)}"
        if isinstance(base, dict):
            line += f" (at the story's base: {counts_text(base)})"
        parts.append(line + ".")
    if context.get("allow_test_changes"):
        parts.append(
            "This story allows test changes (allow_test_changes: true): the base's tests were "
            "NOT re-run against it. Check that every test change below is what the story asks "
            "for, not a test weakened to pass."
        )
    startup = [str(f) for f in context.get("startup_files") or ()]
    if startup:
        parts.append(
            "Files this change adds that Python runs at interpreter start, inside the test "
            f"process: {', '.join(startup)}. The base's tests passed without them; check that "
            "they do only what the story needs (they could change how tests run or report)."
        )
    held = [str(f) for f in context.get("held_changed") or ()]
    if held:
        parts.append(
            "What decides the verdict, which this change edits (held as it was at the base; "
            f"the story allows it): {', '.join(held)}. Check that each is what the story asks "
            "for, not the test run made to pass."
        )
    diff = str(context.get("tests_diff") or "").strip()
    if diff:
        parts.append(f"Test changes against the story's base:\n{diff}")
    return "".join(f"\n\n{part}" for part in parts)


def record_of_tests(context: dict[str, Any]) -> dict[str, Any]:
    """For the approved review's event (the run report's `tests`): the counts, the base's, the
    opt-out and the files of the test diff."""
    if "test_counts" not in context:
        return {}
    diff = str(context.get("tests_diff") or "")
    stat = diff.split("\ndiff --git", 1)[0].strip() if diff else ""
    return {
        "tests": {
            "counts": context.get("test_counts"),
            "base_counts": context.get("base_test_counts"),
            "allow_test_changes": bool(context.get("allow_test_changes")),
            "held_changed": list(context.get("held_changed") or ()),
            "diff_stat": stat,
        }
    }


def counts_text(counts: dict[str, Any]) -> str:
    return (
        f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
        f"{counts.get('skipped', 0)} skipped"
    )
