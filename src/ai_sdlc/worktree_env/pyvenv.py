"""`ai-sdlc worktrees venv`: a story worktree's own `.venv`, layered on the project's.

A plain `python -m venv` + `pip install -e .` per worktree costs tens of seconds and tens of
megabytes (pip itself, every dependency again). Layered, the worktree gets a tiny venv with no
pip of its own (`venv --without-pip`, ~60 KB) whose one `.pth` file puts, in this order, the
worktree's own copy of the project's source folders (the main venv's editable entries, moved
from the main checkout to the worktree) and the main venv's site-packages (the third-party
packages, shared, read-only) on the path. The main venv's other `.pth` files are copied (hooks
of third-party packages), the project's own editable ones never; its console scripts are
copied with their `#!` line pointing at the worktree's interpreter (`.venv/bin/pytest` runs
there), other programs linked. When the worktree's dependency files differ from the main
checkout's (a story that adds a dependency), pip (the main venv's, `--python` the worktree's)
installs what they declare into the worktree's venv: only what the shared packages do not
already satisfy. Without a venv in the project, a full venv with the project and its test
extras installed is built.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.worktree_env import wrongtree

#: The `.pth` file of a layered venv (digits sort first: it runs before any copied `.pth`).
LAYER_PTH = "00-ai-sdlc-worktree.pth"
#: Written in the venv: what it was layered on (and that we may replace it).
MARKER = "ai-sdlc-venv.json"
#: Files whose content decides the project's dependencies: equal in the worktree and the main
#: checkout → the main venv's packages are the right ones to share.
DEPENDENCY_FILES = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "requirements-dev.txt",
    "dev-requirements.txt",
    "requirements-test.txt",
    "poetry.lock",
    "pdm.lock",
    "uv.lock",
)
#: Optional-dependency groups installed with the project into a full venv (tests need them).
TEST_EXTRAS = ("dev", "test", "tests", "testing")
#: Seconds allowed for one step of a full build (pip resolves and downloads).
STEP_TIMEOUT = 1800


def find_base_venv(project: Path) -> Path | None:
    """The project's own virtual environment: `.venv`, `venv` or `env` in the main checkout,
    else the one active where ai-sdlc runs (`VIRTUAL_ENV`, a venv kept elsewhere)."""
    candidates = [project / name for name in (".venv", "venv", "env")]
    active = os.environ.get("VIRTUAL_ENV")
    if active:
        candidates.append(Path(active))
    for candidate in candidates:
        if (candidate / "pyvenv.cfg").is_file() and (candidate / "bin").is_dir():
            return candidate
    return None


def same_dependencies(worktree: Path, project: Path) -> bool:
    """Whether every dependency file reads the same in the worktree and the main checkout."""
    for name in DEPENDENCY_FILES:
        mine, theirs = worktree / name, project / name
        if mine.exists() != theirs.exists():
            return False
        if mine.exists() and mine.read_bytes() != theirs.read_bytes():
            return False
    return True


def build(worktree: Path, project: Path, *, base: Path | None = None) -> str:
    """Build `worktree/.venv`; returns one line saying how. `project` is the main checkout's
    project folder, `base` its venv (default: found there)."""
    worktree, project = worktree.resolve(), project.resolve()
    if worktree == project:
        raise InvalidInputError(
            f"{worktree} is the project's own folder, not a story worktree",
            hint="this command builds a story worktree's .venv (run by worktree.setup)",
        )
    base = base or find_base_venv(project)
    target = worktree / ".venv"
    _clear(target)
    if base is None:
        _full(worktree, target, sys.executable)
        return f"built {target} with pip (no venv in {project})"
    _layered(worktree, project, base.absolute(), target)
    how = f"layered {target} on {base} (the project from {worktree})"
    if not same_dependencies(worktree, project):
        wanted = _declared(worktree)
        if wanted:
            _run([str(base / "bin" / "python"), "-m", "pip", "--python",
                  str(target / "bin" / "python"), "install", "-q", *wanted], worktree)  # fmt: skip
        how += "; the worktree's dependency files differ: what they add is installed in it"
    return how


def _clear(target: Path) -> None:
    """Remove a venv left by an earlier setup; refuse to delete anything else."""
    if not os.path.lexists(target):
        return
    if target.is_symlink() or not (target / "pyvenv.cfg").is_file():
        raise InvalidInputError(
            f"{target} exists and is not a virtual environment",
            hint="move it away, or write your own worktree.setup",
        )
    shutil.rmtree(target)


def _run(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=STEP_TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise InvalidInputError(f"{' '.join(argv)} failed (exit {done.returncode}):\n{tail}")


def _layered(worktree: Path, project: Path, base: Path, target: Path) -> None:
    _run([str(base / "bin" / "python"), "-m", "venv", "--without-pip", str(target)], worktree)
    sites = wrongtree.site_dirs(target)
    base_sites = wrongtree.site_dirs(base)
    if not sites or not base_sites:
        raise InvalidInputError(f"no site-packages folder in {target} or {base}")
    own = sites[0]
    project_paths: list[str] = []
    for base_site in base_sites:
        for pth in sorted(base_site.glob("*.pth")):
            hits = [
                folder
                for marker, folder in wrongtree.entries(base_site)
                if _source(marker, pth)
                and wrongtree.foreign(folder, main=project, worktree=worktree, worktrees_root=None)
            ]
            if not hits:
                shutil.copy2(pth, own / pth.name)  # a third-party hook: keep it
                continue
            for folder in hits:
                path_entry = folder if marker_is_pth(folder, pth) else folder.parent
                moved = str(worktree / path_entry.resolve().relative_to(project))
                if moved not in project_paths:
                    project_paths.append(moved)
    if not project_paths:  # not installed editable in the main venv: the usual layouts
        project_paths.append(str(worktree / "src" if (worktree / "src").is_dir() else worktree))
    _copy_generated(project, worktree, [Path(p) for p in project_paths])
    lines = [*project_paths, *(str(s) for s in base_sites)]
    (own / LAYER_PTH).write_text("\n".join(lines) + "\n", encoding="utf-8")
    _scripts(base, target)
    (target / ".gitignore").write_text("# ai-sdlc worktree venv: not for git\n*\n")
    record = {"layered_on": str(base), "project_paths": project_paths}
    (target / MARKER).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _copy_generated(project: Path, worktree: Path, folders: list[Path]) -> None:
    """Python files the install generated in the main checkout's source folders and git
    ignores (hatch-vcs' or setuptools-scm's `_version.py`): the worktree has none, and its
    package would not import without them. Copied when the worktree lacks them."""
    wanted = [str(f.relative_to(worktree)) for f in folders if f.is_relative_to(worktree)]
    if not wanted:
        return
    done = subprocess.run(
        ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory",
         "--", *wanted],
        cwd=project, capture_output=True, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0:
        return  # not a git checkout: nothing is known to be generated
    for name in done.stdout.decode("utf-8", errors="replace").split("\0"):
        if not name.endswith(".py"):  # an ignored folder (`.venv/`, `build/`) is one entry
            continue
        source, dest = project / name, worktree / name
        if source.is_file() and not dest.exists() and dest.parent.is_dir():
            shutil.copy2(source, dest)


def _source(marker: Path, pth: Path) -> bool:
    """Whether `marker` (from `wrongtree.entries`) came from the `.pth` file `pth`: the file
    itself, or an import hook it names."""
    if marker == pth:
        return True
    if marker.suffix != ".py":
        return False
    try:
        return marker.stem in pth.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def marker_is_pth(folder: Path, pth: Path) -> bool:
    """A `.pth` line is a path entry itself; a hook maps a package (its parent is the entry)."""
    try:
        lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    return str(folder) in (line.strip() for line in lines)


def _scripts(base: Path, target: Path) -> None:
    """The main venv's programs in the worktree venv: scripts started by the main venv's
    interpreter get the worktree's (`#!` rewritten), anything else is linked."""
    bin_dir = target / "bin"
    for entry in sorted((base / "bin").iterdir()):
        dest = bin_dir / entry.name
        if os.path.lexists(dest) or entry.name.startswith(("activate", "Activate", "python")):
            continue
        if entry.is_dir():
            continue
        head = b""
        try:
            with open(entry, "rb") as handle:
                head = handle.read(2)
        except OSError:
            continue
        if head == b"#!":
            text = entry.read_bytes()
            first, _, rest = text.partition(b"\n")
            shebang = first[2:].strip().decode("utf-8", errors="replace")
            if shebang.startswith(str(base)) and Path(shebang.split()[0]).name.startswith("python"):
                new = f"#!{bin_dir / 'python'}".encode() + b"\n" + rest
                dest.write_bytes(new)
                dest.chmod(stat.S_IMODE(entry.stat().st_mode) | stat.S_IXUSR)
                continue
        dest.symlink_to(entry.resolve())


def _full(worktree: Path, target: Path, python: str) -> None:
    _run([python, "-m", "venv", str(target)], worktree)
    extras = _test_extras(worktree)
    spec = "." + (f"[{','.join(extras)}]" if extras else "")
    if (worktree / "pyproject.toml").is_file() or (worktree / "setup.py").is_file():
        before = _egg_infos(worktree)
        _run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "-e", spec], worktree)
        for leftover in _egg_infos(worktree) - before:  # setuptools' by-product, not needed
            shutil.rmtree(leftover, ignore_errors=True)
    (target / ".gitignore").write_text("# ai-sdlc worktree venv: not for git\n*\n")
    (target / MARKER).write_text(json.dumps({"full": True}) + "\n", encoding="utf-8")


def _egg_infos(worktree: Path) -> set[Path]:
    return {*worktree.glob("*.egg-info"), *worktree.glob("src/*.egg-info")}


def _declared(worktree: Path) -> list[str]:
    """pip arguments for every dependency the worktree declares (requirements files, and the
    project's dependencies with its test extras): pip installs only what the shared packages
    do not already satisfy, into the worktree's venv."""
    import tomllib

    wanted: list[str] = []
    for name in DEPENDENCY_FILES:
        if name.endswith(".txt") and (worktree / name).is_file():
            wanted += ["-r", name]
    try:
        data = tomllib.loads((worktree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return wanted
    project = data.get("project") or {}
    wanted += [str(d) for d in project.get("dependencies") or []]
    optional = project.get("optional-dependencies") or {}
    for extra in TEST_EXTRAS:
        wanted += [str(d) for d in optional.get(extra) or []]
    return wanted


def _test_extras(worktree: Path) -> list[str]:
    """The optional-dependency groups of pyproject.toml that tests usually need."""
    import tomllib

    try:
        data = tomllib.loads((worktree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    optional = (data.get("project") or {}).get("optional-dependencies") or {}
    return [name for name in TEST_EXTRAS if name in optional]
