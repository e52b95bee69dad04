"""Install each real agent CLI once, pinned, into a cache folder shared by every test run.

The folder is `$AI_SDLC_TEST_TOOLS` or `~/.cache/ai-sdlc-tests/tools`; each tool lives in
`<name>-<version>/` and is complete once its `.ready` file exists, so an install that was killed
half-way is started again. A file lock serialises xdist workers that ask for the same tool.
Only an unreachable registry makes a test skip (with the reason); any other failure fails it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Tool:
    name: str
    registry: str  # "npm" or "pip"
    package: str
    version: str
    executable: str  # path inside the tool's folder


#: The versions the README names; change them together.
TOOLS = {
    "claude": Tool(
        "claude", "npm", "@anthropic-ai/claude-code", "2.1.332", "node_modules/.bin/claude"
    ),
    "codex": Tool("codex", "npm", "@openai/codex", "0.169.0", "node_modules/.bin/codex"),
    "gemini": Tool("gemini", "npm", "@google/gemini-cli", "0.61.0", "node_modules/.bin/gemini"),
    "aider": Tool("aider", "pip", "aider-chat", "0.86.2", "venv/bin/aider"),
}
#: Not agents: uv installs ai-sdlc the way its users' uv does (hard links from its cache), for
#: tests/e2e/test_uv_installed.py (issue 32).
HELPERS = {"uv": Tool("uv", "pip", "uv", "0.13.9", "venv/bin/uv")}

_OFFLINE_SIGNS = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ETIMEDOUT",
    "network",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "No matching distribution found",
    "Could not find a version that satisfies",
)


def cache_root() -> Path:
    configured = os.environ.get("AI_SDLC_TEST_TOOLS")
    return Path(configured) if configured else Path.home() / ".cache" / "ai-sdlc-tests" / "tools"


def _install(tool: Tool, folder: Path) -> subprocess.CompletedProcess[str]:
    if tool.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"{tool.name}: npm is not installed, so {tool.package} cannot be installed")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"private": true}\n')
        return subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{tool.package}@{tool.version}",
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=900,
        )
    subprocess.run(
        [sys.executable, "-m", "venv", str(folder / "venv")], check=True, capture_output=True
    )
    return subprocess.run(
        [
            str(folder / "venv/bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            f"{tool.package}=={tool.version}",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )


def once_per_machine(name: str, fill: Callable[[Path], None]) -> Path:
    """`<cache>/name`, made by `fill(folder)` the first time a test run on this machine asks
    for it: complete once its `.ready` exists (a fill killed half-way is started again), a file
    lock serialising xdist workers, nothing left of a fill that failed or skipped."""
    folder = cache_root() / name
    ready = folder / ".ready"
    if ready.exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            shutil.rmtree(folder, ignore_errors=True)
            try:
                fill(folder)
            except BaseException:  # pytest's skip and fail too
                shutil.rmtree(folder, ignore_errors=True)
                raise
            ready.touch()
    return folder


def tool_path(name: str) -> Path:
    """The executable of the pinned tool `name`, installing it first if needed."""
    tool = TOOLS[name] if name in TOOLS else HELPERS[name]

    def install(folder: Path) -> None:
        done = _install(tool, folder)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            if any(sign in output for sign in _OFFLINE_SIGNS):
                pytest.skip(
                    f"{tool.name}: the {tool.registry} registry cannot be reached: {output[-300:]}"
                )
            pytest.fail(f"installing {tool.package}=={tool.version} failed:\n{output[-2000:]}")
        if not (folder / tool.executable).exists():
            pytest.fail(f"{tool.package}=={tool.version} installed no {tool.executable}")

    return once_per_machine(f"{tool.name}-{tool.version}", install) / tool.executable


#: What each install takes on disk (measured on 2026-11-29), for the message before it starts.
SIZES = {"claude": "384 MB", "codex": "404 MB", "gemini": "100 MB", "aider": "687 MB"}


def main() -> int:
    """`make agent-clis` (and the start of `make test`): install what is missing, saying so."""
    failed = 0
    for name, tool in TOOLS.items():
        folder = cache_root() / f"{tool.name}-{tool.version}"
        if (folder / ".ready").exists():
            print(f"agent CLIs: {tool.package} {tool.version} cached in {folder}", file=sys.stderr)
            continue
        print(
            f"agent CLIs: installing {tool.package} {tool.version} from {tool.registry} "
            f"(about {SIZES[name]}) into {folder} ...",
            file=sys.stderr,
            flush=True,
        )
        try:
            tool_path(name)
        except pytest.skip.Exception as skipped:
            print(f"agent CLIs: {skipped.msg}; its tests will be skipped", file=sys.stderr)
        except pytest.fail.Exception as error:
            print(f"agent CLIs: {error.msg}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
