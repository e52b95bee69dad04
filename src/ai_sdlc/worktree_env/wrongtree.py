"""The wrong-tree guard: would verification in a story's worktree import the project's code from
the main checkout instead?

The common Python set-up (`pip install -e .` into the project's `.venv`) puts the main checkout's
`src/` on the path of every interpreter of that venv, so tests run in a worktree with that venv
judge the main checkout's code: a broken change passes, a good one fails. The guard finds the
interpreter a verify command runs (the program itself, or its `#!` line), and reads that venv's
site-packages without running anything: `.pth` path entries, the import hooks that editable
installs register from a `.pth` (setuptools' `__editable___*_finder.py`, `editables`), and
`direct_url.json` files marked `editable`. Any of them naming a folder of the main checkout
(outside every worktree and every virtual environment) is a finding.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import msgspec

#: A program that is itself a Python interpreter (`python`, `python3`, `python3.12`).
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
#: A quoted absolute path inside an editable install's import hook.
_QUOTED_PATH = re.compile(r"""['"](/[^'"\n]+)['"]""")
#: `import a, b` / `import a; ...` at the start of a `.pth` line (site.py runs such lines).
_IMPORTS = re.compile(r"^import[ \t]+([\w., \t]+)")
#: Bytes of a script read for its `#!` line (pip writes a two-line `/bin/sh` form for long paths).
_HEAD = 2048


class WrongTreeImport(msgspec.Struct, frozen=True):
    """One verify command whose interpreter imports project code from `target`."""

    #: The verify key (`build`, `test`).
    step: str
    interpreter: str
    #: The file saying so (a `.pth`, an import hook, a `direct_url.json`).
    marker: str
    #: The folder of the main checkout the code is imported from.
    target: str

    def message(self, worktree: Path | str) -> str:
        """`worktree`: the story's worktree, or words for one not made yet."""
        return (
            f"verification would test {self.target}, not the story's worktree ({worktree}): "
            f"verify.{self.step} runs {self.interpreter}, whose {Path(self.marker).name} "
            f"points there"
        )


def program_path(
    argv0: str, *, cwd: Path, fallback: Path | None, environ: Mapping[str, str]
) -> Path | None:
    """Where `argv0` is found as a verify command finds it: a relative path with a slash in the
    worktree (`cwd`), else in `fallback` (the project folder of the main checkout); a bare name
    on the environment's PATH."""
    if "/" in argv0:
        path = Path(argv0)
        if path.is_absolute():
            return path if path.exists() else None
        for base in (cwd, fallback):
            if base is not None and (base / path).exists():
                return base / path
        return None
    found = shutil.which(argv0, path=environ.get("PATH", os.defpath))
    return Path(found) if found else None


def interpreter_of(program: Path, environ: Mapping[str, str]) -> Path | None:
    """The Python interpreter `program` is or starts (its `#!` line), None when it is neither."""
    if _PYTHON.fullmatch(program.name):
        return program
    try:
        with open(program, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    lines = head.decode("utf-8", errors="replace").splitlines()
    try:
        words = shlex.split(lines[0][2:])
    except ValueError:
        return None
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not names:
            return None
        found = shutil.which(names[0], path=environ.get("PATH", os.defpath))
        words = [found] if found else []
    if words and _PYTHON.fullmatch(Path(words[0]).name):
        return Path(words[0])
    # pip's launcher for an interpreter path too long for `#!`: `'''exec' "/path/python" ...`
    for line in lines[1:3]:
        if line.startswith("'''exec' "):
            with_quotes = line[len("'''exec' ") :]
            try:
                exe = shlex.split(with_quotes)[0]
            except (ValueError, IndexError):
                return None
            return Path(exe) if _PYTHON.fullmatch(Path(exe).name) else None
    return None


def venv_of(interpreter: Path) -> Path | None:
    """The virtual environment `interpreter` belongs to (the folder holding `pyvenv.cfg` above
    its `bin/`), without following the interpreter's own symlink to the base Python."""
    root = Path(os.path.abspath(interpreter)).parent.parent
    return root if (root / "pyvenv.cfg").is_file() else None


def site_dirs(venv: Path) -> list[Path]:
    """The venv's site-packages folders (`lib64` is often a link to `lib`: listed once)."""
    found: dict[Path, Path] = {}
    for folder in sorted(venv.glob("lib*/python*/site-packages")):
        found.setdefault(_real(folder), folder)
    return list(found.values())


def entries(site: Path) -> Iterator[tuple[Path, Path]]:
    """(marker file, folder) for every folder the site directory puts on the path or maps
    packages to: `.pth` path lines, paths in the import hooks a `.pth` imports, and the source
    folders of editable `direct_url.json` files."""
    for pth in sorted(site.glob("*.pth")):
        try:
            text = pth.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            imports = _IMPORTS.match(line)
            if imports:
                for name in re.split(r"[,\s]+", imports.group(1).strip()):
                    yield from _hook_paths(site, name)
                continue
            if line.startswith("import"):
                continue
            folder = Path(line)
            yield pth, folder if folder.is_absolute() else site / folder
    for direct in sorted(site.glob("*.dist-info/direct_url.json")):
        try:
            data = json.loads(direct.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not (data.get("dir_info") or {}).get("editable"):
            continue
        url = urlsplit(str(data.get("url") or ""))
        if url.scheme == "file":
            yield direct, Path(unquote(url.path))


def _hook_paths(site: Path, module: str) -> Iterator[tuple[Path, Path]]:
    hook = site / (module.split(".")[0] + ".py")
    if not module or not hook.is_file():
        return
    try:
        text = hook.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for match in _QUOTED_PATH.finditer(text):
        yield hook, Path(match.group(1))


def foreign(path: Path, *, main: Path, worktree: Path, worktrees_root: Path | None) -> bool:
    """Inside the main checkout, yet outside the worktree, the worktrees folder and any virtual
    environment (a venv's own site-packages hold third-party code, never the project's)."""
    resolved = _real(path)
    main_top = _real(main)
    if not resolved.is_relative_to(main_top):
        return False
    for inside in (worktree, worktrees_root):
        if inside is not None and resolved.is_relative_to(_real(inside)):
            return False
    here = resolved
    while here != main_top and here.is_relative_to(main_top):
        if (here / "pyvenv.cfg").is_file():
            return False
        here = here.parent
    return True


def check(
    commands: Sequence[tuple[str, str]],
    *,
    worktree: Path,
    main: Path,
    project: Path,
    worktrees_root: Path | None,
    environ: Mapping[str, str],
) -> list[WrongTreeImport]:
    """What each verify command would import from the main checkout `main` (the repository's
    top) when run in `worktree`; `project` is the project folder a relative program falls
    back to. Empty: nothing found (or not a Python command this guard can follow)."""
    found: list[WrongTreeImport] = []
    for step, line in commands:
        try:
            argv = shlex.split(line)
        except ValueError:
            continue  # reported by the command runner, with the config key
        if not argv:
            continue
        program = program_path(argv[0], cwd=worktree, fallback=project, environ=environ)
        interpreter = interpreter_of(program, environ) if program else None
        venv = venv_of(interpreter) if interpreter else None
        if interpreter is None or venv is None:
            continue
        hits = [
            (marker, target)
            for site in site_dirs(venv)
            for marker, target in entries(site)
            if foreign(target, main=main, worktree=worktree, worktrees_root=worktrees_root)
        ]
        if not hits:
            continue
        # A path entry or hook names the imported folder (`src/`); direct_url.json only the
        # project it was installed from: show the most telling one.
        marker, target = min(hits, key=lambda hit: hit[0].name == "direct_url.json")
        found.append(WrongTreeImport(step, str(interpreter), str(marker), str(target)))
    return found


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return Path(os.path.abspath(path))
