"""Stand-ins for the CLI agents people drive stories with: Claude Code, OpenAI Codex, Aider and
Gemini CLI.

One program, installed under the tool's name (`install_agent(bin_dir, "codex")`); it answers each
phase of a story the way a competent agent would (refine and review approve, implement writes
files) and speaks the real tool's output format:

  claude  `-p --output-format stream-json --verbose`: an `init` event, the `Write` tool_use and its
          tool_result (refused unless `--tools` offers Write), the answer, a `result` event.
  codex   `exec [--json] ... -`: prompt on stdin; with `--json` the JSONL thread events
          (thread.started, turn.started, item.completed file_change/agent_message,
          turn.completed with usage), without it progress on stderr and the last message on
          stdout. `--sandbox read-only` refuses writes. A rate limit (FAKE_AGENT_FAIL_ONCE) is
          its own stream retry `error` "Reconnecting... 1/5 (…)", then the fatal `error` and
          `turn.failed` "exceeded retry limit, last status: 429 Too Many Requests", exit 1.
  gemini  `--output-format json [--approval-mode M | --yolo] [-p TEXT]`: the prompt on stdin (with
          -p TEXT appended), one pretty-printed JSON object {session_id, response, stats}; edits
          only with approval mode auto_edit or yolo (headless, `default` denies write_file). A
          rate limit is the error form {session_id, error: {type: RetryableQuotaError, message,
          code: 429}} on stderr, exit code 429.
  aider   `--message-file F --yes-always --no-auto-commits --no-pretty [--dry-run]`: plain text
          (the banner, the reply with SEARCH/REPLACE blocks, "Applied edit to X"); writes its
          chat/input history files in the git root (or where `--chat-history-file`/
          `--input-history-file` say) and, unless `--no-gitignore`, adds `.aider*` to the root
          `.gitignore` like the real tool does with --yes-always. `--llm-history-file` and
          `--analytics-log` get what Aider 0.86 writes there (`tests/e2e/realcli` checks the shapes
          against the real tool).

Environment: FAKE_AGENT_FILES (JSON {path: content} written by implement/rework, relative to the
working folder), FAKE_AGENT_LOG (one JSON line per call: tool, argv, phase, cwd),
FAKE_AGENT_OUTSIDE (JSON {path: content} written during read-only phases, as if by something
else: a log the user redirects to, an editor's swap file; relative paths are in the cwd),
FAKE_AGENT_FAIL_ONCE (a marker path: the first call that finds no marker creates it and fails
with a rate limit), FAKE_AGENT_API_ERRORS (N: a successful call reports N API errors the tool
retried by itself: codex `Reconnecting... i/5` events, gemini `stats.models.*.api.totalErrors`),
FAKE_AGENT_DENY (claude: JSON list of paths whose Write is denied even in an edit phase, as a
permission setting would; the `result` still says success and lists them in
`permission_denials`, as Claude Code does).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

_TASK = re.compile(r"## Your task \((\w+)\)")
SOURCE = Path(__file__)


def install_agent(bin_dir: Path, name: str) -> Path:
    """`bin_dir/<name>` running this stand-in with the running interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    target = bin_dir / name
    target.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SOURCE}" {name} "$@"\n')
    target.chmod(0o755)
    return target


def _opt(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name:
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _answer(phase: str, files: dict[str, str]) -> str:
    if phase == "refine":
        return "A clear story with testable criteria.\nDECISION: APPROVED"
    if phase == "research":
        return "## Findings\n\nA small module is needed."
    if phase == "plan":
        return "## Plan\n\n1. Add " + ", ".join(files) + ".\n2. Test it."
    if phase in ("implement", "rework"):
        return "Implemented as planned: " + ", ".join(files)
    if phase == "review":
        return "Clean and tested.\n\nDECISION: APPROVED"
    return f"unexpected phase {phase}"


def _outside_writes(read_only: bool) -> None:
    if not read_only:
        return
    for name, text in json.loads(os.environ.get("FAKE_AGENT_OUTSIDE") or "{}").items():
        Path(name).write_text(text)


def _fail_once() -> bool:
    """True for the first call that finds no FAKE_AGENT_FAIL_ONCE marker (which it creates)."""
    marker = os.environ.get("FAKE_AGENT_FAIL_ONCE")
    if not marker:
        return False
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _api_errors() -> int:
    return int(os.environ.get("FAKE_AGENT_API_ERRORS") or "0")


def _emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def claude(argv: list[str], prompt: str, phase: str, files: dict[str, str]) -> int:
    if "-p" not in argv:
        sys.stderr.write("fake claude: only headless mode (-p) is supported\n")
        return 2
    if _opt(argv, "--output-format") == "stream-json" and "--verbose" not in argv:
        sys.stderr.write(
            "Error: When using --print, --output-format=stream-json requires --verbose\n"
        )
        return 1
    offered = set((_opt(argv, "--tools") or "").split(","))
    denied = set((_opt(argv, "--disallowedTools") or "").split(","))
    allowed = "Write" in offered and "Write" not in denied
    refused = set(json.loads(os.environ.get("FAKE_AGENT_DENY") or "[]"))
    denials: list[dict[str, object]] = []
    _emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": "fake-session",
            "cwd": os.getcwd(),
            "model": _opt(argv, "--model") or "claude-default",
            "tools": sorted(offered - denied - {""}),
            "permissionMode": _opt(argv, "--permission-mode") or "default",
        }
    )
    _outside_writes(not allowed)
    if phase in ("implement", "rework"):
        for number, (name, content) in enumerate(files.items()):
            target = str(Path.cwd() / name)  # Claude Code's Write takes absolute paths
            tool_id = f"toolu_{number}"
            args = {"file_path": target, "content": content}
            _emit(
                {
                    "type": "assistant",
                    "message": {
                        "content": [
                            {"type": "tool_use", "id": tool_id, "name": "Write", "input": args}
                        ],
                        "usage": {"input_tokens": 50, "output_tokens": 10},
                    },
                }
            )
            permitted = allowed and name not in refused
            if permitted:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
                Path(target).write_text(content)
            elif allowed:  # offered, but the permission settings refuse it
                denials.append({"tool_name": "Write", "tool_use_id": tool_id, "tool_input": args})
            text = (
                f"File created successfully at: {target}"
                if permitted
                else "Permission to use Write has been denied."
            )
            _emit(
                {
                    "type": "user",
                    "message": {
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tool_id,
                                "content": text,
                                "is_error": not permitted,
                            }
                        ]
                    },
                }
            )
    answer = _answer(phase, files)
    _emit(
        {
            "type": "assistant",
            "message": {
                "content": [{"type": "text", "text": answer}],
                "usage": {"input_tokens": 80, "output_tokens": 20},
            },
        }
    )
    _emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": answer,
            "num_turns": 2,
            "total_cost_usd": 0.0042,
            "usage": {"input_tokens": 130, "output_tokens": 30},
            "permission_denials": denials,
        }
    )
    return 0


def codex(argv: list[str], prompt: str, phase: str, files: dict[str, str]) -> int:
    if not argv or argv[0] != "exec":
        sys.stderr.write("fake codex: only `codex exec` is supported\n")
        return 2
    sandbox = _opt(argv, "--sandbox") or "read-only"
    as_json = "--json" in argv
    writable = sandbox in ("workspace-write", "danger-full-access")
    _outside_writes(not writable)
    events: list[dict[str, object]] = [
        {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
        {"type": "turn.started"},
    ]
    dropped = "stream disconnected before completion: error sending request for url"
    if _fail_once():
        limit = "exceeded retry limit, last status: 429 Too Many Requests"
        events += [
            {"type": "error", "message": f"Reconnecting... 1/5 ({dropped})"},
            {"type": "error", "message": limit},
            {"type": "turn.failed", "error": {"message": limit}},
        ]
        if as_json:
            for event in events:
                _emit(event)
        else:
            sys.stderr.write(f"ERROR: {limit}\n")
        return 1
    for attempt in range(1, _api_errors() + 1):
        events.append({"type": "error", "message": f"Reconnecting... {attempt}/5 ({dropped})"})
    events.append(
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "reasoning", "text": "**Reading the task**"},
        }
    )
    if not as_json:
        sys.stderr.write(
            f"OpenAI Codex v0.46.0 (research preview)\n--------\nworkdir: {os.getcwd()}\n"
        )
        sys.stderr.write(f"sandbox: {sandbox}\n--------\nuser\n{prompt[:200]}\n")
    if phase in ("implement", "rework") and files:
        if writable:
            for name, content in files.items():
                Path(name).parent.mkdir(parents=True, exist_ok=True)
                Path(name).write_text(content)
            changes = [{"path": str(Path.cwd() / n), "kind": "add"} for n in files]
            events.append(
                {
                    "type": "item.completed",
                    "item": {
                        "id": "item_1",
                        "type": "file_change",
                        "changes": changes,
                        "status": "completed",
                    },
                }
            )
        else:
            events.append(
                {
                    "type": "item.completed",
                    "item": {
                        "id": "item_1",
                        "type": "error",
                        "message": "writing is blocked by read-only sandbox",
                    },
                }
            )
    answer = _answer(phase, files)
    events.append(
        {
            "type": "item.completed",
            "item": {"id": "item_2", "type": "agent_message", "text": answer},
        }
    )
    events.append(
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 2400, "cached_input_tokens": 1024, "output_tokens": 120},
        }
    )
    if as_json:
        for event in events:
            _emit(event)
    else:
        sys.stderr.write("codex\n" + answer + "\ntokens used: 2520\n")
        sys.stdout.write(answer + "\n")
    return 0


def aider(argv: list[str], prompt: str, phase: str, files: dict[str, str]) -> int:
    import subprocess  # only aider asks git (each stand-in call is a process start)

    dry_run = "--dry-run" in argv
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    ).stdout.strip()
    root = Path(top) if top else Path.cwd()
    print(f"Aider v0.86.1\nModel: {_opt(argv, '--model') or 'gpt-4o'} with diff edit format")
    print(
        f"Git repo: {'.git' if top else 'none'} with 3 files\n"
        "Repo-map: using 4096 tokens, auto refresh"
    )
    if top and "--no-gitignore" not in argv:
        ignore = root / ".gitignore"
        content = ignore.read_text() if ignore.exists() else ""
        if ".aider*" not in content.split("\n"):
            if content and not content.endswith("\n"):
                content += "\n"
            ignore.write_text(content + ".aider*\n")
            print("Added .aider* to .gitignore")
    input_history = Path(_opt(argv, "--input-history-file") or root / ".aider.input.history")
    input_history.write_text(f"# aider input\n+{prompt[:80]}\n")
    _outside_writes(dry_run)
    answer = _answer(phase, files)
    blocks = ""
    if phase in ("implement", "rework"):
        for name, content in files.items():
            blocks += f"\n{name}\n```\n<<<<<<< SEARCH\n=======\n{content}>>>>>>> REPLACE\n```\n"
    print(answer + "\n" + blocks)
    if phase in ("implement", "rework"):
        for name, content in files.items():
            if dry_run:
                print(f"Did not apply edit to {name} (--dry-run)")
            else:
                Path(name).parent.mkdir(parents=True, exist_ok=True)
                Path(name).write_text(content)
                print(f"Applied edit to {name}")
    print("Tokens: 2.4k sent, 120 received. Cost: $0.0074 message, $0.0074 session.")
    chat = Path(_opt(argv, "--chat-history-file") or root / ".aider.chat.history.md")
    chat.write_text(f"# aider chat\n#### {prompt[:80]}\n{answer}\n")
    _aider_logs(argv, prompt, answer + "\n" + blocks)
    return 0


def _aider_logs(argv: list[str], prompt: str, reply: str) -> None:
    """`--llm-history-file` and `--analytics-log` as Aider 0.86 writes them."""
    stamp = "2026-11-26T00:00:00"
    history = _opt(argv, "--llm-history-file")
    if history:
        sent = "\n".join(f"USER {line}" for line in prompt.splitlines())
        got = "\n".join(f"ASSISTANT {line}" for line in reply.splitlines())
        with open(history, "a", encoding="utf-8") as fh:
            fh.write(f"TO LLM {stamp}\n-------\n{sent}\nLLM RESPONSE {stamp}\n{got}\n")
    analytics = _opt(argv, "--analytics-log")
    if analytics:
        props = {"prompt_tokens": 2400, "completion_tokens": 120, "total_tokens": 2520}
        with open(analytics, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": "message_send", "properties": props}) + "\n")


def _gemini_approval(argv: list[str]) -> str | None:
    mode = _opt(argv, "--approval-mode")
    yolo = "--yolo" in argv or "-y" in argv
    if mode and yolo:
        return None
    if mode is None:
        return "yolo" if yolo else "default"
    return mode if mode in ("default", "auto_edit", "yolo", "plan") else None


def gemini(argv: list[str], prompt: str, phase: str, files: dict[str, str]) -> int:
    mode = _gemini_approval(argv)
    if mode is None:
        sys.stderr.write(
            "Cannot use both --yolo (-y) and --approval-mode together. "
            "Use --approval-mode=yolo instead.\n"
        )
        return 42
    if not prompt.strip():
        sys.stderr.write(
            "No input provided via stdin. Input can be provided by piping data into gemini or "
            "using the --prompt option.\n"
        )
        return 42
    session = "6c2d3a7e-5b1f-4f0e-9a57-3b0c9e1d2f48"
    as_json = _opt(argv, "--output-format") == "json"
    if _opt(argv, "--output-format") == "stream-json":
        return _gemini_stream(argv, prompt, phase, files, mode)
    if _fail_once():
        message = "Resource has been exhausted (e.g. check quota)."
        error = {"type": "RetryableQuotaError", "message": message, "code": 429}
        if as_json:
            sys.stderr.write(json.dumps({"session_id": session, "error": error}, indent=2) + "\n")
        else:
            sys.stderr.write(f"[API Error: {message}]\n")
        return 429  # the error's code is Gemini CLI's exit code (the shell sees 429 & 255)
    editing = mode in ("auto_edit", "yolo")
    _outside_writes(not editing)
    model = _opt(argv, "--model") or _opt(argv, "-m") or "gemini-2.5-pro"
    calls = accepted = 0
    lines = 0
    if phase in ("implement", "rework"):
        for name, content in files.items():
            calls += 1
            if editing:
                Path(name).parent.mkdir(parents=True, exist_ok=True)
                Path(name).write_text(content)
                accepted += 1
                lines += content.count("\n")
    answer = _answer(phase, files)
    errors = _api_errors()
    prompt_tokens = len(prompt) // 4 + 1800
    tokens = {
        "input": prompt_tokens - 1024,
        "prompt": prompt_tokens,
        "candidates": 96,
        "total": prompt_tokens + 96 + 152,
        "cached": 1024,
        "thoughts": 152,
        "tool": 0,
    }
    api = {
        "totalRequests": 2 + errors,
        "totalErrors": errors,
        "totalLatencyMs": 5310,
        "errorsByType": {"RetryableQuotaError": errors} if errors else {},
    }
    role = {k: v for k, v in api.items() if k != "errorsByType"}
    decisions = {"accept": 0, "reject": 0, "modify": 0, "auto_accept": accepted}
    stats = {
        "models": {
            model: {"api": api, "tokens": tokens, "roles": {"main": {**role, "tokens": tokens}}}
        },
        "tools": {
            "totalCalls": calls,
            "totalSuccess": accepted,
            "totalFail": calls - accepted,
            "totalDurationMs": 12 * calls,
            "totalDecisions": {**decisions, "reject": calls - accepted},
            "byName": (
                {
                    "write_file": {
                        "count": calls,
                        "success": accepted,
                        "fail": calls - accepted,
                        "durationMs": 12 * calls,
                        "decisions": {**decisions, "reject": calls - accepted},
                    }
                }
                if calls
                else {}
            ),
        },
        "files": {"totalLinesAdded": lines, "totalLinesRemoved": 0},
    }
    if as_json:
        sys.stdout.write(
            json.dumps({"session_id": session, "response": answer, "stats": stats}, indent=2)
        )
    else:
        sys.stdout.write(answer + "\n")
    return 0


def _gemini_stream(
    argv: list[str], prompt: str, phase: str, files: dict[str, str], mode: str
) -> int:
    """Gemini CLI 0.61's `--output-format stream-json`: JSON events a line on stdout, its
    retries logged on stderr ("Attempt 1 failed with status 429. Retrying with backoff...")."""
    stamp = "2026-11-26T00:00:00.000Z"

    def emit(event: dict[str, object]) -> None:
        sys.stdout.write(json.dumps({"type": event.pop("type"), "timestamp": stamp, **event}))
        sys.stdout.write("\n")
        sys.stdout.flush()

    model = _opt(argv, "--model") or _opt(argv, "-m") or "auto"
    emit({"type": "init", "session_id": "6c2d3a7e-5b1f-4f0e-9a57", "model": model})
    emit({"type": "message", "role": "user", "content": prompt})
    for attempt in range(1, _api_errors() + 1):
        sys.stderr.write(f"Attempt {attempt} failed with status 429. Retrying with backoff...\n")
        sys.stderr.flush()
    usage = {"total_tokens": 2100, "input_tokens": 2000, "output_tokens": 100, "cached": 0}
    if _fail_once():
        error = (
            '[API Error: {"error":{"code":429,"message":"Resource has been exhausted '
            '(e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]'
        )
        emit(
            {
                "type": "result",
                "status": "error",
                "error": {"type": "unknown", "message": error},
                "stats": {**usage, "input_tokens": 0, "output_tokens": 0},
            }
        )
        return 1
    editing = mode in ("auto_edit", "yolo")
    _outside_writes(not editing)
    tools = 0
    if phase in ("implement", "rework"):
        for number, (name, content) in enumerate(files.items()):
            tools += 1
            tool_id = f"write_file__write_file_{number}"
            emit(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": f"Writing {name}.",
                    "delta": True,
                }
            )
            emit(
                {
                    "type": "tool_use",
                    "tool_name": "write_file",
                    "tool_id": tool_id,
                    "parameters": {"file_path": str(Path(name).resolve()), "content": content},
                }
            )
            if editing:
                Path(name).parent.mkdir(parents=True, exist_ok=True)
                Path(name).write_text(content)
                emit({"type": "tool_result", "tool_id": tool_id, "status": "success"})
            else:
                emit(
                    {
                        "type": "tool_result",
                        "tool_id": tool_id,
                        "status": "error",
                        "output": "Tool execution denied by policy.",
                        "error": {
                            "type": "policy_violation",
                            "message": "Tool execution denied by policy.",
                        },
                    }
                )
    emit({"type": "message", "role": "assistant", "content": _answer(phase, files), "delta": True})
    emit(
        {
            "type": "result",
            "status": "success",
            "stats": {
                **usage,
                "duration_ms": 900,
                "tool_calls": tools,
                "models": {model: dict(usage)},
            },
        }
    )
    return 0


def main() -> int:
    tool, argv = sys.argv[1], sys.argv[2:]
    message_file = _opt(argv, "--message-file")
    prompt = Path(message_file).read_text() if message_file else sys.stdin.read()
    flag = _opt(argv, "-p") or _opt(argv, "--prompt")
    if tool == "gemini" and flag:  # Gemini CLI appends -p text to what arrives on stdin
        prompt = f"{prompt}\n\n{flag}" if prompt else flag
    found = _TASK.findall(prompt)
    phase = found[-1] if found else "unknown"
    log = os.environ.get("FAKE_AGENT_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            record = {"tool": tool, "argv": argv, "phase": phase, "cwd": os.getcwd()}
            handle.write(json.dumps(record) + "\n")
    files: dict[str, str] = json.loads(os.environ.get("FAKE_AGENT_FILES") or "{}")
    run = {"claude": claude, "codex": codex, "aider": aider, "gemini": gemini}[tool]
    return run(argv, prompt, phase, files)


if __name__ == "__main__":
    sys.exit(main())
