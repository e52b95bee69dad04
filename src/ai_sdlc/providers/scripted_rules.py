"""The scripted provider's rules file (`.ai-sdlc/scripted.yaml`): validation and matching.

Validation happens once, when the provider is built, so a typo in a rule fails the run at
start with the file, rule number, line and fix instead of surprising a test halfway through.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.providers.base import TRANSIENT_KINDS, Phase, ProviderRequest
from ai_sdlc.providers.decision import REFINE_DECISIONS, REVIEW_DECISIONS

FAULT_KINDS: tuple[str, ...] = (*TRANSIENT_KINDS, "auth")
DECISIONS_BY_PHASE: dict[Phase, tuple[str, ...]] = {
    Phase.REVIEW: REVIEW_DECISIONS,
    Phase.REFINE: REFINE_DECISIONS,
}
MATCH_KEYS = ("phase", "story", "attempt", "times")
ACTION_KEYS = ("respond", "files", "decision", "feedback", "fault")
RULE_KEYS = MATCH_KEYS + ACTION_KEYS
FAULT_KEYS = ("kind", "retry_after", "message")
_PHASES = tuple(p.value for p in Phase)


class Fault(msgspec.Struct, frozen=True):
    kind: str
    retry_after: float | None = None
    message: str | None = None


class Rule(msgspec.Struct, frozen=True):
    """One rule: when it matches (phase/story/attempt, `times` budget) and what the agent does."""

    number: int
    line: int
    phase: Phase
    story: str | None = None
    attempt: int | None = None
    times: int | None = None
    respond: str | None = None
    #: (relative path, content) pairs; None when the rule writes no file.
    files: tuple[tuple[str, str], ...] | None = None
    decision: str | None = None
    feedback: str | None = None
    fault: Fault | None = None

    def matches(self, request: ProviderRequest) -> bool:
        """True when phase, story and attempt fit (the `times` budget is checked elsewhere)."""
        return (
            self.phase == request.phase
            and (self.story is None or self.story == request.story_id)
            and (self.attempt is None or self.attempt == request.attempt)
        )


class RuleSet(msgspec.Struct, frozen=True):
    path: Path
    #: sha256 of the file's bytes (None when there is no file): served counts are keyed by it.
    digest: str | None
    rules: tuple[Rule, ...]
    #: Seconds every call takes (top-level `delay: 1`): injected agent latency for benchmarks.
    delay: float = 0.0


def load_rules(path: Path) -> RuleSet:
    """Read and validate the rules file; a missing file means no rules (all defaults)."""
    from ai_sdlc import untrusted

    try:
        raw = untrusted.read_regular(path)  # no symlink, FIFO or device: never a hang
    except FileNotFoundError:
        return RuleSet(path, None, ())
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            "the scripted rules file is not UTF-8 text", path=str(path), hint="save it as UTF-8"
        ) from exc
    untrusted.check_yaml(text, str(path))  # size, depth and alias-expansion limits
    document = _parse_yaml(text, path)
    parser = _RulesParser(path)
    rules = parser.parse_document(document)
    return RuleSet(path, hashlib.sha256(raw).hexdigest(), rules, parser.parse_delay(document))


def _parse_yaml(text: str, path: Path) -> Any:
    # ruamel (~10 ms to import) only when a project has a rules file
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise InvalidInputError(
            f"invalid YAML in the scripted rules: {problem}",
            path=str(path),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            hint="each key may appear only once per rule"
            if "duplicate key" in str(problem)
            else "quote values that contain ': ' or start with a special character, "
            "and indent each rule's keys under its '- '",
        ) from exc
    except YAMLError as exc:
        raise InvalidInputError(
            f"invalid YAML in the scripted rules: {exc}", path=str(path)
        ) from exc


def _line_of_key(mapping: Any, key: str, default: int) -> int:
    try:
        return int(mapping.lc.key(key)[0]) + 1
    except (AttributeError, KeyError, TypeError):
        return default


def _line_of_item(sequence: Any, index: int, default: int) -> int:
    try:
        return int(sequence.lc.item(index)[0]) + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return default


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _suggest(word: object, choices: tuple[str, ...]) -> str:
    import difflib  # only for a misspelt name

    close = difflib.get_close_matches(str(word), choices, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


class _RulesParser:
    """Turns the loaded YAML into `Rule`s, raising precise errors on the first problem."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, message: str, line: int | None, hint: str) -> InvalidInputError:
        return InvalidInputError(message, path=str(self.path), line=line, hint=hint)

    def parse_document(self, document: Any) -> tuple[Rule, ...]:
        shape_hint = "the file must look like 'rules:' followed by a list of '- phase: ...' items"
        if not isinstance(document, Mapping):
            raise self.error("expected a mapping with a 'rules' list", 1, shape_hint)
        for key in document:
            if key not in ("rules", "delay"):
                raise self.error(
                    f"unknown top-level key {key!r}",
                    _line_of_key(document, str(key), 1),
                    f"{_suggest(key, ('rules', 'delay'))}only 'rules' and 'delay' are allowed "
                    "at the top level",
                )
        rules = document.get("rules")
        if not isinstance(rules, list):
            raise self.error(
                "'rules' must be a list", _line_of_key(document, "rules", 1), shape_hint
            )
        top = _line_of_key(document, "rules", 1)
        return tuple(
            self.parse_rule(item, index + 1, _line_of_item(rules, index, top))
            for index, item in enumerate(rules)
        )

    def parse_delay(self, document: Any) -> float:
        """`delay: <seconds>`: how long every call takes (0 to 60)."""
        value = document.get("delay", 0)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 60
        if not ok:
            raise self.error(
                f"'delay' must be a number of seconds between 0 and 60, not {value!r}",
                _line_of_key(document, "delay", 1),
                "e.g. delay: 1 (every agent call then takes one second)",
            )
        return float(value)

    def parse_rule(self, item: Any, number: int, line: int) -> Rule:
        where = f"rule {number}"
        if not isinstance(item, Mapping):
            raise self.error(
                f"{where} is not a mapping", line, "write each rule as '- phase: <phase>' + keys"
            )
        for key in item:
            if key not in RULE_KEYS:
                raise self.error(
                    f"{where}: unknown key {key!r}",
                    _line_of_key(item, str(key), line),
                    f"{_suggest(key, RULE_KEYS)}allowed keys: {', '.join(RULE_KEYS)}",
                )

        def key_line(key: str) -> int:
            return _line_of_key(item, key, line)

        phase = self.parse_phase(item, where, line, key_line)
        story = item.get("story")
        if story is not None and (not isinstance(story, str) or not story.strip()):
            raise self.error(
                f"{where}: 'story' must be a story id", key_line("story"), "e.g. story: S-0002"
            )
        attempt = self.positive_int(item, "attempt", where, key_line)
        times = self.positive_int(item, "times", where, key_line)
        respond = self.optional_text(item, "respond", where, key_line)
        feedback = self.optional_text(item, "feedback", where, key_line)
        files = self.parse_files(item.get("files"), where, key_line) if "files" in item else None
        decision = self.parse_decision(item, phase, where, key_line)
        fault = self.parse_fault(item["fault"], where, key_line) if "fault" in item else None

        if not any(key in item for key in ACTION_KEYS):
            raise self.error(
                f"{where} says when but not what to do",
                line,
                f"add at least one of: {', '.join(ACTION_KEYS)}",
            )
        if feedback is not None and decision is None:
            raise self.error(
                f"{where}: 'feedback' needs a 'decision'",
                key_line("feedback"),
                "add e.g. 'decision: REJECTED', or put the text in 'respond'",
            )
        if fault is not None and any(k in item for k in ACTION_KEYS if k != "fault"):
            raise self.error(
                f"{where}: 'fault' raises instead of answering, so it cannot be combined with "
                "respond/files/decision/feedback",
                key_line("fault"),
                "split it into two rules, the fault one with 'times: N'",
            )
        return Rule(
            number=number,
            line=line,
            phase=phase,
            story=story.strip() if isinstance(story, str) else None,
            attempt=attempt,
            times=times,
            respond=respond,
            files=files,
            decision=decision,
            feedback=feedback,
            fault=fault,
        )

    def parse_phase(
        self, item: Any, where: str, line: int, key_line: Callable[[str], int]
    ) -> Phase:
        if "phase" not in item:
            raise self.error(
                f"{where} has no 'phase'", line, f"add 'phase: <one of {', '.join(_PHASES)}>'"
            )
        value = item["phase"]
        if not isinstance(value, str) or value.strip().lower() not in _PHASES:
            raise self.error(
                f"{where}: unknown phase {value!r}",
                key_line("phase"),
                f"{_suggest(value, _PHASES)}use one of: {', '.join(_PHASES)}",
            )
        return Phase(value.strip().lower())

    def positive_int(
        self, item: Any, key: str, where: str, key_line: Callable[[str], int]
    ) -> int | None:
        value = item.get(key)
        if value is None and key not in item:
            return None
        if not _is_int(value) or value < 1:
            raise self.error(
                f"{where}: '{key}' must be a whole number >= 1, not {value!r}",
                key_line(key),
                f"e.g. {key}: 2",
            )
        return int(value)

    def optional_text(
        self, item: Any, key: str, where: str, key_line: Callable[[str], int]
    ) -> str | None:
        if key not in item:
            return None
        value = item[key]
        if not isinstance(value, str):
            raise self.error(
                f"{where}: '{key}' must be text, not {type(value).__name__}",
                key_line(key),
                "quote the value, or use a '|' block for several lines",
            )
        return str(value)

    def parse_files(
        self, value: Any, where: str, key_line: Callable[[str], int]
    ) -> tuple[tuple[str, str], ...]:
        line = key_line("files")
        if not isinstance(value, Mapping):
            raise self.error(
                f"{where}: 'files' must map relative paths to contents",
                line,
                "e.g. files: {src/app.py: 'print(1)'}",
            )
        pairs: list[tuple[str, str]] = []
        for raw_path, content in value.items():
            path_line = _line_of_key(value, str(raw_path), line)
            if not isinstance(raw_path, str) or not isinstance(content, str):
                raise self.error(
                    f"{where}: each 'files' entry must be 'path: text', got "
                    f"{raw_path!r}: {type(content).__name__}",
                    path_line,
                    "quote both the path and the content",
                )
            problem = unsafe_relative_path(raw_path)
            if problem:
                raise self.error(
                    f"{where}: file path {raw_path!r} {problem}",
                    path_line,
                    "use a path relative to the workspace, inside it, e.g. src/module.py",
                )
            pairs.append((raw_path, str(content)))
        return tuple(pairs)

    def parse_decision(
        self, item: Any, phase: Phase, where: str, key_line: Callable[[str], int]
    ) -> str | None:
        if "decision" not in item:
            return None
        allowed = DECISIONS_BY_PHASE.get(phase)
        value = item["decision"]
        if allowed is None:
            raise self.error(
                f"{where}: a {phase.value} phase makes no decision",
                key_line("decision"),
                "only review and refine rules take 'decision'",
            )
        if not isinstance(value, str) or value.strip().upper() not in allowed:
            raise self.error(
                f"{where}: {value!r} is not a {phase.value} decision",
                key_line("decision"),
                f"use one of: {', '.join(allowed)}",
            )
        return value.strip().upper()

    def parse_fault(self, value: Any, where: str, key_line: Callable[[str], int]) -> Fault:
        line = key_line("fault")
        hint = "e.g. fault: {kind: rate_limit, retry_after: 2}"
        if not isinstance(value, Mapping):
            raise self.error(f"{where}: 'fault' must be a mapping", line, hint)
        for key in value:
            if key not in FAULT_KEYS:
                raise self.error(
                    f"{where}: unknown fault key {key!r}",
                    _line_of_key(value, str(key), line),
                    f"{_suggest(key, FAULT_KEYS)}allowed keys: {', '.join(FAULT_KEYS)}",
                )
        kind = value.get("kind")
        if not isinstance(kind, str) or kind not in FAULT_KINDS:
            raise self.error(
                f"{where}: unknown fault kind {kind!r}",
                _line_of_key(value, "kind", line),
                f"{_suggest(kind, FAULT_KINDS)}use one of: {', '.join(FAULT_KINDS)}",
            )
        retry_after = value.get("retry_after")
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, int | float)
            or retry_after < 0
        ):
            raise self.error(
                f"{where}: 'retry_after' must be a number of seconds >= 0, not {retry_after!r}",
                _line_of_key(value, "retry_after", line),
                "e.g. retry_after: 2",
            )
        message = value.get("message")
        if message is not None and not isinstance(message, str):
            raise self.error(
                f"{where}: fault 'message' must be text",
                _line_of_key(value, "message", line),
                "quote it",
            )
        return Fault(
            kind=kind,
            retry_after=float(retry_after) if retry_after is not None else None,
            message=str(message) if message is not None else None,
        )


def unsafe_relative_path(raw: str) -> str | None:
    """Why `raw` may not be written below a workspace, or None when it is a plain relative path
    (the shared confinement rules of `paths.path_problem`: no `..`, no absolute path, nothing
    in `.git/` or `.ai-sdlc/` in any letter case). Symlink escapes can only be seen against a
    real folder; the writer checks those with `paths.confine`."""
    from ai_sdlc.providers.paths import path_problem

    return path_problem(raw, write=True)
