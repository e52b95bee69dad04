"""New test files that keep a test-first base from building, and setting them aside.

A test-first Go or Rust story starts with a test that names a function that does not exist
yet: the whole package (Go) or test target (Rust) then fails to compile and the base's run
counts nothing, so it would give no pass-count floor. A JavaScript test that requires a
module the story adds (`require('../mul.js')`) stops runners such as uvu or tape before
they count anything, the same way. The judge runs the base again in a scratch tree of its
own without these files (`judge.Judge._set_aside`); only files the compiler or Node names,
that are test files by their ecosystem's own convention (`*_test.go`, a Rust integration
test under `tests/`, a `*.test.js` or a script under `test/`), and that lie inside the tree
are ever removed. A missing package (`require('lodash')`) is a broken set-up, never a
test-first base: only a missing module of the project's own (a relative or in-tree path)
counts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from ai_sdlc.verify.failures import GO_COMPILE
from ai_sdlc.verify.normalise import strip_ansi

#: Runs of the base without its unbuilt tests (each can reveal more of them: Go stops at ten
#: errors per package).
ROUNDS = 3
_RUST_HEAD = re.compile(r"^(error|warning)(?:\[\w+\])?: ")
_RUST_AT = re.compile(r"^\s*--> (\S+\.rs):\d+:\d+\s*$")
#: Node's CommonJS `Cannot find module '../mul.js'`, followed by `Require stack:` and
#: `- /abs/test/mul.test.js` (the requiring file first); ESM's `Cannot find module
#: '/abs/mul.mjs' imported from /abs/test/mul.test.mjs`; Jest's `Cannot find module '../mul'
#: from 'test/mul.test.js'`.
_NODE_MISSING = re.compile(r"Cannot find module '([^']+)'(?: imported from (\S+)| from '([^']+)')?")
_NODE_STACK = re.compile(r"^- (\S.*)$")
_JS_SUFFIXES = (".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx")
_JS_TEST_FOLDERS = {"test", "tests", "__tests__", "spec"}


def _is_test_file(name: str) -> bool:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        return False
    if path.name.endswith("_test.go"):
        return True
    if path.suffix in _JS_SUFFIXES and "node_modules" not in path.parts:
        stem = path.name.removesuffix(path.suffix)
        if stem.endswith((".test", ".spec")) or _JS_TEST_FOLDERS & set(path.parts[:-1]):
            return True
    return path.suffix == ".rs" and "tests" in path.parts[:-1]


def _inside(name: str, where: Path | None) -> str | None:
    """`name` relative to `where` (the folder the command ran in); None: outside it."""
    path = PurePosixPath(name)
    if not path.is_absolute():
        return name
    if where is None:
        return None
    for top in (PurePosixPath(os.path.abspath(where)), PurePosixPath(os.path.realpath(where))):
        if path.is_relative_to(top):  # Node prints real paths; `where` may hold a symlink
            return str(path.relative_to(top))
    return None


def _node_unbuilt(lines: list[str], where: Path | None) -> list[str]:
    """The test files that require a module of the project's own that is not there."""
    found: list[str] = []
    for index, line in enumerate(lines):
        missing = _NODE_MISSING.search(line)
        if missing is None:
            continue
        module, esm_from, jest_from = missing.groups()
        if not module.startswith((".", "/")) or (
            module.startswith("/") and _inside(module, where) is None
        ):
            continue  # a package (`lodash`), or a file outside the project: not the story's
        requirer = esm_from or jest_from
        if requirer is None:
            stack = lines[index + 1 : index + 4]
            if stack and stack[0].strip() == "Require stack:" and len(stack) > 1:
                entry = _NODE_STACK.match(stack[1].strip())
                requirer = entry.group(1) if entry is not None else None
        if requirer is not None:
            relative = _inside(requirer, where)
            if relative is not None:
                found.append(relative)
    return found


def unbuilt_tests(output: str, where: Path | None = None) -> list[str]:
    """The test files a compiler error names (relative to `where`, the folder the command ran
    in), in order: Go's `./is_test.go:6:6: undefined: IsPalindrome`, the `--> tests/pal.rs:3:5`
    of a Rust `error[…]` (never of a warning), the JavaScript test that requires a module of
    the project that is not there yet."""
    found: list[str] = []
    heading = ""
    lines = [raw.rstrip() for raw in strip_ansi(output).replace("\r\n", "\n").split("\n")]
    for line in lines:
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
    found.extend(_node_unbuilt(lines, where))
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
