"""Benchmark one story worktree's own Python environment: time and disk.

A src-layout project with about 20 third-party dependencies (and their own), installed editable
into its `.venv` the usual way, gets two story worktrees. In the first, the plain recipe:
`python -m venv .venv` + `.venv/bin/pip install -e .`; in the second, ai-sdlc's default
(`ai-sdlc worktrees venv`: a `--without-pip` venv layered on the project's, the project itself
from the worktree), run as `worktree.setup` runs it (a real `python -m ai_sdlc` process). Where
`uv` is on PATH, `uv venv` + `uv pip install -e .` is measured too. The package cache is warmed
first (the main venv's install downloads what it needs once). Each worktree venv must import
the package from its own worktree (checked).

Disk is the blocks of the venv's files that no other file shares (hard links into a cache, as uv
makes, are reported apart). Goal (issue 23): <= 3 s and <= 10 MB per worktree.

    python bench/bench_worktree_env.py [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEPENDENCIES = (
    "typer", "rich", "pygments", "markdown-it-py", "mdurl", "shellingham", "msgspec", "pyyaml",
    "ruamel.yaml", "platformdirs", "python-frontmatter", "packaging", "iniconfig", "pluggy",
    "idna", "sniffio", "anyio", "typing-extensions", "tenacity", "attrs",
)  # fmt: skip
GOAL_SECONDS = 3.0
GOAL_MB = 10.0


def sh(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Run `argv`; its wall time in seconds (fails loudly)."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - started


def make_project(root: Path) -> None:
    (root / "src" / "benchpkg").mkdir(parents=True)
    (root / "src" / "benchpkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_add.py").write_text(
        "from benchpkg import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    deps = ", ".join(f'"{d}"' for d in DEPENDENCIES)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n'
        f'\n[project]\nname = "benchpkg"\nversion = "0.1"\ndependencies = [{deps}]\n'
        '\n[project.optional-dependencies]\ndev = ["pytest>=8"]\n'
    )
    (root / ".gitignore").write_text(".venv/\n__pycache__/\n*.egg-info/\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    sh([*git, "init", "-q", "-b", "main"], root)
    sh([*git, "add", "-A"], root)
    sh([*git, "commit", "-q", "-m", "init"], root)


def disk(folder: Path) -> tuple[float, float, int]:
    """(MB of blocks only this venv holds, MB hard-linked from elsewhere, file count)."""
    own = shared = 0
    files = 0
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            if st.st_nlink > 1 and not os.path.islink(os.path.join(dirpath, name)):
                shared += st.st_blocks * 512
            else:
                own += st.st_blocks * 512
    return own / 1e6, shared / 1e6, files


def imports_from(worktree: Path) -> bool:
    python = worktree / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import benchpkg, rich, typer; print(benchpkg.__file__)"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode == 0 and done.stdout.strip().startswith(str(worktree))


def worktree(root: Path, name: str) -> Path:
    folder = root.parent / name
    sh(["git", "worktree", "add", "-q", "-b", name, str(folder)], root)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ai-sdlc-bench-env-"))
    root = tmp / "project"
    root.mkdir()
    rows: list[tuple[str, float, float, float, int, bool]] = []
    try:
        make_project(root)
        base = sys.executable
        warm = sh([base, "-m", "venv", ".venv"], root)
        warm += sh([str(root / ".venv/bin/python"), "-m", "pip", "install", "-q", "-e", ".[dev]"],
                   root)  # fmt: skip
        print(f"main venv (cache warm-up, not counted): {warm:.1f} s", file=sys.stderr)

        plain = worktree(root, "plain")
        seconds = sh([base, "-m", "venv", ".venv"], plain)
        seconds += sh([str(plain / ".venv/bin/python"), "-m", "pip", "install", "-q", "-e", "."],
                      plain)  # fmt: skip
        rows.append(("python -m venv + pip install -e .", seconds, *disk(plain / ".venv"),
                     imports_from(plain)))  # fmt: skip

        layered = worktree(root, "layered")
        env = {**os.environ, "AI_SDLC_PROJECT": str(root), "AI_SDLC_WORKTREE": str(layered)}
        seconds = sh([base, "-m", "ai_sdlc", "worktrees", "venv"], layered, env)
        rows.append(("ai-sdlc worktrees venv (default)", seconds, *disk(layered / ".venv"),
                     imports_from(layered)))  # fmt: skip

        uv = shutil.which("uv")
        if uv:
            fast = worktree(root, "uv")
            seconds = sh([uv, "venv", "-q", ".venv"], fast)
            seconds += sh([uv, "pip", "install", "-q", "-e", "."], fast,
                          {**os.environ, "VIRTUAL_ENV": str(fast / ".venv")})  # fmt: skip
            rows.append(("uv venv + uv pip install -e .", seconds, *disk(fast / ".venv"),
                         imports_from(fast)))  # fmt: skip
        else:
            print("uv: not on PATH, not measured", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"one story worktree's environment ({len(DEPENDENCIES)} direct dependencies)")
    print(f"{'recipe':<36} {'seconds':>8} {'own MB':>8} {'linked MB':>10} {'files':>7}  imports")
    for name, seconds, own, linked, files, ok in rows:
        where = "worktree" if ok else "WRONG TREE"
        print(f"{name:<36} {seconds:>8.2f} {own:>8.2f} {linked:>10.2f} {files:>7}  {where}")
    ours = rows[1]
    plain_row = rows[0]
    met = ours[1] <= GOAL_SECONDS and ours[2] <= GOAL_MB
    print(
        f"default vs plain: {plain_row[1] / max(ours[1], 1e-9):.0f}x faster, "
        f"{plain_row[2] / max(ours[2], 1e-9):.0f}x less disk; goal <= {GOAL_SECONDS:g} s and "
        f"<= {GOAL_MB:g} MB: {'met' if met else 'MISSED'}"
    )
    return 0 if all(row[5] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
