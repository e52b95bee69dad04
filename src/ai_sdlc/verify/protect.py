"""Tests kept as they were: which of the base's test files an attempt changed, and running
the base's versions of them against the attempt's code.

Patterns are gitignore-like: one without a `/` matches a file name (or a folder name, written
`name/`) in any folder; one with a `/` is anchored at the project folder. The base versions are
put in place for one verification and the agent's versions put back afterwards; the agent's
versions are saved first (`.ai-sdlc/state/protected/<key>/`, with a manifest written last), so a
run killed in between loses nothing: `restore_pending` puts them back before anything else.
"""

from __future__ import annotations

import configparser
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ai_sdlc.fsutil import atomic_write_bytes, atomic_write_text
from ai_sdlc.git.run import clean_env, git_options

T = TypeVar("T")

#: `verify.protected` when unset: the test folders and files, and the test configuration, that
#: the project already has (only files that exist at the story's base are ever protected).
DEFAULT_PROTECTED: tuple[str, ...] = (
    "tests/",
    "test/",
    "__tests__/",
    "spec/",
    "test_*.py",
    "*_test.*",
    "*.test.*",
    "*.spec.*",
    "conftest.py",
    "pytest.ini",
    "jest.config.*",
    "vitest.config.*",
    ".mocharc*",
)
#: Shared files whose test section is protected (the rest of the file is the project's to
#: change: dependencies, metadata): file → how to read the section.
_SECTIONS = {
    "pyproject.toml": "[tool.pytest.ini_options]",
    "setup.cfg": "[tool:pytest]",
    "tox.ini": "[pytest]",
    "package.json": '"jest"',
}
#: Test configuration among the protected files: one the attempt *adds* (a new conftest.py can
#: ignore, deselect or forge the base's tests) gets the base's suite run again without it.
CONFIG_NAMES: tuple[str, ...] = (
    "conftest.py",
    "pytest.ini",
    "jest.config.*",
    "vitest.config.*",
    ".mocharc*",
)
#: Files Python runs at interpreter start, from anywhere on the path (`src/sitecustomize.py`
#: through an editable install) or a site folder: one the change adds, anywhere, runs inside
#: the test process, so it counts as added test configuration whatever `verify.protected` says.
STARTUP_NAMES: tuple[str, ...] = ("sitecustomize.py", "usercustomize.py", "*.pth")
GIT_TIMEOUT = 120.0


@functools.cache
def _compile(pattern: str) -> re.Pattern[str]:
    folder = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = "/" in body
    out = ""
    index = 0
    while index < len(body):
        if body.startswith("**/", index):
            out += "(?:.*/)?"
            index += 3
        elif body.startswith("**", index):
            out += ".*"
            index += 2
        elif body[index] == "*":
            out += "[^/]*"
            index += 1
        elif body[index] == "?":
            out += "[^/]"
            index += 1
        else:
            out += re.escape(body[index])
            index += 1
    prefix = "" if anchored else "(?:.*/)?"
    suffix = "/.*" if folder else ""
    return re.compile(f"{prefix}{out}{suffix}")


def matches(path: str, patterns: Sequence[str]) -> bool:
    """Whether the project-relative posix `path` is covered by one of `patterns`."""
    return any(_compile(p).fullmatch(path) for p in patterns if p.strip())


def _git(cwd: Path, *args: str) -> bytes:
    done = subprocess.run(
        ["git", *git_options(cwd), *args],  # hardened; a story worktree's own git folder
        cwd=cwd,
        env=clean_env({"GIT_OPTIONAL_LOCKS": "0"}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=GIT_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise OSError(f"git {args[0]} failed in {cwd}: {message}")
    return done.stdout


def git_bytes(cwd: Path, *args: str) -> bytes:
    """A hardened git call's output in `cwd` (OSError when git fails)."""
    return _git(cwd, *args)


def changed_files(path: Path, base: str) -> list[tuple[str, str]]:
    """(status letter, project-relative path) of every file that differs from `base` in the
    work tree at `path` (committed or not; renames as a delete and an add)."""
    out = _git(path, "diff", "--no-renames", "--name-status", "-z", "--relative", base, "--")
    fields = [os.fsdecode(f) for f in out.split(b"\0") if f]
    return [(fields[i][:1], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


def base_version(path: Path, base: str, relative: str) -> bytes | None:
    """The file's bytes at `base` (None when it did not exist there)."""
    try:
        return _git(path, "show", f"{base}:./{relative}")
    except OSError:
        return None


def protected_changes(
    path: Path,
    base: str,
    patterns: Sequence[str],
    changed: Sequence[tuple[str, str]] | None = None,
) -> tuple[list[str], list[str]]:
    """(base files covered by `patterns` the attempt changed or deleted, shared files whose test
    section it changed). `changed`: `changed_files(path, base)` when the caller has it."""
    files: list[str] = []
    sections: list[str] = []
    for status, relative in changed_files(path, base) if changed is None else changed:
        if status == "A":
            continue  # new: not the base's
        if matches(relative, patterns):
            files.append(relative)
        elif Path(relative).name in _SECTIONS and _section_changed(path, base, relative):
            sections.append(f"{relative} {_SECTIONS[Path(relative).name]}")
    return files, sections


def added_configuration(
    path: Path,
    base: str,
    patterns: Sequence[str],
    changed: Sequence[tuple[str, str]] | None = None,
    untracked: Sequence[tuple[str, str]] | None = None,
) -> tuple[list[str], list[str]]:
    """(test configuration the attempt added: new config files covered by `patterns`, new
    interpreter start-up files anywhere (`STARTUP_NAMES`) and shared files that gained a test
    section; the other new files covered by `patterns`, the new tests that may rely on it).
    Both are absent from, or sectionless in, the base. `changed`, `untracked`: the tree's
    changes and its new untracked files ("A", path), when the caller has them."""
    config: list[str] = []
    added: list[str] = []
    if untracked is None:  # not in `git diff`
        out = _git(path, "ls-files", "--others", "--exclude-standard", "-z", "--", ".")
        untracked = [("A", os.fsdecode(f)) for f in out.split(b"\0") if f]
    if changed is None:
        changed = changed_files(path, base)
    for status, relative in [*changed, *untracked]:
        name = Path(relative).name
        if status == "A" and matches(name, STARTUP_NAMES):
            config.append(relative)
        elif status == "A" and matches(relative, patterns):
            (config if matches(name, CONFIG_NAMES) else added).append(relative)
        elif name in _SECTIONS and status != "D" and _section_added(path, base, relative):
            config.append(relative)
    return config, added


def startup_files(paths: Sequence[str]) -> list[str]:
    """Those of `paths` that Python runs at interpreter start (`STARTUP_NAMES`)."""
    return [p for p in paths if matches(Path(p).name, STARTUP_NAMES)]


def _section(name: str, data: bytes | None) -> Any:
    if data is None:
        return None
    text = data.decode("utf-8", "replace")
    try:
        if name == "pyproject.toml":
            return tomllib.loads(text).get("tool", {}).get("pytest")
        if name == "package.json":
            loaded = json.loads(text)
            return loaded.get("jest") if isinstance(loaded, dict) else None
        parser = configparser.RawConfigParser()
        parser.read_string(text)
        section = "tool:pytest" if name == "setup.cfg" else "pytest"
        return dict(parser[section]) if parser.has_section(section) else None
    except (ValueError, configparser.Error):
        return "unreadable"


def _section_changed(path: Path, base: str, relative: str) -> bool:
    name = Path(relative).name
    before = _section(name, base_version(path, base, relative))
    try:
        now: bytes | None = (path / relative).read_bytes()
    except OSError:
        now = None
    return before is not None and _section(name, now) != before


def _section_added(path: Path, base: str, relative: str) -> bool:
    name = Path(relative).name
    if _section(name, base_version(path, base, relative)) is not None:
        return False
    try:
        return _section(name, (path / relative).read_bytes()) is not None
    except OSError:
        return False


def linked_folder(path: Path, relative: str) -> str | None:
    """The folder on the way to `relative` that is a symlink (the agent could point it outside
    the work tree: nothing is ever written through it), or None."""
    current = path
    for part in Path(relative).parts[:-1]:
        current = current / part
        if current.is_symlink():
            return current.relative_to(path).as_posix()
    return None


@contextmanager
def base_versions_in_place(
    path: Path, base: str, relatives: Sequence[str], state: Path
) -> Iterator[None]:
    """The base's versions of `relatives` in the work tree for the body of the `with`; the
    agent's versions (or their absence) are saved in `state` first and always put back."""
    linked = [f for f in relatives if linked_folder(path, f) is not None]
    if linked:
        raise OSError(f"{linked[0]}: a folder on its way is a symlink; nothing written through it")
    saved = state / _key(path)
    restore_pending(path, state)
    if saved.exists():
        shutil.rmtree(saved)
    saved.mkdir(parents=True)
    manifest: dict[str, Any] = {"worktree": str(path), "files": {}}
    for index, relative in enumerate(relatives):
        target = path / relative
        entry: dict[str, Any] = {"copy": None, "mode": None}
        if target.is_symlink():
            entry = {"copy": None, "mode": None, "link": os.readlink(target)}
        elif target.is_file():
            copy = saved / str(index)
            shutil.copy2(target, copy)
            entry = {"copy": str(index), "mode": target.stat().st_mode & 0o7777}
        elif target.exists():
            raise IsADirectoryError(f"{relative} is now a folder: its base version cannot be run")
        manifest["files"][relative] = entry
    atomic_write_text(saved / "manifest.json", json.dumps(manifest))  # the point of no loss
    try:
        for relative in relatives:
            data = base_version(path, base, relative)
            target = path / relative
            if data is None:
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()  # saved above; `atomic_write_bytes` must not follow it
            atomic_write_bytes(target, data)
        yield
    finally:
        restore_pending(path, state)


def restore_pending(path: Path, state: Path) -> list[str]:
    """Put back the agent's versions saved by a `base_versions_in_place` that did not finish
    (the process was killed); returns the paths restored."""
    saved = state / _key(path)
    manifest_file = saved / "manifest.json"
    if not manifest_file.is_file():
        if saved.exists():
            shutil.rmtree(saved, ignore_errors=True)  # saved, never put in place
        return []
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    restored: list[str] = []
    for relative, entry in dict(manifest.get("files") or {}).items():
        target = path / relative
        copy = entry.get("copy")
        if copy is None:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            if entry.get("link") is not None:
                os.symlink(str(entry["link"]), target)
        else:
            atomic_write_bytes(target, (saved / copy).read_bytes())
            os.chmod(target, int(entry.get("mode") or 0o644))
        restored.append(relative)
    manifest_file.unlink()
    shutil.rmtree(saved, ignore_errors=True)
    return restored


def _key(path: Path) -> str:
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def pathspecs(patterns: Sequence[str]) -> list[str]:
    """`patterns` as git pathspecs relative to the project folder (same matches)."""
    specs: list[str] = []
    for pattern in patterns:
        body = pattern.strip().strip("/")
        if not body:
            continue
        anchored = "/" in body
        spec = body if anchored else f"**/{body}"
        if pattern.strip().endswith("/"):
            spec += "/**"
        specs.append(f":(glob){spec}")
    return specs


def diff_of_tests(
    path: Path, base: str, patterns: Sequence[str], limit: int = 4000, extra: Sequence[str] = ()
) -> str:
    """The change's diff of test files (and of the `extra` files: the held files it changed)
    against `base` (committed or not): its stat, then the patch; at most `limit` characters
    (for the review prompt and the report). One git call."""
    specs = pathspecs(patterns) + [f":(literal){f.rstrip('/')}" for f in extra]
    if not specs:
        return ""
    diff = _git(path, "diff", "--stat", "--patch", "--relative", base, "--", *specs)
    text = diff.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 30] + "\n[... test diff truncated ...]\n"


def run_quietly(fn: Callable[[], T]) -> T | None:
    """`fn()`, or None when git could not answer (no diff to show is better than a crash)."""
    try:
        return fn()
    except (OSError, subprocess.SubprocessError):
        return None
