"""The `command` provider: any CLI agent, from an argument-list template in config.

The prompt (system prompt + phase prompt) reaches the agent through a private temp file
(`{prompt_file}`) or its stdin, never through a shell or an argument; stdin is closed unless it
carries the prompt (`codex exec` hangs on an open pipe). The agent runs in the workspace in its
own process group, killed when the phase time limit passes. What it prints is read by
`cli_output` in the preset's output format: plain text, or the structured output of codex
(`exec --json`) and Gemini CLI (`--output-format json`), which gives the real answer, the real
token usage, the agent's own API retries (counted as `api_retry` recoveries, like Claude Code's)
and its typed failures. Exit codes and output patterns map to our error kinds, so a rate-limit
message becomes a retryable `rate_limit`. A CLI agent cannot be confined tool by tool, so
read-only phases use the preset's read-only command line and are checked afterwards: any file
the agent changed fails the phase with `AccessViolationError`.

Settings (`ai.command.*`):
    preset: claude | codex | aider | gemini   a documented template (see PRESETS)
    template: ["my-agent", "--prompt-file", "{prompt_file}", "--model={model}"]
    read_only_template: [...]            used for refine/research/plan/review (default: template)
    prompt_via: file | stdin             default: file when a token has {prompt_file}
    output: text | codex-jsonl | gemini-json | aider   how stdout is read (default: the preset's, or
                                         text for your own template)
    patterns: [{pattern: "quota exceeded", kind: limit}, ...]   checked before the defaults
    exit_codes: {75: rate_limit}         exit code → kind
Placeholders: {prompt_file}, {workspace}, {model}, {phase}, {output_dir} (a private folder,
new for each try, holding the preset's own files and whatever the agent writes there); a
token whose placeholder has no value (no model configured) is dropped. Kinds: rate_limit,
overloaded, server, timeout, connection, auth, limit, request. With `text` output token usage
is estimated from text length; the structured formats report it. `ai.prices.<model>` turns
it into a cost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.git.staging import agent_changes
from ai_sdlc.providers.agent_loop import Deadline, PhaseDeadlineReached
from ai_sdlc.providers.base import (
    Access,
    ConfiguredProvider,
    ProviderConfigError,
    ProviderRequest,
    ProviderResult,
    ProviderStatus,
    Usage,
)
from ai_sdlc.providers.cli_output import (
    AIDER_ANALYTICS,
    AIDER_HISTORY,
    OUTPUT_FORMATS,
    AgentOutput,
    BackendRetry,
    Classifier,
    LiveRetries,
    parse_output,
)
from ai_sdlc.providers.command_presets import (
    ALL_HOSTS,
    PLACEHOLDERS,
    PRESETS,
    api_urls,
    codex_keys,
    codex_retry_note,
)
from ai_sdlc.providers.errors_map import OUTPUT_KINDS, redact
from ai_sdlc.providers.pricing import estimate_tokens, price_for, priced
from ai_sdlc.providers.selection import effective_timeout, resolve_model
from ai_sdlc.providers.snapshots import changed_paths, snapshot
from ai_sdlc.providers.tools import (
    AccessViolationError,
    agent_env,
    kill_process_group,
)
from ai_sdlc.sandbox.childenv import AI_KEYS
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.sandbox.proxy import agent_egress
from ai_sdlc.spawn import start_session


@dataclass(frozen=True)
class CommandSpec:
    """The validated `ai.command` section."""

    template: tuple[str, ...]
    read_only_template: tuple[str, ...]
    prompt_via: str
    patterns: tuple[tuple[str, str], ...]
    exit_codes: dict[int, str]
    output: str = "text"
    files: tuple[tuple[str, str], ...] = ()
    merge_stderr: bool = False
    confined_template: tuple[str, ...] | None = None
    #: The credentials the agent gets when sandboxed (its provider's key; `sandbox.pass_env`).
    keys: tuple[str, ...] = AI_KEYS
    #: The API hosts it may reach through the egress proxy (see `command_presets.api_urls`).
    hosts: tuple[str, ...] = ()


def _argv(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(x, str) for x in raw):
        raise InvalidInputError(
            f"{where} must be a non-empty argument list",
            hint='e.g. template: ["my-agent", "--message-file", "{prompt_file}"] '
            "(a list, so nothing is ever parsed by a shell)",
        )
    return tuple(raw)


def _kind(value: Any, where: str) -> str:
    if value not in OUTPUT_KINDS:
        raise InvalidInputError(f"{where} must be one of {', '.join(sorted(OUTPUT_KINDS))}")
    return str(value)


def command_spec(settings: Mapping[str, Any]) -> CommandSpec:
    """Read and check `ai.command` (a preset, a template, or a preset with overrides)."""
    raw = settings.get("command")
    section: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    preset_name = section.get("preset")
    preset = None
    if preset_name is not None:
        preset = PRESETS.get(str(preset_name))
        if preset is None:
            raise InvalidInputError(
                f"ai.command.preset: unknown preset {preset_name!r}",
                hint="one of " + ", ".join(PRESETS),
            )
    if section.get("template") is not None:
        template = _argv(section["template"], "ai.command.template")
    elif preset is not None:
        template = preset.template
    else:
        raise ProviderConfigError(
            "the command provider needs ai.command.template or ai.command.preset",
            hint="e.g. ai.command.preset: aider (or claude, codex, gemini)",
        )
    if section.get("read_only_template") is not None:
        read_only = _argv(section["read_only_template"], "ai.command.read_only_template")
    elif preset is not None and section.get("template") is None:
        read_only = preset.read_only_template
    else:
        read_only = template
    default_via = "file" if any("{prompt_file}" in t for t in template + read_only) else "stdin"
    via = section.get("prompt_via") or (preset.prompt_via if preset else default_via)
    if via not in ("file", "stdin"):
        raise InvalidInputError("ai.command.prompt_via must be 'file' or 'stdin'")
    if via == "file" and not all(
        any("{prompt_file}" in t for t in argv) for argv in (template, read_only)
    ):
        raise InvalidInputError(
            "ai.command.prompt_via is 'file' but a template has no {prompt_file} token",
            hint="add {prompt_file} where the agent expects its prompt file, or use stdin",
        )
    patterns: list[tuple[str, str]] = []
    for i, item in enumerate(section.get("patterns") or []):
        if not isinstance(item, Mapping) or not isinstance(item.get("pattern"), str):
            raise InvalidInputError(f"ai.command.patterns[{i}] needs a 'pattern' and a 'kind'")
        patterns.append((item["pattern"], _kind(item.get("kind"), f"ai.command.patterns[{i}]")))
    exit_codes: dict[int, str] = {}
    for code, kind in (section.get("exit_codes") or {}).items():
        try:
            number = int(code)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"ai.command.exit_codes: {code!r} is not an exit code"
            ) from None
        exit_codes[number] = _kind(kind, f"ai.command.exit_codes.{code}")
    output = section.get("output")
    if output is None:
        # a preset's format follows its own command line, not one the user wrote instead
        output = preset.output if preset is not None and section.get("template") is None else "text"
    if output not in OUTPUT_FORMATS:
        raise InvalidInputError(
            f"ai.command.output must be one of {', '.join(OUTPUT_FORMATS)}, got {output!r}",
            hint="claude-json for `claude -p --output-format json`, codex-jsonl for `codex "
            "exec --json`, gemini-jsonl for `gemini --output-format stream-json` (gemini-json "
            "for `--output-format json`), aider for the aider preset's files, text for anything "
            "else",
        )
    files = preset.files if preset is not None else ()
    # stderr goes with stdout for the preset's own format (the user's format reads it apart)
    merge = preset is not None and preset.merge_stderr and output == preset.output
    confined = (
        preset.confined_template if preset is not None and section.get("template") is None else None
    )
    return CommandSpec(
        template,
        read_only,
        str(via),
        tuple(patterns),
        exit_codes,
        str(output),
        files,
        merge_stderr=merge,
        confined_template=confined,
        keys=preset.keys if preset is not None else AI_KEYS,
        hosts=preset.hosts if preset is not None else ALL_HOSTS,
    )


def render(template: tuple[str, ...], values: Mapping[str, str | None]) -> list[str]:
    """Fill placeholders token by token; drop a token whose placeholder has no value."""
    out: list[str] = []
    for token in template:
        rendered: str | None = token
        for placeholder in PLACEHOLDERS:
            if placeholder in token:
                value = values.get(placeholder)
                if value is None:
                    rendered = None
                    break
                assert rendered is not None
                rendered = rendered.replace(placeholder, value)
        if rendered is not None:
            out.append(rendered)
    return out


class CommandProvider(ConfiguredProvider):
    name: ClassVar[str] = "command"

    def status(self) -> ProviderStatus:
        try:
            spec = command_spec(self.settings)
        except (InvalidInputError, ProviderConfigError) as exc:
            return ProviderStatus(self.name, False, exc.message)
        program = spec.template[0]
        found = shutil.which(program, path=self.environ.get("PATH"))
        if found is None:
            return ProviderStatus(self.name, False, f"{program!r} is not on PATH")
        note = codex_retry_note(self.environ) if spec.output == "codex-jsonl" else None
        return ProviderStatus(self.name, True, f"runs {found}" + (f"; {note}" if note else ""))

    def execute(self, request: ProviderRequest) -> ProviderResult:
        spec = command_spec(self.settings)
        model = resolve_model(self.name, self.settings, request.model, self.environ)
        deadline = Deadline(effective_timeout(request, self.settings))
        prompt = (
            f"{request.system_prompt}\n\n{request.prompt}"
            if request.system_prompt
            else (request.prompt)
        )
        before = snapshot(request.workspace)
        # Under the sandbox the prompt and output folder lie in the private home's `runs/`,
        # writable by the agent (a folder it cannot write makes Aider fail, issue 32 case 8).
        runs = request.sandbox.runs if request.sandbox is not None else ""
        with tempfile.TemporaryDirectory(prefix="ai-sdlc-prompt-", dir=runs or None) as tmp:
            prompt_file = Path(tmp) / "prompt.md"
            fd = os.open(prompt_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(prompt)
            output_dir = Path(tmp) / "out"
            template = spec.template if request.access is Access.EDIT else spec.read_only_template
            if request.access is Access.EDIT and request.sandbox is not None:
                template = spec.confined_template or template
            argv = render(
                template,
                {
                    "{prompt_file}": str(prompt_file),
                    "{workspace}": str(request.workspace),
                    "{model}": model,
                    "{phase}": request.phase.value,
                    "{output_dir}": str(output_dir),
                },
            )
            if request.on_event is not None:
                request.on_event(
                    "agent_started",
                    {
                        "provider": self.name,
                        "model": model,
                        "access": request.access.value,
                        "command": redact(" ".join(argv[:1])),
                    },
                )

            def one_run() -> AgentOutput:
                # Each try gets the whole phase time limit: a timeout is a transient failure,
                # retried (and counted as an API retry) under the `llm` policy like any other.
                attempt = Deadline(deadline.seconds)
                shutil.rmtree(output_dir, ignore_errors=True)  # a fresh folder for each try
                output_dir.mkdir(mode=0o700)
                for name, text in spec.files:
                    (output_dir / name).write_text(text, encoding="utf-8")
                try:
                    return self._run(argv, spec, request, prompt, attempt, output_dir)
                except PhaseDeadlineReached:
                    raise attempt.expired_error(f"agent {argv[0]!r}") from None

            try:
                output = request.guard(one_run)
            except PhaseDeadlineReached:
                raise deadline.expired_error(f"agent {argv[0]!r}") from None
        changed = self._changes(request, before)
        usage = output.usage  # the agent's own count, when its output format has one
        if usage is None:
            usage = Usage(estimate_tokens(prompt), estimate_tokens(output.text))
        usage = priced(usage, price_for(self.settings, model))
        return ProviderResult(
            text=output.text, usage=usage, duration=deadline.elapsed(), files_changed=changed
        )

    def _run(
        self,
        argv: list[str],
        spec: CommandSpec,
        request: ProviderRequest,
        prompt: str,
        deadline: Deadline,
        output_dir: Path,
    ) -> AgentOutput:
        """One run of the agent, its network through the egress proxy (`sandbox/proxy.py`)."""
        keys = [*spec.keys, *(codex_keys(self.environ) if spec.output == "codex-jsonl" else ())]
        env = agent_env(self.environ, keys, request.sandbox)
        with agent_egress(request.sandbox, api_urls(spec.hosts, env)) as egress:
            routed = (egress.apply(env), egress.sandbox)
            return self._run_routed(argv, spec, request, prompt, deadline, output_dir, routed)

    def _run_routed(
        self,
        argv: list[str],
        spec: CommandSpec,
        request: ProviderRequest,
        prompt: str,
        deadline: Deadline,
        output_dir: Path,
        routed: tuple[dict[str, str], SandboxPolicy | None],
    ) -> AgentOutput:
        via_stdin = spec.prompt_via == "stdin"
        try:
            proc = start_session(
                argv,
                cwd=request.workspace,
                stdin=subprocess.PIPE if via_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if spec.merge_stderr else subprocess.PIPE,
                env=routed[0],
                sandbox=routed[1],
            )
        except OSError as exc:
            raise ProviderConfigError(
                f"cannot start agent {argv[0]!r}: {exc.strerror or exc}",
                hint="check ai.command.template (the program must be on PATH)",
            ) from None
        live = LiveRetries(spec.output)
        try:
            out, err = self._stream(proc, prompt if via_stdin else None, deadline, request, live)
        except BaseException:
            kill_process_group(proc)
            raise
        files = {}
        for name in (AIDER_HISTORY, AIDER_ANALYTICS):
            path = output_dir / name
            if path.is_file():
                files[name] = path.read_text(encoding="utf-8", errors="replace")
        parsed = parse_output(
            spec.output,
            out,
            err,
            proc.returncode,
            Classifier(argv[0], spec.patterns, spec.exit_codes, str(request.workspace)),
            files,
        )
        # The agent's own retries happened whether or not it finally answered: count each the
        # live reader did not (this may raise StoryBlockedError at the global limit).
        for retry in parsed.retries[live.count :]:
            self._backend_retry(request, retry)
        if parsed.error is not None:
            raise parsed.error
        return parsed

    def _stream(
        self,
        proc: subprocess.Popen[bytes],
        stdin: str | None,
        deadline: Deadline,
        request: ProviderRequest,
        live: LiveRetries,
    ) -> tuple[str, str]:
        """Run the agent to its end, reading stdout a line at a time: each retry it announces
        is counted at once, so the global limit stops it midway (the caller kills it)."""
        expired = threading.Event()

        def on_deadline() -> None:
            expired.set()
            kill_process_group(proc)

        errors: list[bytes] = []
        readers = [threading.Thread(target=lambda: errors.append(_read_all(proc.stderr)))]
        if stdin is not None:
            readers.append(threading.Thread(target=_feed, args=(proc, stdin.encode("utf-8"))))
        timer = threading.Timer(max(deadline.left(), 0.01), on_deadline)
        timer.daemon = True
        for thread in readers:
            thread.daemon = True
            thread.start()
        timer.start()
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                retry = live.feed(line)
                if retry is not None:
                    self._backend_retry(request, retry)  # may raise StoryBlockedError
            proc.wait()
            for thread in readers:
                thread.join()
        finally:
            timer.cancel()
        if expired.is_set():
            raise PhaseDeadlineReached(f"agent {proc.args!r} ran past the time limit")
        return "".join(lines), b"".join(errors).decode("utf-8", "replace")

    @staticmethod
    def _backend_retry(request: ProviderRequest, retry: BackendRetry) -> None:
        if request.on_event is not None:
            request.on_event("backend_retry", {"delay": retry.delay, "reason": retry.reason})
        if request.on_backend_retry is not None:
            request.on_backend_retry(retry.delay, retry.reason)

    def _changes(self, request: ProviderRequest, before: Any) -> list[str]:
        if before is None:
            return []
        after = snapshot(request.workspace)
        if after is None:
            return []
        changed = changed_paths(before, after)
        if request.access is Access.READ_ONLY:
            # swap files, agents' scratch files and git-ignored files (logs) are not the agent's
            changed = agent_changes(request.workspace, changed)
        if request.access is Access.READ_ONLY and changed:
            raise AccessViolationError(
                f"the agent changed files during the read-only {request.phase.value} phase: "
                + ", ".join(changed[:10]),
                hint="give ai.command.read_only_template a read-only mode of your agent",
            )
        return changed


def _read_all(stream: Any) -> bytes:
    return stream.read() if stream is not None else b""


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write the prompt to the agent's stdin, then close it (`codex exec` waits for EOF)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError):
        pass  # the agent exited without reading its prompt: its exit code says why
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
