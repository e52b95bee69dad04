"""The `claude` provider: Claude Code in headless mode (`claude -p --output-format stream-json`).

Claude Code runs its own agent loop and retries API errors by itself; those retries must not be
invisible. Each `system`/`api_retry` event it prints is reported through
`request.on_backend_retry(delay, reason)`, which counts it as an `api_retry` recovery and
raises `StoryBlockedError` at the global limit — then we kill the process group and let it
propagate. The phase's access becomes Claude Code's tool set: read-only phases get
Read/Glob/Grep only, edit phases add Write/Edit/NotebookEdit with `acceptEdits`; Bash only for
commands in `ai.tools.allow_commands`. Only names Claude Code 2.1 knows are passed (it dropped
`LS` and `MultiEdit`, and drops an unknown `--tools` name silently). Claude Code prints one
`assistant` event per content block, so turns and `agent_turn` events are counted per message
id; the phase's usage is the `result` event's own report. A read-only phase that still
changed files fails with `AccessViolationError`. The prompt goes through stdin, never a shell
or an argument. A `result` event that reports an error (`is_error`) not classified as an
outage, or an edit phase in which Claude Code was denied tool calls (`permission_denials`: it
may still say "success"), raises `AgentReportedError`: the runner counts a failed attempt.

One file on purpose (about 520 lines): starting the session, reading its event stream and
the failure checks all work on one running process's `_Outcome`; apart, they would pass that
state between modules.

Settings:
    ai.claude.binary       executable (default: `claude` on PATH, else the one bundled with
                           the claude-agent-sdk extra)
    ai.claude.model        model (else AI_SDLC_MODEL / ai.model; unset: Claude Code's default)
    ai.claude.max_retries  sets CLAUDE_CODE_MAX_RETRIES for the CLI (its internal retries)
    ai.claude.extra_args   extra argument list appended to the command line
    ai.max_turns, ai.timeouts.<phase>, ai.tools.allow_commands, ai.prices.<model>
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

from ai_sdlc import install_command
from ai_sdlc.git.staging import agent_changes
from ai_sdlc.providers.agent_loop import AgentTurnLimitError, Deadline, PhaseDeadlineReached
from ai_sdlc.providers.base import (
    Access,
    AgentReportedError,
    ConfiguredProvider,
    ProviderConfigError,
    ProviderError,
    ProviderRequest,
    ProviderResult,
    ProviderStatus,
    Usage,
)
from ai_sdlc.providers.command_presets import CLAUDE_HOSTS, api_urls
from ai_sdlc.providers.errors_map import classify_output, error_for_kind, redact
from ai_sdlc.providers.pricing import price_for, priced
from ai_sdlc.providers.selection import (
    Which,
    effective_timeout,
    find_claude,
    max_turns,
    resolve_model,
)
from ai_sdlc.providers.snapshots import changed_paths, snapshot
from ai_sdlc.providers.tools import (
    AccessViolationError,
    agent_env,
    command_policy,
    kill_process_group,
    truncate,
)
from ai_sdlc.sandbox.childenv import CLAUDE_KEYS
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.sandbox.proxy import agent_egress
from ai_sdlc.spawn import start_session
from ai_sdlc.wording import count

READ_TOOLS = ("Read", "Glob", "Grep")
EDIT_TOOLS = ("Write", "Edit", "NotebookEdit")
#: Never offered: they reach outside the workspace or spawn agents we cannot confine.
DENIED_ALWAYS = ("WebFetch", "WebSearch", "Task")
_STDERR_KEEP = 4000
_EVENT_TEXT = 500


def claude_argv(
    binary: str,
    request: ProviderRequest,
    *,
    model: str | None,
    turns: int,
    bash_prefixes: tuple[tuple[str, ...], ...],
    extra: list[str],
) -> list[str]:
    """The command line for one phase; every value is its own argument (no shell)."""
    tools = list(READ_TOOLS)
    denied = list(DENIED_ALWAYS)
    if request.access is Access.EDIT:
        tools += EDIT_TOOLS
        mode = "acceptEdits"
    else:
        denied += EDIT_TOOLS
        mode = "default"
    allowed: list[str] = []
    if bash_prefixes:
        tools.append("Bash")
        allowed = [f"Bash({' '.join(prefix)}:*)" for prefix in bash_prefixes]
    else:
        denied.append("Bash")
    argv = [
        binary,
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--max-turns",
        str(turns),
        "--permission-mode",
        mode,
        "--tools",
        ",".join(tools),
        "--disallowedTools",
        ",".join(denied),
    ]
    if allowed:
        argv += ["--allowedTools", ",".join(allowed)]
    if request.system_prompt:
        argv += ["--append-system-prompt", request.system_prompt]
    if model:
        argv += ["--model", model]
    return argv + extra


@dataclass
class _Outcome:
    """What one Claude Code session reported."""

    result: dict[str, Any] | None = None
    files: list[str] = field(default_factory=list)
    last_retry_status: int | None = None
    turns: int = 0
    #: The id of the model message the last `assistant` event belonged to.
    message_id: str | None = None


def _status_kind(status: int | None) -> str | None:
    if status is None:
        return None
    if status == 529:
        return "overloaded"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status >= 500:
        return "server"
    return None


class ClaudeProvider(ConfiguredProvider):
    name: ClassVar[str] = "claude"

    def __init__(
        self,
        project_root: Path,
        settings: Mapping[str, Any],
        *,
        environ: Mapping[str, str] | None = None,
        which: Which = shutil.which,
    ) -> None:
        super().__init__(project_root, settings, environ=environ)
        self.which = which

    def binary(self) -> str | None:
        return find_claude(self.settings, self.which)

    def status(self) -> ProviderStatus:
        binary = self.binary()
        if binary is None:
            return ProviderStatus(
                self.name,
                False,
                "no `claude` executable: install Claude Code, set ai.claude.binary, or "
                + install_command("claude", "claude-agent-sdk"),
            )
        return ProviderStatus(self.name, True, f"claude CLI at {binary}")

    def _env(self) -> dict[str, str]:
        env = dict(self.environ)
        retries = self.own.get("max_retries")
        if retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(int(retries))
        return env

    def _extra_args(self) -> list[str]:
        extra = self.own.get("extra_args") or []
        if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
            raise ProviderConfigError("ai.claude.extra_args must be a list of strings")
        return list(extra)

    def execute(self, request: ProviderRequest) -> ProviderResult:
        binary = self.binary()
        if binary is None:
            raise ProviderConfigError(
                "the claude provider needs the `claude` CLI (Claude Code)",
                hint="install Claude Code, set ai.claude.binary, or "
                + install_command("claude", "claude-agent-sdk"),
            )
        model = resolve_model(self.name, self.settings, request.model, self.environ)
        policy = command_policy(self.settings, request.phase)
        argv = claude_argv(
            binary,
            request,
            model=model,
            turns=max_turns(self.settings, request.phase),
            bash_prefixes=policy.allow if policy else (),
            extra=self._extra_args(),
        )
        deadline = Deadline(effective_timeout(request, self.settings))
        before = snapshot(request.workspace)
        self._emit(
            request,
            "agent_started",
            {"provider": self.name, "model": model, "access": request.access.value},
        )

        def one_session() -> _Outcome:
            # Each try gets the whole phase time limit: a timeout is a transient failure,
            # retried (and counted as an API retry) under the `llm` policy like any other.
            attempt = Deadline(deadline.seconds)
            try:
                return self._session(argv, request, attempt)
            except PhaseDeadlineReached:
                raise attempt.expired_error("claude") from None

        try:
            outcome = request.guard(one_session)
        except PhaseDeadlineReached:
            raise deadline.expired_error("claude") from None
        changed = self._changes(request, before, outcome)
        assert outcome.result is not None
        _refuse_denials(request, outcome.result)
        return ProviderResult(
            text=str(outcome.result.get("result") or ""),
            usage=self._usage(outcome.result, model),
            duration=deadline.elapsed(),
            files_changed=changed,
        )

    # --- one CLI session --------------------------------------------------------------------

    def _session(self, argv: list[str], request: ProviderRequest, deadline: Deadline) -> _Outcome:
        """One Claude Code session, its network through the egress proxy (`sandbox/proxy.py`)."""
        env = agent_env(self._env(), CLAUDE_KEYS, request.sandbox)
        with agent_egress(request.sandbox, api_urls(CLAUDE_HOSTS, env)) as egress:
            return self._routed(argv, request, deadline, egress.apply(env), egress.sandbox)

    def _routed(
        self,
        argv: list[str],
        request: ProviderRequest,
        deadline: Deadline,
        env: dict[str, str],
        sandbox: SandboxPolicy | None,
    ) -> _Outcome:
        lines: queue.Queue[bytes | None] = queue.Queue()
        stderr: list[bytes] = []
        threads: list[threading.Thread] = []
        outcome = _Outcome()
        try:
            proc = start_session(
                argv,
                cwd=request.workspace,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                sandbox=sandbox,
            )
        except OSError as exc:
            raise ProviderConfigError(f"cannot start claude: {exc.strerror or exc}") from None
        # Nothing between the start and this try: a Ctrl-C there would leave claude running.
        try:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            threads = [
                threading.Thread(target=_feed, args=(proc.stdin, request.prompt), daemon=True),
                threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True),
                threading.Thread(target=_drain, args=(proc.stderr, stderr), daemon=True),
            ]
            for thread in threads:
                thread.start()
            while True:
                try:
                    line = lines.get(timeout=max(deadline.left(), 0.0))
                except queue.Empty:
                    raise PhaseDeadlineReached("claude ran past the phase time limit") from None
                if line is None:
                    break
                deadline.check()  # a chatty session must not outlive the phase either
                self._handle(line, request, outcome)
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:  # stdout closed but the process lingers
                kill_process_group(proc)
        except BaseException:
            kill_process_group(proc)
            raise
        finally:
            for thread in threads:
                if thread.ident is not None:  # started
                    thread.join(timeout=1.0)
        err_text = b"".join(stderr).decode("utf-8", "replace")[-_STDERR_KEEP:]
        self._raise_on_failure(proc.returncode, outcome, err_text)
        return outcome

    def _handle(self, line: bytes, request: ProviderRequest, outcome: _Outcome) -> None:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return  # Claude Code may print plain warnings; only JSON lines are events
        if not isinstance(event, dict):
            return
        kind, subtype = event.get("type"), event.get("subtype")
        if kind == "system" and subtype == "api_retry":
            self._backend_retry(event, request, outcome)
        elif kind == "system" and subtype == "init":
            self._emit(
                request, "claude_init", {"model": event.get("model"), "tools": event.get("tools")}
            )
        elif kind == "assistant":
            self._assistant(event, request, outcome)
        elif kind == "result":
            outcome.result = event
        elif kind == "system" and subtype == "permission_denied":
            self._emit(
                request,
                "tool_denied",
                {
                    "tool": event.get("tool_name"),
                    "reason": truncate(redact(str(event.get("decision_reason") or "")), 200),
                },
            )

    def _backend_retry(
        self, event: dict[str, Any], request: ProviderRequest, out: _Outcome
    ) -> None:
        status = event.get("error_status")
        out.last_retry_status = status if isinstance(status, int) else None
        delay_ms = event.get("retry_delay_ms")
        delay = float(delay_ms) / 1000.0 if isinstance(delay_ms, int | float) else 0.0
        reason = f"claude API retry {event.get('attempt')}/{event.get('max_retries')}"
        if out.last_retry_status is not None:
            reason += f" after HTTP {out.last_retry_status}"
        if isinstance(event.get("error"), str):
            reason += f": {truncate(redact(event['error']), 200)}"
        self._emit(request, "backend_retry", {"delay": delay, "reason": reason})
        if request.on_backend_retry is not None:
            request.on_backend_retry(delay, reason)  # may raise StoryBlockedError

    def _assistant(self, event: dict[str, Any], request: ProviderRequest, out: _Outcome) -> None:
        message = event.get("message")
        if not isinstance(message, dict):
            return
        message_id = message.get("id") if isinstance(message.get("id"), str) else None
        new_message = message_id is None or message_id != out.message_id
        out.message_id = message_id
        if new_message:
            out.turns += 1
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                self._emit(
                    request,
                    "agent_text",
                    {"turn": out.turns, "text": truncate(str(block["text"]), _EVENT_TEXT)},
                )
            elif block.get("type") == "tool_use":
                raw_args = block.get("input")
                args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
                target = str(
                    args.get("file_path")
                    or args.get("path")
                    or args.get("pattern")
                    or args.get("command")
                    or ""
                )
                self._emit(
                    request,
                    "tool_call",
                    {"turn": out.turns, "tool": block.get("name"), "target": truncate(target, 200)},
                )
                if block.get("name") in EDIT_TOOLS and args.get("file_path"):
                    out.files.append(str(args["file_path"]))
        usage = message.get("usage")
        if new_message and isinstance(usage, dict):
            self._emit(
                request,
                "agent_turn",
                {
                    "turn": out.turns,
                    "input_tokens": _int(usage.get("input_tokens")),
                    "output_tokens": _int(usage.get("output_tokens")),
                },
            )

    def _raise_on_failure(self, code: int | None, outcome: _Outcome, stderr: str) -> None:
        result = outcome.result
        if (
            result is not None
            and not result.get("is_error")
            and result.get("subtype") in ("success", None)
            and code == 0
        ):
            return
        if result is not None and result.get("subtype") == "error_max_turns":
            raise AgentTurnLimitError(
                "claude used all its turns without a final answer",
                hint="raise ai.max_turns, or make the story smaller",
            )
        detail = ""
        if result is not None:
            detail = str(result.get("result") or result.get("errors") or result.get("subtype"))
        text = redact(f"{detail}\n{stderr}".strip())
        status = result.get("api_error_status") if result is not None else None
        kind = (
            _status_kind(status if isinstance(status, int) else None)
            or classify_output(text)
            or _status_kind(outcome.last_retry_status)
        )
        message = f"claude failed (exit code {code}): {truncate(text, 300) or 'no output'}"
        if kind is not None:
            raise error_for_kind(kind, message)
        if result is not None and result.get("is_error"):
            raise AgentReportedError(message)  # the agent ran and said it failed
        raise ProviderError(message)

    # --- results ----------------------------------------------------------------------------

    def _changes(self, request: ProviderRequest, before: Any, outcome: _Outcome) -> list[str]:
        """Files changed, from workspace snapshots (tool-use paths only past the size cap)."""
        after = snapshot(request.workspace) if before is not None else None
        if before is not None and after is not None:
            changed = changed_paths(before, after)
            if request.access is Access.READ_ONLY:
                # swap files, agents' scratch files and git-ignored files (logs) are not the agent's
                changed = agent_changes(request.workspace, changed)
            if request.access is Access.READ_ONLY and changed:
                raise AccessViolationError(
                    f"claude changed files during the read-only {request.phase.value} phase: "
                    + ", ".join(changed[:10]),
                    hint="check the claude tool settings (ai.claude.extra_args) of this project",
                )
            return changed
        root = request.workspace.resolve()
        found: list[str] = []
        for raw in outcome.files:
            path = Path(raw) if Path(raw).is_absolute() else root / raw
            try:
                rel = path.resolve().relative_to(root).as_posix()
            except ValueError:
                continue
            if rel not in found:
                found.append(rel)
        return found

    def _usage(self, result: dict[str, Any], model: str | None) -> Usage:
        raw = result.get("usage") if isinstance(result.get("usage"), dict) else {}
        assert isinstance(raw, dict)
        usage = Usage(
            input_tokens=sum(
                _int(raw.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            ),
            output_tokens=_int(raw.get("output_tokens")),
        )
        price = price_for(self.settings, model)
        if price is not None:
            return priced(usage, price)
        reported = result.get("total_cost_usd")
        if isinstance(reported, int | float) and not isinstance(reported, bool):
            usage.cost_usd = float(reported)
        return usage

    @staticmethod
    def _emit(request: ProviderRequest, name: str, data: dict[str, Any]) -> None:
        if request.on_event is not None:
            request.on_event(name, data)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _refuse_denials(request: ProviderRequest, result: dict[str, Any]) -> None:
    """An edit phase in which Claude Code was denied tool calls did not do its work, whatever
    its answer says ("permission not granted" to every write, then "success"). In read-only
    phases the denied edit tools are our own restriction working: not a failure."""
    denials = result.get("permission_denials")
    if request.access is not Access.EDIT or not isinstance(denials, list) or not denials:
        return
    shown: list[str] = []
    for denial in denials[:5]:
        entry = denial if isinstance(denial, dict) else {}
        raw = entry.get("tool_input")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        target = args.get("file_path") or args.get("path") or args.get("command") or ""
        name = str(entry.get("tool_name") or "a tool")
        shown.append(f"{name}({truncate(redact(str(target)), 80)})" if target else name)
    more = f" and {len(denials) - 5} more" if len(denials) > 5 else ""
    raise AgentReportedError(
        f"claude was denied {count(len(denials), 'tool call')} during {request.phase.value}: "
        + ", ".join(shown)
        + more,
        hint="allow the tools this phase needs (ai.claude.extra_args, your Claude Code "
        "permission settings), then run again",
    )


def _feed(stream: IO[bytes], text: str) -> None:
    """Write the prompt to stdin and close it (a dead child must not hang us)."""
    with contextlib.suppress(OSError):
        stream.write(text.encode("utf-8"))
    with contextlib.suppress(OSError):
        stream.close()


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):
        lines.put(line)
    lines.put(None)


def _drain(stream: IO[bytes], sink: list[bytes]) -> None:
    kept = 0
    for chunk in iter(lambda: stream.read(4096), b""):
        if kept < 64_000:
            sink.append(chunk)
            kept += len(chunk)
