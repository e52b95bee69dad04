"""New test files that keep a test-first base from building, and setting them aside.

A test-first Go or Rust story starts with a test that names a function that does not exist
yet: the whole package (Go) or test target (Rust) then fails to compile and the base's run
counts nothing, so it would give no pass-count floor. The judge runs the base again in a
scratch tree of its own without these files (`judge.Judge._set_aside`); only files the
compiler names, that are test files by their ecosystem's own convention (`*_test.go`, a Rust
integration test under `tests/`), and that lie inside the tree are ever removed.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from ai_sdlc.verify.failures import GO_COMPILE
from ai_sdlc.verify.normalise import strip_ansi

#: Runs of the base without its unbuilt tests (each can reveal more of them: Go stops at ten
#: errors per package).
ROUNDS = 3
_RUST_HEAD = re.compile(r"^(error|warning)(?:\[\w+\])?: ")
_RUST_AT = re.compile(r"^\s*--> (\S+\.rs):\d+:\d+\s*$")


def _is_test_file(name: str) -> bool:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        return False
    if path.name.endswith("_test.go"):
        return True
    return path.suffix == ".rs" and "tests" in path.parts[:-1]


def unbuilt_tests(output: str) -> list[str]:
    """The test files a compiler error names (relative to where the command ran), in order:
    Go's `./is_test.go:6:6: undefined: IsPalindrome`, the `--> tests/pal.rs:3:5` of a Rust
    `error[…]` (never of a warning)."""
    found: list[str] = []
    heading = ""
    for raw in strip_ansi(output).replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        go = GO_COMPILE.match(line.strip())
        if go is not None:
            found.append(go.group(1))
            continue
        head = _RUST_HEAD.match(line)
        if head is not None:
            heading = head.group(1)
            continue
        at = _RUST_AT.match(line)
        if at is not None and heading == "error":
            found.append(at.group(1))
    names = [str(PurePosixPath(n)) for n in found]  # `./is_test.go` → `is_test.go`
    return [n for n in dict.fromkeys(names) if _is_test_file(n)]


def remove(tree: Path, files: list[str]) -> list[str]:
    """Delete those of `files` that are regular files inside `tree` (a scratch checkout);
    the ones removed, in order."""
    removed: list[str] = []
    top = tree.resolve()
    for name in files:
        if not _is_test_file(name):
            continue
        target = tree / name
        if target.is_symlink() or not target.is_file():
            continue
        if not target.resolve().is_relative_to(top):
            continue
        target.unlink()
        removed.append(name)
    return removed
