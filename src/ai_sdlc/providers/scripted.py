"""The `scripted` provider: the embedded, deterministic, offline default (no AI involved).

It exists so the product demo and the end-to-end tests run without network or keys, and so
every guardrail path (faults, rejections, "changed nothing") can be driven on purpose through
`<project>/.ai-sdlc/scripted.yaml` (format and validation in `scripted_rules`).

Output convention (what the lead's agents parse):

- The text always carries the stamp line ``_Produced by the scripted provider (no AI)._``
  (in the text before the decision line when there is one, else in the feedback).
- review/refine answers follow `ai_sdlc.providers.decision`: ``<text>`` then a line
  ``DECISION: <X>`` then the feedback. For refine, the text before the decision line is the
  refined story body: by default ``request.context["story_body"]`` unchanged (plus the stamp,
  once); without that key it is empty, which tells the runner to keep the story's own body.
- A matching rule replaces the defaults piece by piece: ``respond`` replaces the text,
  ``files`` replaces the default workspace change (a rule without ``files`` changes nothing:
  the runner fails that implement attempt as one that did no work),
  ``decision``/``feedback`` replace the default decision (a review/refine rule without
  ``decision`` writes no DECISION line: asked again, then counted), ``fault`` raises instead
  of answering.

Defaults without a matching rule:

- refine: APPROVED, body kept (see above).
- research / plan: short deterministic notes / plan.
- implement / rework: appends one line ``- <story> <phase> attempt <n>`` to the story's own
  ``scripted-changes/<story>.md`` (created with a header), so every attempt is a real, visible,
  deterministic change; reports it in `files_changed`. A file per story: the changes of two
  stories never conflict, so a story stacked on two unmerged dependencies merges both.
- review: APPROVED when no verification is configured (saying so) or when
  ``context["verification_passed"]`` is true; RECOVERY when
  ``context["workspace_changed"]`` is False; otherwise REJECTED quoting the first lines of
  ``context["verification_output"]``.

Usage is a deterministic estimate (characters // 4 in and out, cost None) so usage accounting
can be tested offline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ai_sdlc.providers.base import (
    Access,
    Phase,
    Provider,
    ProviderAuthError,
    ProviderRequest,
    ProviderRequestError,
    ProviderResult,
    ProviderStatus,
    TransientProviderError,
    Usage,
)
from ai_sdlc.providers.decision import APPROVED, RECOVERY, REJECTED, format_decision
from ai_sdlc.providers.pricing import max_output
from ai_sdlc.providers.scripted_rules import (
    Fault,
    Rule,
    RuleSet,
    load_rules,
)
from ai_sdlc.providers.scripted_usage import ServedCounts
from ai_sdlc.wording import count

STAMP = "scripted provider (no AI)"
STAMP_LINE = f"_Produced by the {STAMP}._"
RULES_FILE = Path(".ai-sdlc") / "scripted.yaml"
USAGE_FILE = Path(".ai-sdlc") / "state" / "scripted-usage.json"
CHANGES_FOLDER = "scripted-changes"
CHANGES_HEADER = f"# Changes made by the {STAMP}\n\n"


def changes_file(story_id: str) -> str:
    """The file (relative to the workspace) where the default implement records a story's
    attempts: one per story."""
    return f"{CHANGES_FOLDER}/{story_id}.md"


#: How many lines of failing verification output the default review quotes.
QUOTED_OUTPUT_LINES = 20

_FAULT_STATUS = {"rate_limit": 429, "overloaded": 529, "server": 500}


class ScriptedProvider(Provider):
    name: ClassVar[str] = "scripted"
    simulated: ClassVar[bool] = True

    def __init__(
        self,
        project_root: Path,
        settings: Mapping[str, Any] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.project_root = project_root
        self.settings = dict(settings or {})
        self.rule_set: RuleSet = load_rules(project_root / RULES_FILE)
        self.counts = ServedCounts(project_root / USAGE_FILE, self.rule_set.digest)
        self._clock = clock

    def status(self) -> ProviderStatus:
        rules = count(len(self.rule_set.rules), "rule")
        where = f"{rules} from {RULES_FILE}" if self.rule_set.digest else "default answers"
        return ProviderStatus(self.name, True, f"built in, offline, no AI ({where})")

    def execute(self, request: ProviderRequest) -> ProviderResult:
        started = self._clock()
        result = request.guard(lambda: self._answer(request))
        result.duration = max(0.0, self._clock() - started)
        return result

    # --- one call (inside the guard, so faults are retried and counted by the runner) -------

    def _answer(self, request: ProviderRequest) -> ProviderResult:
        if self.rule_set.delay:
            time.sleep(self.rule_set.delay)  # injected latency (`delay:` in the rules file)
        rule = self.counts.select(self.rule_set.rules, request)
        if rule is None:
            self._emit(request, "scripted_default", {"phase": request.phase.value})
            text, changed = self._default(request)
        else:
            self._emit(request, "scripted_rule", {"rule": rule.number, "line": rule.line})
            text, changed = self._apply(rule, request)
        prompt_chars = len(request.system_prompt) + len(request.prompt)
        # Like an API's max_tokens, `ai.max_output_tokens` bounds what one answer counts (the
        # runner's budget check before a call relies on that bound).
        answered = min(len(text) // 4, max_output(self.settings))
        usage = Usage(input_tokens=prompt_chars // 4, output_tokens=answered)
        return ProviderResult(text=text, usage=usage, files_changed=changed)

    def _apply(self, rule: Rule, request: ProviderRequest) -> tuple[str, list[str]]:
        if rule.fault is not None:
            raise _fault_error(rule.fault, rule)
        changed: list[str] = []
        if rule.files is not None:
            _require_edit(request, f"rule {rule.number} of {RULES_FILE} writes files")
            for relative, content in rule.files:
                write_confined(request.workspace, relative, content)
                self._emit(request, "file_written", {"path": relative})
                changed.append(relative)
        body = rule.respond if rule.respond is not None else self._default_text(request)
        if rule.decision is None:
            return _compose(body, None, ""), changed
        feedback = rule.feedback or f"Decided by scripted rule {rule.number}."
        return _compose(body, rule.decision, feedback), changed

    # --- defaults -------------------------------------------------------------------------

    def _default(self, request: ProviderRequest) -> tuple[str, list[str]]:
        phase = request.phase
        if phase in (Phase.IMPLEMENT, Phase.REWORK):
            target = changes_file(request.story_id)
            _require_edit(request, f"the {STAMP} implements by writing {target}")
            self._append_change(request, target)
            self._emit(request, "file_written", {"path": target})
            return _compose(self._default_text(request), None, ""), [target]
        text = self._default_text(request)
        if phase is Phase.REFINE:
            feedback = "The story is ready as written: refined by the scripted provider."
            return _compose(text, APPROVED, feedback), []
        if phase is Phase.REVIEW:
            decision, feedback = _default_review(request.context)
            return _compose(text, decision, feedback), []
        return _compose(text, None, ""), []

    def _default_text(self, request: ProviderRequest) -> str:
        story = request.story_id
        phase = request.phase
        if phase is Phase.REFINE:
            body = request.context.get("story_body")
            # No body given: an empty refined body tells the runner to keep the story's own.
            return body.strip() if isinstance(body, str) else ""
        if phase is Phase.RESEARCH:
            return (
                f"# Research notes for {story}\n\n"
                "- No code was read: these notes come from the scripted provider.\n"
                f"- The implementation will record each attempt in {changes_file(story)}.\n"
                "- Verification runs the project's configured commands."
            )
        if phase is Phase.PLAN:
            return (
                f"# Implementation plan for {story}\n\n"
                f"1. Append one line per implementation attempt to {changes_file(story)}.\n"
                "2. Run the configured verification commands.\n"
                "3. Review the result and fix what verification reports."
            )
        if phase in (Phase.IMPLEMENT, Phase.REWORK):
            return (
                f"{phase.value.capitalize()} of {story} (attempt {request.attempt}): "
                f"appended one line to {changes_file(story)}."
            )
        return f"Review of {story} (attempt {request.attempt})."

    def _append_change(self, request: ProviderRequest, relative: str) -> None:
        target = resolve_confined(request.workspace, relative)
        existing = target.read_text(encoding="utf-8") if target.is_file() else CHANGES_HEADER
        if existing and not existing.endswith("\n"):
            existing += "\n"
        line = f"- {request.story_id} {request.phase.value} attempt {request.attempt}\n"
        write_confined(request.workspace, relative, existing + line)

    @staticmethod
    def _emit(request: ProviderRequest, name: str, data: dict[str, Any]) -> None:
        if request.on_event is not None:
            request.on_event(name, data)


def _stamped(text: str) -> str:
    text = text.strip()
    if STAMP in text:
        return text
    return f"{text}\n\n{STAMP_LINE}" if text else STAMP_LINE


def _compose(before: str, decision: str | None, feedback: str) -> str:
    """The answer text, stamped once: in the text before the decision when there is one (so a
    refined body carries it), else in the feedback (so an empty body stays empty)."""
    if decision is None:
        return _stamped(before) + "\n"
    if before.strip():
        return format_decision(decision, feedback, before=_stamped(before))
    return format_decision(decision, _stamped(feedback))


def _default_review(context: Mapping[str, Any]) -> tuple[str, str]:
    if context.get("verification_configured") is False:
        return APPROVED, (
            "No verification is configured, so nothing was built or tested; accepted on "
            "reading the change alone."
        )
    if context.get("verification_passed") is True:
        return APPROVED, "Verification passed; the change is accepted."
    if context.get("workspace_changed") is False:
        return RECOVERY, "The implementation changed nothing in the workspace; implement it again."
    output = str(context.get("verification_output") or "").strip()
    if not output:
        return REJECTED, "Verification did not pass (no output was captured); fix the failure."
    lines = output.splitlines()
    quoted = "\n".join(f"> {line}" for line in lines[:QUOTED_OUTPUT_LINES])
    more = len(lines) - QUOTED_OUTPUT_LINES
    suffix = f"\n> ... ({more} more lines)" if more > 0 else ""
    return REJECTED, f"Verification failed; fix this:\n{quoted}{suffix}"


def _require_edit(request: ProviderRequest, what: str) -> None:
    if request.access is not Access.EDIT:
        raise ProviderRequestError(
            f"{what}, but the {request.phase.value} phase is read-only",
            hint="only implement and rework rules may write files",
        )


def _fault_error(fault: Fault, rule: Rule) -> Exception:
    message = fault.message or f"scripted fault {fault.kind!r} (rule {rule.number})"
    if fault.kind == "auth":
        return ProviderAuthError(message, status=401)
    return TransientProviderError(
        message,
        kind=fault.kind,
        retry_after=fault.retry_after,
        status=_FAULT_STATUS.get(fault.kind),
    )


def resolve_confined(workspace: Path, relative: str) -> Path:
    """The real path of `relative` below `workspace`; refuses absolute paths, `..` and symlinks
    that lead outside (a rule must never write anywhere but the workspace)."""
    from ai_sdlc.providers.paths import PathRefused, confine

    try:
        return confine(workspace, relative, write=True)  # the check every provider shares
    except PathRefused as exc:
        raise ProviderRequestError(
            f"refusing to write: {exc}",
            hint="rules write only the project's own files (not .git/ or .ai-sdlc/), "
            "inside the workspace",
        ) from None


def write_confined(workspace: Path, relative: str, content: str) -> Path:
    """Write `content` to `relative` below `workspace` (parents created), confined as above.

    Rewriting a Python file also drops its bytecode cache: a scripted attempt follows the
    previous one within milliseconds (a real agent takes seconds), and Python validates a cached
    `.pyc` by the source's whole-second mtime and size, so a same-size rewrite within the same
    second would run the previous attempt's code."""
    target = resolve_confined(workspace, relative)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        if target.suffix == ".py":
            for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
                stale.unlink(missing_ok=True)
    except OSError as exc:
        raise ProviderRequestError(f"cannot write {relative!r} in the workspace: {exc}") from exc
    return target
