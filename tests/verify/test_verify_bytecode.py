"""A sandboxed verification starts with the protected bytecode of what this process imported
(verify/bytecode.py), and never with bytecode a child could have written: from a writable
root, or reached by a hard link. Real Python children under the real Landlock sandbox; each
reports whether a module's bytecode was already in its private pycache folder before it
imported anything."""

from __future__ import annotations

import difflib
import importlib
import os
import py_compile
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.policy import SandboxPolicy
from ai_sdlc.verify import bytecode, run_commands
from ai_sdlc.verify.commands import default_environment

pytestmark = pytest.mark.e2e

__all__ = ["difflib"]  # imported so that this process has its bytecode to give

#: Prints, for each module named, whether its bytecode is in the prefix (without importing it).
PROBE = (
    "import importlib.util, os, sys\n"
    "for name in sys.argv[1:]:\n"
    "    origin = importlib.util.find_spec(name).origin\n"
    "    print(f'SEEDED {name} {os.path.exists(importlib.util.cache_from_source(origin))}')\n"
)


def _landlock() -> bool:
    try:
        return landlock.abi_version() > 0
    except OSError:
        return False


needs_landlock = pytest.mark.skipif(not _landlock(), reason="this kernel has no usable Landlock")


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Three modules this process imports, each with its bytecode written: one in a folder the
    child may write, one in a protected folder, one protected whose bytecode has a second name
    in the writable folder."""
    writable = tmp_path / "writable"
    protected = tmp_path / "protected"
    folders = {"seedw_mod": writable, "seedp_mod": protected, "seedl_mod": protected}
    for name, folder in folders.items():
        folder.mkdir(exist_ok=True)
        source = folder / f"{name}.py"
        source.write_text("VALUE = 1\n")
        py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)))
    linked = Path(importlib.util.cache_from_source(str(protected / "seedl_mod.py")))
    (writable / "links").mkdir()
    os.link(linked, writable / "links" / "seedl_mod.pyc")
    sys.path[:0] = [str(writable), str(protected)]
    try:
        for name in folders:
            importlib.import_module(name)
        yield {"writable": writable, "protected": protected}
    finally:
        sys.path[:] = [p for p in sys.path if p not in (str(writable), str(protected))]
        for name in folders:
            sys.modules.pop(name, None)


def _probe(tmp_path: Path, writable: Path, *modules: str) -> dict[str, bool]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    policy = SandboxPolicy(LandlockBackend(), (str(work), str(writable)))
    env = {**default_environment(), "PYTHONPATH": os.pathsep.join(map(str, sys.path[:2]))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = shlex.join([sys.executable, "-c", PROBE, *modules])
    result = run_commands([("test", command)], cwd=work, timeout=60, env=env, sandbox=policy)
    assert result.passed, result.failure_output
    lines = [x.split() for x in result.steps[0].output.splitlines() if x.startswith("SEEDED ")]
    return {name: seeded == "True" for _, name, seeded in lines}


@needs_landlock
def test_a_verification_starts_with_the_protected_bytecode_of_what_was_imported(
    tmp_path: Path, imported: dict[str, Path]
) -> None:
    """`difflib` (the standard library, imported here) and a module from a protected folder are
    there before the child imports them: the child does not compile them again."""
    assert "difflib" in sys.modules
    found = _probe(tmp_path, imported["writable"], "difflib", "seedp_mod")
    assert found == {"difflib": True, "seedp_mod": True}


@needs_landlock
def test_bytecode_a_child_could_write_is_never_seeded(
    tmp_path: Path, imported: dict[str, Path]
) -> None:
    """A module imported from a writable root, and a protected module whose bytecode file has a
    hard link in a writable root: the child compiles both from their sources."""
    found = _probe(tmp_path, imported["writable"], "seedw_mod", "seedl_mod")
    assert found == {"seedw_mod": False, "seedl_mod": False}


#: Writes over the bytecode the prefix holds for the module named, and says what happened.
OVERWRITE = (
    "import importlib.util, sys\n"
    "cached = importlib.util.cache_from_source(importlib.util.find_spec(sys.argv[1]).origin)\n"
    "try:\n"
    "    with open(cached, 'r+b') as handle:\n"
    "        handle.write(b'forged')\n"
    "    print('WROTE')\n"
    "except PermissionError:\n"
    "    print('REFUSED')\n"
)


@needs_landlock
def test_a_child_cannot_write_through_the_seed_into_the_protected_bytecode(
    tmp_path: Path, imported: dict[str, Path]
) -> None:
    original = Path(importlib.util.cache_from_source(str(imported["protected"] / "seedp_mod.py")))
    before = original.read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    policy = SandboxPolicy(LandlockBackend(), (str(work), str(imported["writable"])))
    env = {**default_environment(), "PYTHONPATH": os.pathsep.join(map(str, sys.path[:2]))}
    command = shlex.join([sys.executable, "-c", OVERWRITE, "seedp_mod"])
    result = run_commands([("test", command)], cwd=work, timeout=60, env=env, sandbox=policy)
    assert result.passed, result.failure_output
    assert "REFUSED" in result.steps[0].output
    assert original.read_bytes() == before


@pytest.fixture
def leaf(tmp_path: Path) -> Iterator[Path]:
    """A protected folder with no package below it, whose `__pycache__` holds two plain
    bytecode files, both modules imported by this process."""
    folder = tmp_path / "leaf"
    folder.mkdir()
    names = ("seedf_one", "seedf_two")
    for name in names:
        source = folder / f"{name}.py"
        source.write_text("VALUE = 2\n")
        py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)))
    sys.path.insert(0, str(folder))
    try:
        for name in names:
            importlib.import_module(name)
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in names:
            sys.modules.pop(name, None)


def test_a_folder_without_packages_below_is_one_link_to_its_bytecode_folder(
    tmp_path: Path, leaf: Path
) -> None:
    """Each link is an inode made and removed per verification: a leaf folder of plain bytecode
    is one link to its `__pycache__`, not one per module (the standard library's top folder,
    which has packages below it, keeps a link per file)."""
    prefix = tmp_path / "prefix"
    made = bytecode.seed(prefix, [str(tmp_path / "work")])
    seeded = prefix / str(leaf).lstrip(os.sep)
    assert seeded.is_symlink() and os.readlink(seeded) == str(leaf / "__pycache__")
    stdlib = prefix / os.path.dirname(difflib.__file__).lstrip(os.sep)
    assert not stdlib.is_symlink() and (stdlib / Path(difflib.__cached__).name).is_symlink()
    assert made < sum(1 for _ in bytecode._imported())


def test_a_bytecode_folder_holding_a_link_or_a_folder_gets_links_per_file(
    tmp_path: Path, leaf: Path
) -> None:
    """A symbolic link (it may lead into a writable root) or a folder in the `__pycache__`: no
    link to the whole folder, so nothing but the checked files is reachable."""
    for odd in ("link", "folder"):
        prefix = tmp_path / f"prefix-{odd}"
        extra = leaf / "__pycache__" / f"odd.{odd}"
        if odd == "link":
            extra.symlink_to(tmp_path / "work")
        else:
            extra.mkdir()
        bytecode.seed(prefix, [str(tmp_path / "work")])
        seeded = prefix / str(leaf).lstrip(os.sep)
        assert not seeded.is_symlink(), odd
        assert sorted(p.name for p in seeded.iterdir()) == [
            Path(importlib.util.cache_from_source(str(leaf / f"{n}.py"))).name
            for n in ("seedf_one", "seedf_two")
        ]
        extra.unlink() if odd == "link" else extra.rmdir()


def test_links_to_single_files_are_capped_the_standard_librarys_first(tmp_path: Path) -> None:
    """A process that imported a package of hundreds of modules in a folder holding packages
    (an API client's generated types) gets at most `MAX_FILE_LINKS` links to single files,
    each an inode made per session; the standard library's are among them, the big folder's
    are left out."""
    many = bytecode.MAX_FILE_LINKS + 50
    package = tmp_path / "protected" / "seedmany_pkg"
    (package / "sub").mkdir(parents=True)
    for folder in (package, package / "sub"):
        (folder / "__init__.py").write_text("")
    for n in range(many):
        (package / f"m{n}.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(package.parent))
    try:
        importlib.import_module("seedmany_pkg.sub")
        for n in range(many):
            importlib.import_module(f"seedmany_pkg.m{n}")
        prefix = tmp_path / "prefix"
        bytecode.seed(prefix, [str(tmp_path / "work")])
    finally:
        sys.path.remove(str(package.parent))
        for name in [m for m in sys.modules if m.startswith("seedmany_pkg")]:
            sys.modules.pop(name)
    file_links = [
        p for p in prefix.rglob("*") if p.is_symlink() and not os.path.isdir(os.readlink(p))
    ]
    assert len(file_links) <= bytecode.MAX_FILE_LINKS
    stdlib = prefix / os.path.dirname(difflib.__file__).lstrip(os.sep)
    assert (stdlib / Path(difflib.__cached__).name).is_symlink()
    seeded = prefix / str(package).lstrip(os.sep)
    assert len(list(seeded.glob("m*.pyc")) if seeded.is_dir() else []) < many


#: Tries to write a new bytecode file next to the module's, through the prefix.
PLANT = (
    "import importlib.util, os, sys\n"
    "cached = importlib.util.cache_from_source(importlib.util.find_spec(sys.argv[1]).origin)\n"
    "try:\n"
    "    with open(os.path.join(os.path.dirname(cached), 'planted.pyc'), 'wb') as handle:\n"
    "        handle.write(b'forged')\n"
    "    print('WROTE')\n"
    "except PermissionError:\n"
    "    print('REFUSED')\n"
)


@needs_landlock
def test_through_a_folder_link_a_child_finds_the_bytecode_and_can_write_nothing(
    tmp_path: Path, leaf: Path
) -> None:
    """The child finds both modules' bytecode before importing them; writing over one, or a new
    file beside them, through the link is refused and the protected folder is unchanged."""
    pycache = leaf / "__pycache__"
    before = {p.name: p.read_bytes() for p in pycache.iterdir()}
    writable = tmp_path / "writable"
    writable.mkdir()
    found = _probe(tmp_path, writable, "seedf_one", "seedf_two")
    assert found == {"seedf_one": True, "seedf_two": True}
    work = tmp_path / "work"
    policy = SandboxPolicy(LandlockBackend(), (str(work), str(writable)))
    env = {**default_environment(), "PYTHONPATH": str(leaf)}
    for script in (OVERWRITE, PLANT):
        command = shlex.join([sys.executable, "-c", script, "seedf_one"])
        result = run_commands([("test", command)], cwd=work, timeout=60, env=env, sandbox=policy)
        assert result.passed, result.failure_output
        assert "REFUSED" in result.steps[0].output
    assert {p.name: p.read_bytes() for p in pycache.iterdir()} == before


#: Compiles a module of the work folder, then tries to leave a file in the bytecode folder.
LEAVE = (
    "import os, sys\n"
    "sys.path.insert(0, '.')\n"
    "import fresh_mod\n"
    "prefix = os.environ['PYTHONPYCACHEPREFIX']\n"
    "print('PREFIX', prefix)\n"
    "try:\n"
    "    open(os.path.join(prefix, 'left.pyc'), 'wb').close()\n"
    "    print('WROTE')\n"
    "except PermissionError:\n"
    "    print('REFUSED')\n"
)


@needs_landlock
def test_the_verifications_of_a_session_share_one_folder_no_child_can_write(
    tmp_path: Path,
) -> None:
    """Two verifications with the same `Seeds`: the same folder, built once; neither child can
    leave anything in it, not even the bytecode of the module it compiled, so nothing one
    verification leaves stands for a source in the next."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "fresh_mod.py").write_text("VALUE = 3\n")
    policy = SandboxPolicy(LandlockBackend(), (str(work),))
    seeds = bytecode.Seeds()
    seen = []
    for _ in range(2):
        command = shlex.join([sys.executable, "-c", LEAVE])
        env = default_environment()
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        result = run_commands(
            [("test", command)], cwd=work, timeout=60, env=env, sandbox=policy, seeds=seeds
        )
        assert result.passed, result.failure_output
        assert "REFUSED" in result.steps[0].output
        seen += [
            x.split()[1] for x in result.steps[0].output.splitlines() if x.startswith("PREFIX")
        ]
    assert len(seen) == 2 and seen[0] == seen[1]
    prefix = Path(seen[0])
    assert not (prefix / "left.pyc").exists()
    assert not list(prefix.rglob("fresh_mod*"))
    assert not (work / "__pycache__").exists()


def test_a_session_folder_is_built_again_when_a_link_would_lead_into_a_writable_root(
    tmp_path: Path, leaf: Path
) -> None:
    """A later verification whose children may write the folder a link leads to gets a folder
    of its own, without that link."""
    seeds = bytecode.Seeds()
    first = seeds.prefix([str(tmp_path / "work")])
    assert (Path(first) / str(leaf).lstrip(os.sep)).is_symlink()
    assert seeds.prefix([str(tmp_path / "work")]) == first
    second = seeds.prefix([str(tmp_path / "work"), str(leaf)])
    assert second != first
    assert not (Path(second) / str(leaf).lstrip(os.sep)).exists()


def test_closing_the_seeds_removes_every_folder_and_nothing_its_links_lead_to(
    tmp_path: Path, leaf: Path
) -> None:
    """`close` (the session's, when its command ends) removes each folder built, a folder whose
    mode bits a child could not write included; the bytecode the links lead to stays, and a
    later verification gets a new folder."""
    seeds = bytecode.Seeds()
    first = Path(seeds.prefix([str(tmp_path / "work")]))
    second = Path(seeds.prefix([str(tmp_path / "work"), str(leaf)]))
    linked = first / str(leaf).lstrip(os.sep)
    target = os.path.realpath(linked)
    linked.parent.chmod(0o500)  # read-only by its mode bits too

    seeds.close()

    assert not first.exists() and not second.exists()
    assert os.path.exists(target)
    third = Path(seeds.prefix([str(tmp_path / "work")]))
    assert third not in (first, second) and third.is_dir()
    seeds.close()
    assert not third.exists()
