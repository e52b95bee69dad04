"""The src-layout project of issue 23: a package `calc` under `src/`, installed editable
(`pip install -e .`) into the project's own `.venv`, built offline against the test venv's
setuptools. Shared by the worktree-environment and the honest-verification tests."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.support.folders import process_folder
from tests.support.git_support import Repo, git, make_repo, own_git_config

#: The test venv's packages (pytest, setuptools): the project's venv reads them through a
#: `.pth`, so its editable install builds offline (`--no-build-isolation --no-index`).
TEST_SITE = sysconfig.get_paths()["purelib"]
VERIFY = ".venv/bin/python -m pytest -q -p no:cacheprovider"
RECIPE = '["ai-sdlc worktrees venv"]'


def plugin_free_site(folder: Path) -> Path:
    """`TEST_SITE` as links in `folder/test-site`, without the metadata of the packages that
    declare a pytest plugin (hypothesis, xdist, anyio...): pytest in a project's venv would
    load them all at every start, 1.25 s of CPU instead of 0.2 s for a one-test run, and a
    user's project has none of them. Every module stays importable."""
    site = folder / "test-site"
    if site.is_dir():
        return site
    site.mkdir()
    for entry in Path(TEST_SITE).iterdir():
        points = entry / "entry_points.txt"
        if entry.suffix == ".pth" or (points.is_file() and "[pytest11]" in points.read_text()):
            continue
        (site / entry.name).symlink_to(entry)
    return site


def build_venv(root: Path, *, real_site: bool = False) -> None:
    """`python -m venv` + `pip install -e . --no-deps --no-build-isolation`, offline; the test
    venv's packages read through `plugin_free_site`, or, `real_site`, from `TEST_SITE` itself
    (see `calc_project`)."""
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    deps = TEST_SITE if real_site else plugin_free_site(root.parent)
    (site / "test-deps.pth").write_text(f"{deps}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(root)],
        check=True, capture_output=True,
    )  # fmt: skip


def calc_project(tmp_path: Path, *, real_site: bool = False) -> Repo:
    """A committed src-layout package `calc` with a passing test, installed editable into
    the project's own `.venv` (whose `.pth` points at <project>/src), as `tmp_path/proj`: a
    copy (`copy_project`) of the one this process built first. Building costs ~3 s of CPU
    (venv + `pip install -e`), a copy ~0.1 s.

    `real_site`: the venv reads the test venv's packages where this process imported them
    from (`TEST_SITE`, its pytest plugins' metadata included), for runs that set
    `PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`: a sandboxed verification then starts from the
    bytecode the product seeds it with (verify/bytecode.py, modules this process imported),
    0.25 s of CPU per pytest run instead of 0.55 s compiling pytest again through the links
    of `plugin_free_site`, whose paths no process here imported from."""
    name = "calc-real-site" if real_site else "calc"
    template = _TEMPLATES.get(name)
    if template is None:
        folder = process_folder(f"ai-sdlc-test-{name}-")
        with own_git_config(folder):
            template = _TEMPLATES[name] = build_calc(folder, real_site=real_site).root
    return copy_project(template, tmp_path)


#: The projects this process built once: {name: project root}.
_TEMPLATES: dict[str, Path] = {}


def build_calc(tmp_path: Path, *, real_site: bool = False) -> Repo:
    """`calc_project` built from nothing: `git init`, the files, the venv, one commit."""
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70.1"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "calc"\nversion = "0.1"\n'
    )
    (root / "src" / "calc").mkdir(parents=True)
    (root / "src" / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_add.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / "requirements.txt").write_text("# no third-party dependency\n")
    with open(root / ".gitignore", "a") as handle:
        handle.write(".venv/\n__pycache__/\n*.egg-info/\n")
    build_venv(root, real_site=real_site)
    repo.commit_all("calc")
    return repo


def copy_project(template: Path, tmp_path: Path) -> Repo:
    """A copy of the project at `template` (a `calc_project` root) as `tmp_path/proj`, its venv
    relocated: every file pip and venv wrote with the template's path (the editable `.pth`,
    `direct_url.json`, `pyvenv.cfg`, the activate scripts) names the copy instead, and the
    `RECORD` hashes follow, as `pip install -e` in the copy would have written them. A copy
    costs milliseconds; building the venv again about 4 s."""
    root = tmp_path / "proj"
    shutil.copytree(template, root, symlinks=True)
    old, new = str(template).encode(), str(root).encode()
    venv = root / ".venv"
    changed: set[Path] = set()
    for path in venv.rglob("*"):
        if path.is_symlink() or not path.is_file() or path.suffix == ".pyc":
            continue
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))
            changed.add(path)
    for record in venv.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        site = record.parent.parent
        lines = []
        for line in record.read_text().splitlines():
            name, _, _ = line.partition(",")
            target = (site / name).resolve()
            if target in changed:
                data = target.read_bytes()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                line = f"{name},sha256={digest.decode()},{len(data)}"
            lines.append(line)
        record.write_text("\n".join(lines) + "\n")
    git(root, "update-index", "-q", "--refresh")  # new inodes: refresh git's stat cache
    return Repo(root, None)


def pytest_script(root: Path) -> None:
    """The console script pip writes for pytest into the project's venv."""
    bin_dir = root / ".venv" / "bin"
    (bin_dir / "pytest").write_text(
        f"#!{bin_dir / 'python'}\nimport sys\nfrom pytest import console_main\n"
        "sys.exit(console_main())\n"
    )
    (bin_dir / "pytest").chmod(0o755)
