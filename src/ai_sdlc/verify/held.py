"""What decides the verdict, held as it was at the story's base: a change to it is a failed
attempt that names the file, whatever the tests then say.

The story's own code and tests may change; what *runs* them may not: the verify command's
definition (`package.json` scripts it runs, a `Makefile`/`justfile` it runs, `tox.ini`,
`noxfile.py`, pyproject's `[tool.hatch.envs]`/`[tool.pdm.scripts]`/`[tool.tox]`, Cargo's test
harness settings, `.cargo/config.toml`, `go.mod`'s `tool`/`toolchain` lines, `.npmrc`), test
entry points (Go's `TestMain` and `init` in `*_test.go`, jest/vitest/mocha/ava set-up files)
and modules that shadow the runner (`pytest.py`, `_pytest/`, `pluggy/`, `unittest.py`, the
module run with `-m`, at the project folder or `src/`, any `node_modules/` folder of the
change, or a `package.json` renamed after the runner, which then serves the runner's imports
from its own `exports`), and entry points there (`*.dist-info/entry_points.txt`: pytest loads
the plugins they name). Git-ignored files count too: `go test` and Python read them, the
diff does not show them. The runner's installed code in the worktree's environment is held by
`worktree_env.envdigest`. `verify.protected` (the base's tests, run again in their base
versions) is `protect`'s.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ai_sdlc.verify.protect import (
    CONFIG_NAMES,
    STARTUP_NAMES,
    base_version,
    changed_files,
    git_bytes,
    matches,
)

#: Modules of Python's test runners, their plugin machinery and the packages pytest imports
#: (`pygments` at start; `packaging`, `exceptiongroup`, `tomli`, `colorama` when it needs
#: them): one of these the change adds where Python imports from (the project folder, `src/`,
#: which an editable install puts before the installed packages) runs inside the runner.
RUNNER_MODULES: tuple[str, ...] = (
    "pytest",
    "_pytest",
    "pluggy",
    "py",
    "iniconfig",
    "pygments",
    "packaging",
    "exceptiongroup",
    "tomli",
    "colorama",
    "unittest",
    "nose2",
    "xdist",
    "pytest_*",
)
#: Where a Python module shadows: `-m` puts the working folder first on `sys.path`, and an
#: editable install (or the layered venv) puts `src/` before the installed packages.
SOURCE_ROOTS: tuple[str, ...] = ("", "src/")
#: Files held whole wherever they are: test runners' set-up and configuration a test run loads
#: (the base's own `jest.config.*` & co. are also `verify.protected`), and Babel's config, which
#: Jest compiles the tests with (a plugin can strip every `expect`).
SETUP_FILES: tuple[str, ...] = (
    "jest.setup.*",
    "jest.preset.*",
    "vitest.setup.*",
    "vitest.workspace.*",
    "setupTests.*",
    "ava.config.*",
    ".c8rc*",
    ".nycrc*",
    ".taprc",
    "karma.conf.*",
    "babel.config.*",
    ".babelrc",
    ".babelrc.*",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    ".cargo/config",
    ".cargo/config.toml",
    "rust-toolchain",
    "rust-toolchain.toml",
)
#: Files that define a verify command when it runs their program: program → file patterns.
PROGRAM_FILES: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile", "*.mk"),
    "just": ("justfile", "Justfile", ".justfile"),
    "tox": ("tox.ini",),
    "nox": ("noxfile.py",),
    "npm": (".npmrc",),
    "npx": (".npmrc",),
    "yarn": (".npmrc", ".yarnrc", ".yarnrc.yml"),
    "pnpm": (".npmrc", "pnpm-workspace.yaml"),
}
#: `package.json` keys read by test runners (besides `scripts`); `babel`: Jest compiles the
#: tests with the project's Babel config, whose plugins can rewrite them.
PACKAGE_KEYS: tuple[str, ...] = ("jest", "mocha", "ava", "c8", "nyc", "tap", "babel")
#: `package.json`'s own name: Node resolves a package's imports of its own name from its
#: `exports` before `node_modules`, so a package renamed `uvu` serves `uvu/assert` itself.
PACKAGE_SELF = "name"
#: pyproject.toml tables that define how tests run (`tool.pytest` is `protect`'s).
PYPROJECT_TABLES: tuple[tuple[str, ...], ...] = (
    ("tool", "hatch", "envs"),
    ("tool", "pdm", "scripts"),
    ("tool", "tox"),
    ("tool", "nox"),
)
_GO_ENTRY = re.compile(r"^func\s+(TestMain|init)\s*\(", re.MULTILINE)
_NPM_LIKE = ("npm", "pnpm", "yarn", "bun")


def held_changes(
    path: Path,
    base: str,
    commands: Sequence[tuple[str, str]],
    changes: Sequence[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """What the change (committed, uncommitted, untracked or git-ignored) alters of what decides
    the verdict: (file, what of it), e.g. ("package.json", "scripts.test"), ("pytest.py",
    "shadows the test runner's module pytest"), ("main_test.go", "func TestMain"), ("Makefile",
    ""), in the order found; `describe` says one. `changes`: the tree's changes as
    `changed_files` + `untracked` list them, when the caller has them already (each is a git
    process)."""
    argvs = [_split(line) for _, line in commands]
    programs = {PurePosixPath(a[0]).name for a in argvs if a}
    whole = SETUP_FILES + tuple(f for p in sorted(programs) for f in PROGRAM_FILES.get(p, ()))
    shadows = RUNNER_MODULES + tuple(_run_modules(argvs))
    if changes is None:
        changes = [*changed_files(path, base), *untracked(path)]
    found: list[tuple[str, str]] = []
    for status, relative in changes:
        found += _judged(path, base, status, relative, whole, shadows, argvs)
    return list(dict.fromkeys(found))


def _judged(
    path: Path,
    base: str,
    status: str,
    relative: str,
    whole: Sequence[str],
    shadows: Sequence[str],
    argvs: Sequence[Sequence[str]],
) -> list[tuple[str, str]]:
    name = PurePosixPath(relative).name
    parts = PurePosixPath(relative).parts
    if relative.endswith("/"):  # a git-ignored folder: a package of a runner's module?
        if _nested_modules(path, base, relative):
            return [(relative, _NESTED)]
        points = relative + "entry_points.txt"
        if _metadata(points) and b"[pytest11]" in (_read(path / points) or b""):
            return [(points, _ENTRY_POINTS)]
        module = _shadowed(relative + "__init__.py", shadows)
        return (
            [] if module is None else [(relative, f"(shadows the test runner's module {module})")]
        )
    if "node_modules" in parts[:-1]:
        return [(relative, "(a node_modules package, loaded instead of the installed one)")]
    module = _shadowed(relative, shadows)
    if module is not None and not _own_module(path, base, relative, module):
        return [(relative, f"(shadows the test runner's module {module})")]
    if _metadata(relative):
        return [(relative, _ENTRY_POINTS)]
    if matches(relative, whole):
        return [(relative, "")]
    if status == "I" and matches(name, (*CONFIG_NAMES, *STARTUP_NAMES)):
        # `verify.protected` sees only what git shows; an ignored one still runs
        return [(relative, "(test configuration git ignores)")]
    if name.endswith("_test.go"):
        return [(relative, f"func {f}") for f in _go_entries(path, base, relative, status)]
    reader = _SHARED.get(name)
    if reader is None:
        return []
    before = reader(base_version(path, base, relative), argvs)
    now = reader(_read(path / relative), argvs)
    keys = sorted(before.keys() | now.keys())
    return [(relative, key) for key in keys if before.get(key) != now.get(key)]


_NESTED = "(a node_modules folder, loaded before the installed packages)"
_ENTRY_POINTS = "(entry points where Python imports from: pytest loads the plugins they name)"


def _metadata(relative: str) -> bool:
    """Whether `relative` is the `entry_points.txt` of a package's metadata (`*.dist-info`,
    `*.egg-info`) at a source root: every distribution on `sys.path` is read there, and pytest
    loads each `pytest11` plugin it names, which runs before any test."""
    for root in SOURCE_ROOTS:
        if not relative.startswith(root):
            continue
        rest = PurePosixPath(relative[len(root) :]).parts
        if (
            len(rest) == 2
            and rest[0].endswith((".dist-info", ".egg-info"))
            and rest[1] == "entry_points.txt"
        ):
            return True
    return False


def _nested_modules(path: Path, base: str, folder: str) -> bool:
    """Whether the git-ignored `folder` is a `node_modules/` below the project's own (which
    the environment digest holds) where the base has no package of its own (`package.json`
    beside it, as a workspace package has): the usual `node_modules/` line of `.gitignore`
    hides it from the diff, and Node finds it before the installed packages."""
    parts = PurePosixPath(folder).parts
    if "node_modules" not in parts or parts == ("node_modules",):
        return False
    if parts[0] == "node_modules":
        return False  # inside the installed packages: the environment digest's
    owner = "/".join(parts[: parts.index("node_modules")])
    return base_version(path, base, f"{owner}/package.json") is None


def describe(held: tuple[str, str]) -> str:
    """'package.json scripts.test', 'pytest.py (shadows the test runner's module pytest)'."""
    return " ".join(part for part in held if part)


def _shadowed(relative: str, shadows: Sequence[str]) -> str | None:
    """The runner module `relative` stands for at a source root (a `.py`, a package or a
    namespace folder's file, a compiled extension), or None."""
    for root in SOURCE_ROOTS:
        if not relative.startswith(root):
            continue
        rest = PurePosixPath(relative[len(root) :]).parts
        if not rest:
            continue
        top = rest[0] if len(rest) > 1 else rest[0].split(".", 1)[0]
        if len(rest) == 1 and not rest[0].endswith((".py", ".pyc", ".so", ".pyd")):
            continue
        if matches(top, shadows):
            return top
    return None


def _own_module(path: Path, base: str, relative: str, module: str) -> bool:
    """Whether the base already has `module` where `relative` puts it: the project's own
    package (the `packaging` project's `src/packaging/`), the story's to change."""
    prefix = relative[: relative.index(module)]
    try:
        out = git_bytes(path, "ls-tree", "--name-only", base, "--", prefix + module,
                        prefix + module + ".py")  # fmt: skip
    except OSError:
        return False
    return bool(out.strip())


def _run_modules(argvs: Iterable[Sequence[str]]) -> list[str]:
    """The top-level modules run with `python -m X` by the verify commands."""
    found: list[str] = []
    for argv in argvs:
        for index, arg in enumerate(argv[:-1]):
            if arg == "-m":
                found.append(argv[index + 1].split(".", 1)[0])
    return found


def untracked(path: Path) -> list[tuple[str, str]]:
    """("A", file) for new files git does not track, ("I", file) for git-ignored ones (an
    ignored folder as one entry, `name/`: `.venv/`, `node_modules/` are the environment's,
    held by its digest)."""
    found: list[tuple[str, str]] = []
    for status, extra in (("A", ()), ("I", ("--ignored", "--directory"))):
        out = git_bytes(path, "ls-files", "--others", "--exclude-standard", *extra, "-z", "--", ".")
        found += [(status, os.fsdecode(f)) for f in out.split(b"\0") if f]
    return found


def _go_entries(path: Path, base: str, relative: str, status: str) -> list[str]:
    """`TestMain`/`init` functions of a `_test.go` file that differ from the base's."""
    before = _go_functions(base_version(path, base, relative)) if status != "A" else {}
    now = _go_functions(_read(path / relative)) if status != "D" else {}
    return sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))


def _go_functions(data: bytes | None) -> dict[str, str]:
    if data is None:
        return {}
    text = data.decode("utf-8", "replace")
    found: dict[str, str] = {}
    for match in _GO_ENTRY.finditer(text):
        end = text.find("\n}", match.end())
        body = text[match.start() : len(text) if end < 0 else end + 2]
        key = match.group(1)
        found[key] = found.get(key, "") + body  # a file may have several `init`s
    return found


def _read(file: Path) -> bytes | None:
    try:
        return None if file.is_symlink() else file.read_bytes()
    except OSError:
        return None


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


# --- shared files: the parts that define the test run -------------------------------------


def _package_json(data: bytes | None, argvs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The scripts the verify commands run (with their pre/post scripts and the scripts they
    name in turn) and the runners' own keys."""
    loaded = _loads(data, json.loads)
    if not isinstance(loaded, dict):
        return {} if data is None else {"(the file)": "unreadable"}
    scripts = _table(loaded.get("scripts"))
    wanted = [name for argv in argvs for name in _script_names(argv)]
    seen: dict[str, Any] = {}
    while wanted:
        name = wanted.pop()
        for key in (f"pre{name}", name, f"post{name}"):
            if key in seen:
                continue
            seen[key] = scripts.get(key)
            if isinstance(scripts.get(key), str):
                words = re.findall(r"[\w:.-]+", str(scripts[key]))
                wanted += [w for w in words if w in scripts and w not in seen]
    out = {f"scripts.{k}": v for k, v in seen.items()}
    out.update({k: loaded.get(k) for k in (*PACKAGE_KEYS, PACKAGE_SELF) if k in loaded})
    return {k: v for k, v in out.items() if v is not None}


def _script_names(argv: Sequence[str]) -> list[str]:
    """`npm test` → ["test"]; `npm run x`, `yarn x`, `pnpm run x`, `bun run x` → ["x"]."""
    if not argv or PurePosixPath(argv[0]).name not in _NPM_LIKE:
        return []
    words = [w for w in argv[1:] if not w.startswith("-")]
    if not words:
        return []
    if words[0] in ("test", "t", "tst"):
        return ["test"]
    if words[0] in ("run", "run-script", "rum", "urn") and len(words) > 1:
        return [words[1]]
    return [words[0]] if PurePosixPath(argv[0]).name in ("yarn", "pnpm") else []


def _pyproject(data: bytes | None, argvs: Sequence[Sequence[str]]) -> dict[str, Any]:
    loaded = _loads(data, tomllib.loads)
    if not isinstance(loaded, dict):
        return {} if data is None else {"(the file)": "unreadable"}
    out: dict[str, Any] = {}
    for table in PYPROJECT_TABLES:
        value: Any = loaded
        for part in table:
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            out["[" + ".".join(table) + "]"] = value
    return out


def _cargo(data: bytes | None, argvs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Cargo's test harness settings: `[lib]`'s test/harness/doctest, `[[test]]`, a target's
    `harness`/`test`, `[profile.test]`, `package.autotests`."""
    loaded = _loads(data, tomllib.loads)
    if not isinstance(loaded, dict):
        return {} if data is None else {"(the file)": "unreadable"}
    out: dict[str, Any] = {}
    lib = _table(loaded.get("lib"))
    for key in ("test", "harness", "doctest"):
        if key in lib:
            out[f"[lib] {key}"] = lib[key]
    if "test" in loaded:
        out["[[test]]"] = loaded["test"]
    for kind in ("bin", "bench", "example"):
        for index, target in enumerate(loaded.get(kind) or []):
            if isinstance(target, dict) and ("harness" in target or "test" in target):
                out[f"[[{kind}]] {index}"] = {k: target.get(k) for k in ("harness", "test")}
    profile = _table(loaded.get("profile"))
    if "test" in profile:
        out["[profile.test]"] = profile["test"]
    package = _table(loaded.get("package"))
    if "autotests" in package:
        out["package.autotests"] = package["autotests"]
    return out


def _go_mod(data: bytes | None, argvs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """`go.mod`'s `tool` (a block or lines) and `toolchain`/`godebug` directives."""
    if data is None:
        return {}
    out: dict[str, Any] = {}
    block: str | None = None
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.split("//", 1)[0].strip()
        if block is not None:
            if line == ")":
                block = None
            elif line:
                out.setdefault(block, []).append(line)
            continue
        word, _, rest = line.partition(" ")
        if word in ("tool", "toolchain", "godebug"):
            if rest.strip() == "(":
                block = word
            else:
                out.setdefault(word, []).append(rest.strip())
    return out


def _setup_cfg(data: bytes | None, argvs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """setup.cfg's `[tox:tox]` and `[testenv…]` (tox reads them there too)."""
    if data is None:
        return {}
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(data.decode("utf-8", "replace"))
    except configparser.Error:
        return {"(the file)": "unreadable"}
    return {
        f"[{s}]": dict(parser[s])
        for s in parser.sections()
        if s == "tox:tox" or s.startswith("testenv")
    }


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _loads(data: bytes | None, load: Callable[[str], Any]) -> Any:
    if data is None:
        return None
    try:
        return load(data.decode("utf-8", "replace"))
    except ValueError:
        return "unreadable"


_SHARED: dict[str, Callable[[bytes | None, Sequence[Sequence[str]]], dict[str, Any]]] = {
    "package.json": _package_json,
    "pyproject.toml": _pyproject,
    "Cargo.toml": _cargo,
    "go.mod": _go_mod,
    "setup.cfg": _setup_cfg,
}
