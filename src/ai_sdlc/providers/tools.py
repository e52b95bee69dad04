"""The tools our own agent loop offers a model, confined to the story's workspace.

Why our own tools: the model is untrusted input. Every path is resolved (symlinks followed)
and must stay inside the workspace; `..` and absolute paths are refused outright; `.git` and
`.ai-sdlc` are never writable (a model must not rewrite hooks or the story's own guardrail
counters). Read-only phases get no writing tool at all. `run_command` takes an argument list
(never a shell), runs only commands whose leading arguments match the config allow-list,
with a closed stdin, a scrubbed environment (no keys or tokens), its own process group killed
on timeout, and truncated output.

Settings (`ai.tools.*`):
    allow_commands: ["pytest", "npm test", ["python", "-m", "pytest"]]   # argv prefixes
    command_phases: [implement, rework]     # phases offered run_command (default)
    command_timeout: 120                    # seconds per command
    max_output_chars: 20000                 # command output / file text returned to the model

Also here: process-group helpers, shared by the CLI-agent providers; their workspace
snapshots are in `snapshots`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.environ import current as current_environ
from ai_sdlc.errors import InvalidInputError
from ai_sdlc.providers.base import Access, Phase, ProviderError, ProviderRequest
from ai_sdlc.providers.paths import PathRefused, confine
from ai_sdlc.sandbox.childenv import agent_environment
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.spawn import kill_session, start_session

#: Folders skipped by `search`, `list_dir` recursion and snapshots (big, generated, or ours).
#: Never listed, searched or watched: ai-sdlc's own state (`.ai-sdlc`, written by the tool
#: itself while an agent runs) and folders that are never the work.
SKIP_DIRS = frozenset({".git", ".ai-sdlc", "node_modules", ".venv", "__pycache__", ".mypy_cache"})
_MAX_SEARCH_HITS = 200
_MAX_SEARCH_FILE_BYTES = 1_000_000
_MAX_LIST_ENTRIES = 500


class ToolRefused(Exception):
    """A tool call the model may not make; the message goes back to the model, not the user."""


class AccessViolationError(ProviderError):
    """A read-only phase changed files in the workspace (possible only for CLI agents)."""

    kind = "access"


class ToolSpec(msgspec.Struct, frozen=True):
    """One tool as both APIs describe it: a name, a description, a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolOutcome(msgspec.Struct):
    """The answer a tool call gives the model, and the file it changed (if any)."""

    text: str
    is_error: bool = False
    changed: str | None = None


# --- paths (the rules are `paths.confine`'s) -----------------------------------------------


class ToolRoot:
    """Resolves model-supplied paths inside one folder, or refuses them."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, raw: object, *, write: bool = False) -> Path:
        try:
            return confine(self.root, raw, write=write)
        except PathRefused as exc:
            raise ToolRefused(str(exc)) from None

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."


# --- commands -------------------------------------------------------------------------------


class CommandPolicy(msgspec.Struct, frozen=True):
    """Which argument lists `run_command` accepts, and how long/loud they may be."""

    allow: tuple[tuple[str, ...], ...]
    timeout: float = 120.0
    max_output_chars: int = 20_000

    def allows(self, argv: Sequence[str]) -> bool:
        return any(tuple(argv[: len(prefix)]) == prefix for prefix in self.allow if prefix)


def kill_process_group(proc: subprocess.Popen[Any], *, grace: float = 0.5) -> None:
    """SIGTERM the child's process group, SIGKILL it and every descendant after `grace`
    seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
        return
    kill_session(proc.pid)  # detached grandchildren too, not only the group
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def truncate(text: str, limit: int) -> str:
    """Head and tail of `text` within `limit` characters, with a marker in between."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n… [{dropped} characters truncated] …\n{text[-half:]}"


def agent_env(
    environ: Mapping[str, str], keys: Sequence[str], sandbox: SandboxPolicy | None
) -> dict[str, str]:
    """A CLI agent's environment: with no sandbox (`--no-sandbox`, none here) the user's whole
    one; sandboxed, without credentials except `keys` (its provider's) and `sandbox.pass_env`."""
    if sandbox is None:
        return dict(environ)
    return agent_environment(environ, (*keys, *sandbox.pass_env))


def run_confined(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    max_output_chars: int,
    sandbox: SandboxPolicy | None = None,
) -> tuple[int | None, str]:
    """Run `argv` (no shell) in its own process group, in `sandbox` when given; (exit code or
    None on timeout, output)."""
    proc = start_session(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=agent_environment(current_environ(), sandbox.pass_env if sandbox else ()),
        sandbox=sandbox,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process_group(proc)
        out, _ = proc.communicate()
        text = out.decode("utf-8", "replace")
        return None, truncate(text, max_output_chars)
    return proc.returncode, truncate(out.decode("utf-8", "replace"), max_output_chars)


# --- the tool box ---------------------------------------------------------------------------

_PATH = {"type": "string", "description": "Path relative to the workspace root."}

READ_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "Read a text file of the workspace.",
        {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
    ),
    ToolSpec(
        "list_dir",
        "List the entries of a folder of the workspace (folders end with '/').",
        {"type": "object", "properties": {"path": _PATH}, "required": []},
    ),
    ToolSpec(
        "search",
        "Find lines containing a text (or a regular expression) in the workspace's files.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Text to find."},
                "path": _PATH,
                "regex": {"type": "boolean", "description": "Treat pattern as a regex."},
            },
            "required": ["pattern"],
        },
    ),
)
EDIT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "write_file",
        "Create or overwrite a text file of the workspace with the given content.",
        {
            "type": "object",
            "properties": {"path": _PATH, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    ),
    ToolSpec(
        "edit_file",
        "Replace the one occurrence of old_string in a file by new_string "
        "(old_string must occur exactly once).",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    ),
)
COMMAND_TOOL = ToolSpec(
    "run_command",
    "Run an allowed command (an argument list, no shell) in the workspace; returns its exit "
    "code and output.",
    {
        "type": "object",
        "properties": {
            "argv": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'Program and arguments, e.g. ["pytest", "-q"].',
            }
        },
        "required": ["argv"],
    },
)


class ToolBox(msgspec.Struct):
    """The tools of one phase; `call` never raises for the model's mistakes."""

    workspace: ToolRoot
    access: Access
    commands: CommandPolicy | None = None
    max_read_chars: int = 100_000
    #: Confines `run_command`'s processes (the request's sandbox).
    sandbox: SandboxPolicy | None = None
    files_changed: list[str] = msgspec.field(default_factory=list)

    @property
    def specs(self) -> list[ToolSpec]:
        specs = list(READ_TOOLS)
        if self.access is Access.EDIT:
            specs.extend(EDIT_TOOLS)
        if self.commands is not None and self.commands.allow:
            specs.append(COMMAND_TOOL)
        return specs

    def call(
        self, name: str, args: Mapping[str, Any], *, time_left: float | None = None
    ) -> ToolOutcome:
        handlers: dict[str, Callable[[Mapping[str, Any]], ToolOutcome]] = {
            "read_file": self._read_file,
            "list_dir": self._list_dir,
            "search": self._search,
        }
        if self.access is Access.EDIT:
            handlers["write_file"] = self._write_file
            handlers["edit_file"] = self._edit_file
        if self.commands is not None and self.commands.allow:
            handlers["run_command"] = lambda a: self._run_command(a, time_left)
        handler = handlers.get(name)
        if handler is None:
            known = ", ".join(sorted(handlers))
            reason = "this phase is read-only" if name in ("write_file", "edit_file") else ""
            return ToolOutcome(
                f"tool {name!r} is not available{': ' + reason if reason else ''} "
                f"(available: {known})",
                is_error=True,
            )
        try:
            outcome = handler(args)
        except ToolRefused as exc:
            return ToolOutcome(f"refused: {exc}", is_error=True)
        except OSError as exc:
            return ToolOutcome(f"error: {exc.strerror or type(exc).__name__}", is_error=True)
        except UnicodeError:
            return ToolOutcome("error: the file is not UTF-8 text", is_error=True)
        if outcome.changed and outcome.changed not in self.files_changed:
            self.files_changed.append(outcome.changed)
        return outcome

    # --- handlers ---------------------------------------------------------------------------

    def _read_file(self, args: Mapping[str, Any]) -> ToolOutcome:
        path = self.workspace.resolve(args.get("path"))
        if not path.is_file():
            raise ToolRefused(f"{args.get('path')!r} is not a file")
        data = path.read_bytes()
        if b"\x00" in data[:8192]:
            raise ToolRefused(f"{args.get('path')!r} is a binary file")
        return ToolOutcome(truncate(data.decode("utf-8", "replace"), self.max_read_chars))

    def _list_dir(self, args: Mapping[str, Any]) -> ToolOutcome:
        path = self.workspace.resolve(args.get("path", "."))
        if not path.is_dir():
            raise ToolRefused(f"{args.get('path', '.')!r} is not a folder")
        entries = sorted(
            (e.name + ("/" if e.is_dir() else "")) for e in path.iterdir() if e.name != ".git"
        )
        shown = entries[:_MAX_LIST_ENTRIES]
        more = len(entries) - len(shown)
        text = "\n".join(shown) + (f"\n… {more} more" if more else "")
        return ToolOutcome(text or "(empty folder)")

    def _search(self, args: Mapping[str, Any]) -> ToolOutcome:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolRefused("pattern must be a non-empty string")
        if args.get("regex"):
            try:
                matcher = re.compile(pattern)
            except re.error as exc:
                raise ToolRefused(f"invalid regex: {exc}") from None

            def found(line: str) -> bool:
                return matcher.search(line) is not None
        else:

            def found(line: str) -> bool:
                return pattern in line

        base = self.workspace.resolve(args.get("path", "."))
        hits: list[str] = []
        for file in self._files_under(base):
            for number, line in enumerate(file.read_text("utf-8", "replace").splitlines(), 1):
                if found(line):
                    hits.append(f"{self.workspace.relative(file)}:{number}: {line[:300]}")
                    if len(hits) >= _MAX_SEARCH_HITS:
                        return ToolOutcome("\n".join(hits) + "\n… (more matches not shown)")
        return ToolOutcome("\n".join(hits) or "no matches")

    def _files_under(self, base: Path) -> list[Path]:
        if base.is_file():
            return [base]
        found: list[Path] = []
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                path = Path(folder) / name
                try:
                    real = path.resolve()
                    if not real.is_relative_to(self.workspace.root) or not real.is_file():
                        continue
                    if real.stat().st_size > _MAX_SEARCH_FILE_BYTES:
                        continue
                    with real.open("rb") as fh:
                        if b"\x00" in fh.read(4096):
                            continue
                except OSError:
                    continue
                found.append(path)
        return found

    def _write_file(self, args: Mapping[str, Any]) -> ToolOutcome:
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolRefused("content must be a string")
        path = self.workspace.resolve(args.get("path"), write=True)
        if path.is_dir():
            raise ToolRefused(f"{args.get('path')!r} is a folder")
        self._write(path, content)
        rel = self.workspace.relative(path)
        return ToolOutcome(f"wrote {rel} ({len(content)} characters)", changed=rel)

    def _edit_file(self, args: Mapping[str, Any]) -> ToolOutcome:
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolRefused("old_string (non-empty) and new_string must be strings")
        path = self.workspace.resolve(args.get("path"), write=True)
        if not path.is_file():
            raise ToolRefused(f"{args.get('path')!r} does not exist; use write_file to create it")
        text = path.read_text("utf-8")
        count = text.count(old)
        if count != 1:
            raise ToolRefused(
                f"old_string occurs {count} times in {args.get('path')!r}; it must occur exactly "
                "once (include more surrounding lines)"
            )
        self._write(path, text.replace(old, new, 1))
        rel = self.workspace.relative(path)
        return ToolOutcome(f"edited {rel}", changed=rel)

    def _write(self, path: Path, content: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The resolved path has no symlink left; O_NOFOLLOW refuses one planted since.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)

    def _run_command(self, args: Mapping[str, Any], time_left: float | None) -> ToolOutcome:
        assert self.commands is not None
        argv = args.get("argv")
        if isinstance(argv, str):
            raise ToolRefused('argv must be a list of strings, e.g. ["pytest", "-q"]')
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ToolRefused("argv must be a non-empty list of strings")
        if not self.commands.allows(argv):
            allowed = "; ".join(shlex.join(p) for p in self.commands.allow)
            raise ToolRefused(f"{shlex.join(argv)!r} is not in the allow-list ({allowed})")
        timeout = self.commands.timeout
        if time_left is not None:
            timeout = max(0.1, min(timeout, time_left))
        try:
            code, output = run_confined(
                argv,
                cwd=self.workspace.root,
                timeout=timeout,
                max_output_chars=self.commands.max_output_chars,
                sandbox=self.sandbox,
            )
        except FileNotFoundError:
            raise ToolRefused(f"{argv[0]!r} is not installed here") from None
        if code is None:
            return ToolOutcome(f"timed out after {timeout:g}s\n{output}", is_error=True)
        return ToolOutcome(f"exit code {code}\n{output}", is_error=code != 0)


# --- building from settings -----------------------------------------------------------------


def _allow_list(raw: Any) -> tuple[tuple[str, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidInputError(
            "ai.tools.allow_commands must be a list of commands",
            hint='e.g. allow_commands: ["pytest", "npm test"]',
        )
    out: list[tuple[str, ...]] = []
    for item in raw:
        if isinstance(item, str):
            parts = tuple(shlex.split(item))
        elif isinstance(item, list) and all(isinstance(x, str) for x in item):
            parts = tuple(item)
        else:
            raise InvalidInputError(
                f"ai.tools.allow_commands: {item!r} is not a command line or an argument list"
            )
        if parts:
            out.append(parts)
    return tuple(out)


def _positive(value: Any, name: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidInputError(f"ai.tools.{name} must be a number > 0, got {value!r}")
    return float(value)


def command_policy(settings: Mapping[str, Any], phase: Phase) -> CommandPolicy | None:
    """The `run_command` policy for `phase` from `ai.tools`, or None when it gets none."""
    tools = settings.get("tools") or {}
    if not isinstance(tools, Mapping):
        raise InvalidInputError("ai.tools must be a mapping")
    allow = _allow_list(tools.get("allow_commands"))
    phases = tools.get("command_phases", [Phase.IMPLEMENT.value, Phase.REWORK.value])
    if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
        raise InvalidInputError("ai.tools.command_phases must be a list of phase names")
    if not allow or phase.value not in phases:
        return None
    return CommandPolicy(
        allow=allow,
        timeout=_positive(tools.get("command_timeout"), "command_timeout", 120.0),
        max_output_chars=int(_positive(tools.get("max_output_chars"), "max_output_chars", 20_000)),
    )


def toolbox_for(request: ProviderRequest, settings: Mapping[str, Any]) -> ToolBox:
    """The tools of `request`'s phase: read tools always, edit tools for EDIT access."""
    return ToolBox(
        workspace=ToolRoot(request.workspace),
        access=request.access,
        commands=command_policy(settings, request.phase),
        sandbox=None if request.sandbox is None else request.sandbox.for_step("tools"),
    )
