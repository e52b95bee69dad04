"""Why the judge failed an attempt, worded for the agent's next prompt, the review and the
story's record: the base's tests weakened, test configuration added, a held file changed; and
the failed verdict that carries the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.verify import held
from ai_sdlc.verify.commands import VerificationResult
from ai_sdlc.verify.failures import failing_tests, failure_reason
from ai_sdlc.verify.normalise import failure_signature, normalise_failure


def first_line(text: str) -> str:
    """The first line with something on it."""
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")


def _detail(again: VerificationResult) -> str:
    output = again.failure_output
    return again.reason or failure_reason(output) or first_line(output)


def weakened(files: list[str], again: VerificationResult) -> str:
    """'tests/test_mul.py: the story's change removes or weakens test_mul (…)'."""
    names = list(again.failing) or failing_tests(again.failure_output)
    detail = (
        again.reason or failure_reason(again.failure_output) or first_line(again.failure_output)
    )
    by_file: dict[str, list[str]] = {}
    for name in names:
        file, _, test = name.partition("::")
        if file in files:
            by_file.setdefault(file, []).append(test or Path(file).name)
    if by_file:
        file, tests = next(iter(by_file.items()))
        shown = ", ".join(tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")
        return f"{file}: the story's change removes or weakens {shown} (base version: {detail})"
    listed = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return (
        f"{listed}: the story's change removes or weakens these tests; their base version "
        f"fails against it: {detail}"
    )


def added(config: list[str], again: VerificationResult) -> str:
    """'conftest.py: the story's change adds test configuration; without it …'."""
    detail = (
        again.reason or failure_reason(again.failure_output) or first_line(again.failure_output)
    )
    listed = ", ".join(config[:3]) + (f" and {len(config) - 3} more" if len(config) > 3 else "")
    return (
        f"{listed}: the story's change adds test configuration; without it the base's tests "
        f"fail against the change: {detail}"
    )


def held_reason(found: list[tuple[str, str]]) -> str:
    """'package.json scripts.test: the story's change edits what decides the verdict …'."""
    listed = "; ".join(held.describe(h) for h in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return (
        f"{listed}{more}: the story's change edits what decides the verdict, held as it was at "
        "the base (put it back; a story that must change it sets allow_test_changes: true)"
    )


def failed(
    verdict: VerificationResult,
    reason: str,
    judged: dict[str, Any],
    again: VerificationResult | None = None,
    *,
    kept: bool = False,
) -> VerificationResult:
    """`kept`: the verdict's own failure output follows the reason."""
    output = f"[ai-sdlc] {reason}\n"
    if kept:
        output += "\nThe verification's own output:\n" + verdict.failure_output
    if again is not None:
        output += "\nThe base's version of the changed tests, run against this change:\n"
        output += again.failure_output
    normalised = normalise_failure(output)
    return msgspec.structs.replace(
        verdict,
        passed=False,
        failure_output=output,
        normalised_failure=normalised,
        signature=failure_signature(normalised),
        reason=reason,
        judged={**judged, "failed": reason},
    )
