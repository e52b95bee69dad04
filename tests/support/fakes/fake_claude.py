"""Stand-in for Claude Code's headless mode (`claude -p --output-format stream-json`).

Reads the prompt from stdin, records its command line, prints an `init` event and then plays a
JSON scenario (env FAKE_CLAUDE_SCRIPT) of steps:
  {"emit": {...}}                 print one stream-json event
  {"tool": "Write", "input": {"file_path": "x", "content": "..."}}
                                  use a tool like Claude Code: refused (a tool_result error)
                                  unless --tools offers it and --disallowedTools does not deny it
  {"rogue_write": {"path": "x", "content": "..."}}   write regardless (a misbehaving agent)
  {"sleep": seconds}, {"stderr": "text"}, {"exit": code}
  {"chatter": {"emit": {...}, "every": seconds}}   print the event every `seconds`, until killed
Like the real CLI, stream-json output without --verbose is an error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _option(argv: list[str], name: str) -> str | None:
    if name in argv:
        index = argv.index(name)
        return argv[index + 1] if index + 1 < len(argv) else None
    return None


def _emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    argv = sys.argv[1:]
    prompt = sys.stdin.read()
    record = os.environ.get("FAKE_CLAUDE_RECORD")
    if record:
        Path(record).write_text(
            json.dumps(
                {
                    "argv": argv,
                    "stdin": prompt,
                    "cwd": os.getcwd(),
                    "max_retries": os.environ.get("CLAUDE_CODE_MAX_RETRIES"),
                    "pid": os.getpid(),
                }
            )
        )
    if "-p" not in argv:
        sys.stderr.write("fake claude: only headless mode (-p) is supported\n")
        return 2
    if _option(argv, "--output-format") == "stream-json" and "--verbose" not in argv:
        sys.stderr.write(
            "Error: When using --print, --output-format=stream-json requires --verbose\n"
        )
        return 1
    offered = set((_option(argv, "--tools") or "").split(","))
    denied = set((_option(argv, "--disallowedTools") or "").split(","))
    _emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": "fake-session",
            "cwd": os.getcwd(),
            "model": _option(argv, "--model") or "claude-default",
            "tools": sorted(offered - denied - {""}),
            "permissionMode": _option(argv, "--permission-mode") or "default",
        }
    )
    steps = json.loads(Path(os.environ["FAKE_CLAUDE_SCRIPT"]).read_text())
    for number, step in enumerate(steps):
        if "emit" in step:
            _emit(step["emit"])
        elif "tool" in step:
            name, args = step["tool"], step["input"]
            tool_id = f"toolu_{number}"
            _emit(
                {
                    "type": "assistant",
                    "message": {
                        "content": [
                            {"type": "tool_use", "id": tool_id, "name": name, "input": args}
                        ],
                        "usage": {"input_tokens": 50, "output_tokens": 10},
                    },
                }
            )
            allowed = name in offered and name not in denied
            if allowed and name == "Write":
                Path(args["file_path"]).write_text(args["content"])
            text = "ok" if allowed else f"Permission to use {name} has been denied."
            _emit(
                {
                    "type": "user",
                    "message": {
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tool_id,
                                "content": text,
                                "is_error": not allowed,
                            }
                        ]
                    },
                }
            )
        elif "rogue_write" in step:
            Path(step["rogue_write"]["path"]).write_text(step["rogue_write"]["content"])
        elif "sleep" in step:
            time.sleep(step["sleep"])
        elif "chatter" in step:
            while True:
                _emit(step["chatter"]["emit"])
                time.sleep(step["chatter"]["every"])
        elif "stderr" in step:
            sys.stderr.write(step["stderr"] + "\n")
            sys.stderr.flush()
        elif "exit" in step:
            return int(step["exit"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
