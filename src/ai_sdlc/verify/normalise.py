"""Failure text made comparable (`normalise_failure`) and prompt-sized (`summarise_failure`).

The runner blocks a story when two attempts fail "the same way"; two runs of one failure differ
in timings, temp paths, addresses, pids and dates, so those are replaced by placeholders while
the meaningful lines (assertion messages, file:line) are kept verbatim.
"""

from __future__ import annotations

import functools
import hashlib
import re

_ANSI_SOURCE = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)(?:day|sday|nesday|rsday|urday)?"
_UNITS = (
    r"(?:ms|us|µs|ns|s|sec|secs|seconds?|milliseconds?|microseconds?|nanoseconds?|"
    r"mins?|minutes?)"
)

#: (pattern, replacement), applied in order: the wider shapes first (a timestamp before its
#: date and time parts, a temp path before the tmpXXXX names inside it).
_RULE_SOURCES: tuple[tuple[str, str], ...] = (
    (
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
        "<TIMESTAMP>",
    ),
    (r"\b\d{4}[-/]\d{2}[-/]\d{2}\b", "<DATE>"),
    (rf"\b(?:{_WEEKDAY},?\s+)?{_MONTH}\s+\d{{1,2}}\b(?:,?\s+\d{{4}}\b)?", "<DATE>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<TIME>"),
    (
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        "<UUID>",
    ),
    (r"\b0x[0-9a-fA-F]{6,}\b", "0x<ADDR>"),
    (r"pytest-of-[^/\\\s]+", "pytest-of-<USER>"),
    (r"\bpytest-\d+\b", "pytest-<N>"),
    (r"\bpopen-gw\d+\b", "popen-gw<N>"),
    # The first folder below a temp root is almost always random (mkdtemp, pytest-of-<user>).
    (
        r"(?<![\w./-])(?:/private)?/var/folders/[^/\s]+/[^/\s]+/T/[^/\s:'\"()\[\],]+",
        "<TMP>",
    ),
    (r"(?<![\w./-])(?:/private)?(?:/var)?/tmp/[^/\s:'\"()\[\],]+", "<TMP>"),
    (r"\btmp[a-z0-9_]{8}(?![a-z0-9_])", "tmp<X>"),
    (r"(?i)\b(pid|process|thread)(\s*[=:#]?\s*)\d+", r"\1\2<PID>"),
    (r"(?m)^(\S+?)\[\d+\]:", r"\1[<PID>]:"),
    (r"(?i)\b(seed\s*[=:(]?\s*)\d+", r"\1<SEED>"),
    (rf"(?<![\w.])\d+(?:\.\d+)?\s?{_UNITS}(?![\w])", "<DURATION>"),
)


@functools.cache
def _rules() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Compiled on first use: only a failed verification needs them (compiling costs ~10 ms
    of every command's start-up)."""
    return tuple((re.compile(source), replacement) for source, replacement in _RULE_SOURCES)


def strip_ansi(text: str) -> str:
    return re.sub(_ANSI_SOURCE, "", text)


def _clean_lines(text: str) -> list[str]:
    """ANSI codes out, CR/CRLF as newlines, trailing whitespace off, blank runs squeezed."""
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n")
    lines: list[str] = []
    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line and (not lines or not lines[-1]):
            continue
        lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def normalise_failure(text: str) -> str:
    """`text` with run-to-run noise replaced by placeholders (stable across identical failures)."""
    normalised = "\n".join(_clean_lines(text))
    for pattern, replacement in _rules():
        normalised = pattern.sub(replacement, normalised)
    return normalised


def failure_signature(normalised: str) -> str:
    """A short stable hash of a normalised failure ("" for no failure)."""
    if not normalised:
        return ""
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]


def _dedupe_consecutive(lines: list[str]) -> list[str]:
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        run = 1
        while index + run < len(lines) and lines[index + run] == line:
            run += 1
        out.append(line)
        if run > 1 and line:
            out.append(f"[previous line repeated {run - 1} more times]")
        index += run
    return out


def summarise_failure(text: str, limit: int = 4000) -> str:
    """At most `limit` characters of failure output for a prompt: cleaned, repeated lines
    collapsed, and when still too long the head (first errors) and tail (summary) kept."""
    if limit <= 0:
        return ""
    summary = "\n".join(_dedupe_consecutive(_clean_lines(text)))
    if len(summary) <= limit:
        return summary
    marker_room = 48
    if limit < marker_room * 2:
        return summary[:limit]
    budget = limit - marker_room
    head = summary[: budget * 2 // 5]
    tail = summary[len(summary) - (budget - len(head)) :]
    if "\n" in head[1:]:
        head = head[: head.rindex("\n")]
    if "\n" in tail[:-1]:
        tail = tail[tail.index("\n") + 1 :]
    middle = summary[len(head) : len(summary) - len(tail)]
    omitted = middle.strip("\n").count("\n") + 1
    result = f"{head}\n[... {omitted} lines omitted ...]\n{tail}"
    return result[:limit]
