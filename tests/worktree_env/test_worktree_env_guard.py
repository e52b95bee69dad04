"""The wrong-tree guard's reading of a venv (every way an editable install names its folder,
every way a verify command names its interpreter), and the layered venv built from each, on
real venvs (`python -m venv --without-pip`) with the files editable installers write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.worktree_env import pyvenv, wrongtree
from ai_sdlc.worktree_env.propose import propose

pytestmark = pytest.mark.e2e


def venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder


def site(folder: Path) -> Path:
    return next(folder.glob("lib/python*/site-packages"))


@pytest.fixture
def main(tmp_path: Path) -> Path:
    """A main checkout with a src-layout package `calc` and a worktree copy of it."""
    root = tmp_path / "main"
    (root / "src" / "calc").mkdir(parents=True)
    (root / "src" / "calc" / "__init__.py").write_text("WHERE = 'main'\n")
    (root / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0.1"\n')
    work = tmp_path / "wt"
    (work / "src" / "calc").mkdir(parents=True)
    (work / "src" / "calc" / "__init__.py").write_text("WHERE = 'worktree'\n")
    (work / "pyproject.toml").write_text((root / "pyproject.toml").read_text())
    return root


def check(main: Path, command: str, path: str = "/usr/bin:/bin") -> list[wrongtree.Finding]:
    return wrongtree.check(
        [("test", command)],
        worktree=main.parent / "wt",
        main=main,
        project=main,
        worktrees_root=main / ".ai-sdlc" / "worktrees",
        environ={"PATH": path},
    )


def setuptools_finder(main: Path) -> None:
    """What setuptools' strict/finder editable mode writes: an import hook with a mapping."""
    packages = site(main / ".venv")
    (packages / "__editable__.calc-0.1.pth").write_text(
        "import __editable___calc_0_1_finder; __editable___calc_0_1_finder.install()\n"
    )
    (packages / "__editable___calc_0_1_finder.py").write_text(
        "import sys\n"
        f"MAPPING: dict[str, str] = {{'calc': {str(main / 'src' / 'calc')!r}}}\n"
        "NAMESPACES: dict[str, list[str]] = {}\n"
        "class _EditableFinder:\n"
        "    @classmethod\n"
        "    def find_spec(cls, fullname, path=None, target=None):\n"
        "        if fullname in MAPPING:\n"
        "            import importlib.util\n"
        "            init = MAPPING[fullname] + '/__init__.py'\n"
        "            return importlib.util.spec_from_file_location(fullname, init)\n"
        "def install():\n"
        "    sys.meta_path.append(_EditableFinder)\n"
    )


def test_an_import_hook_mapping_is_found_and_the_layered_venv_maps_it_to_the_worktree(
    main: Path,
) -> None:
    venv(main / ".venv")
    setuptools_finder(main)
    found = check(main, ".venv/bin/python -m pytest")
    assert [Path(f.target) for f in found] == [main / "src" / "calc"]
    assert Path(found[0].marker).name == "__editable___calc_0_1_finder.py"
    work = main.parent / "wt"
    pyvenv.build(work, main)
    assert check(main, ".venv/bin/python -m pytest") == []  # the worktree's own venv now
    shown = subprocess.run(
        [str(work / ".venv/bin/python"), "-c", "import calc; print(calc.WHERE)"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown == "worktree\n"
    copied = {p.name for p in site(work / ".venv").glob("*")}
    assert "__editable__.calc-0.1.pth" not in copied  # the project's own hook stays behind


def test_interpreters_named_by_shebangs_env_and_pips_sh_launcher(main: Path) -> None:
    venv(main / ".venv")
    (site(main / ".venv") / "__editable__.calc-0.1.pth").write_text(f"{main / 'src'}\n")
    bin_dir = main / ".venv" / "bin"
    (bin_dir / "pytest").write_text(f"#!{bin_dir / 'python'}\nimport sys\n")
    (bin_dir / "envtool").write_text("#!/usr/bin/env -S python3 -u\nimport sys\n")
    (bin_dir / "longtool").write_text(
        f"#!/bin/sh\n'''exec' \"{bin_dir / 'python'}\" \"$0\" \"$@\"\n' '''\nimport sys\n"
    )
    (bin_dir / "shell").write_text("#!/bin/sh\necho hi\n")
    for name in ("pytest", "envtool", "longtool", "shell"):
        (bin_dir / name).chmod(0o755)
    assert [f.target for f in check(main, ".venv/bin/pytest -q")] == [str(main / "src")]
    assert len(check(main, ".venv/bin/longtool")) == 1
    assert len(check(main, "envtool", path=f"{bin_dir}:/usr/bin:/bin")) == 1
    assert len(check(main, "python -m pytest", path=f"{bin_dir}:/usr/bin:/bin")) == 1
    assert check(main, ".venv/bin/shell") == []  # not Python: nothing this guard can follow
    assert check(main, "make test") == []
    assert check(main, "'unbalanced") == []  # left to the command runner's own error


def test_what_is_not_the_main_checkouts_code_is_no_finding(main: Path, tmp_path: Path) -> None:
    venv(main / ".venv")
    packages = site(main / ".venv")
    elsewhere = tmp_path / "shared-lib"
    elsewhere.mkdir()
    (packages / "a.pth").write_text(
        f"# a comment\n{elsewhere}\n{main / '.venv' / 'lib'}\n"
        f"{main / '.ai-sdlc' / 'worktrees' / 'S-0001'}\nimport os\n"
    )
    info = packages / "other-1.0.dist-info"
    info.mkdir()
    (info / "direct_url.json").write_text(
        json.dumps({"url": (main / "src").as_uri(), "dir_info": {}})  # not editable
    )
    assert check(main, ".venv/bin/python -m pytest") == []
    (info / "direct_url.json").write_text(
        json.dumps({"url": main.as_uri(), "dir_info": {"editable": True}})
    )
    found = check(main, ".venv/bin/python -m pytest")
    assert [(Path(f.marker).name, f.target) for f in found] == [("direct_url.json", str(main))]


def test_changed_dependencies_are_installed_into_the_layered_venv(main: Path) -> None:
    """A story that adds a requirement: pip (the main venv's) installs it into the worktree's
    venv; here a local folder package, so nothing leaves this machine."""
    venv(main / ".venv")
    (site(main / ".venv") / "__editable__.calc-0.1.pth").write_text(f"{main / 'src'}\n")
    import pip

    pip_home = Path(pip.__file__).parent.parent
    (site(main / ".venv") / "tools.pth").write_text(f"{pip_home}\n")  # the main venv's pip
    extra = main.parent / "extra"
    (extra / "extra_pkg").mkdir(parents=True)
    (extra / "extra_pkg" / "__init__.py").write_text("VALUE = 42\n")
    (extra / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "extra-pkg"\nversion = "1.0"\n'
    )
    dist = main.parent / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(dist), str(extra)],
        check=True, capture_output=True,
    )  # fmt: skip
    wheel = next(dist.glob("extra_pkg-1.0-*.whl"))
    work = main.parent / "wt"
    (work / "requirements.txt").write_text(f"--no-index\n{wheel}\n")
    how = pyvenv.build(work, main)
    assert "dependency files differ" in how
    code = "import extra_pkg, calc; print(extra_pkg.VALUE, calc.WHERE)"
    shown = subprocess.run(
        [str(work / ".venv/bin/python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert shown == "42 worktree\n"
    assert not list(site(main / ".venv").glob("extra_pkg*"))  # the main venv is untouched


def test_a_folder_that_is_not_a_venv_is_never_deleted(main: Path) -> None:
    venv(main / ".venv")
    work = main.parent / "wt"
    (work / ".venv").mkdir()
    (work / ".venv" / "mine.txt").write_text("keep me\n")
    with pytest.raises(Exception, match="exists and is not a virtual environment"):
        pyvenv.build(work, main)
    assert (work / ".venv" / "mine.txt").read_text() == "keep me\n"


def test_proposals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)  # no venv active where ai-sdlc runs
    assert propose(tmp_path).commands == []
    (tmp_path / "setup.py").write_text("")
    assert propose(tmp_path).commands == []  # no venv to layer on: nothing for Python
    venv(tmp_path / "venv")
    (tmp_path / "yarn.lock").write_text("")
    (tmp_path / "package.json").write_text("{}")
    proposal = propose(tmp_path)
    assert proposal.commands == ["ai-sdlc worktrees venv", "yarn install --frozen-lockfile"]
    assert proposal.found == ["setup.py", "yarn.lock"]
    (tmp_path / "uv.lock").write_text("")
    with_uv = propose(tmp_path, which=lambda name: f"/usr/bin/{name}")
    assert with_uv.commands[0] == "uv sync --frozen"
    without = propose(tmp_path, which=lambda name: None)  # uv not installed: the layered venv
    assert without.commands[0] == "ai-sdlc worktrees venv"


def test_a_generated_version_file_is_brought_along(main: Path) -> None:
    """hatch-vcs and setuptools-scm write a git-ignored `_version.py` into the main checkout's
    package at install time: the worktree's copy of the package needs it to import."""
    venv(main / ".venv")
    (site(main / ".venv") / "__editable__.calc-0.1.pth").write_text(f"{main / 'src'}\n")
    (main / ".gitignore").write_text(".venv/\nsrc/calc/_version.py\n")
    (main / "src" / "calc" / "_version.py").write_text("version = '1.2.3'\n")
    (main / "src" / "calc" / "__init__.py").write_text("from calc._version import version\n")
    subprocess.run(["git", "init", "-q"], cwd=main, check=True)
    work = main.parent / "wt"
    (work / "src" / "calc" / "__init__.py").write_text("from calc._version import version\n")
    pyvenv.build(work, main)
    assert (work / "src" / "calc" / "_version.py").read_text() == "version = '1.2.3'\n"
    shown = subprocess.run(
        [str(work / ".venv/bin/python"), "-c", "import calc; print(calc.version, calc.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown == f"1.2.3 {work / 'src' / 'calc' / '__init__.py'}\n"
    assert not (work / "src" / ".venv").exists()
