"""Which YAML reader a story run uses: libyaml's C loader for ordinary files, ruamel (the
pure-Python reference reader, 10-25x slower) only for a file libyaml's path cannot take, which
then runs the same. A real process is needed: what matters is which modules that process
imported by the time it exits.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.config import write_default_config
from tests.conftest import cli_environment
from tests.support.fakes.gh_support import install_gh
from tests.support.git_support import Repo, git_env, make_repo

__all__ = ["git_env"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(os.name == "nt", reason="the gh stand-in is a POSIX script"),
]

#: Runs the real entry point and, however it exits, records the YAML modules it imported.
_PROBE = """
import sys
report = sys.argv.pop(1)
from ai_sdlc.cli import app
try:
    app.main()
finally:
    with open(report, "w") as out:
        out.write(repr(sorted(m for m in sys.modules if m.split(".")[0] in {"yaml", "ruamel"})))
"""


def project(tmp_path: Path) -> Repo:
    """A git project with a bare origin, the default (commented) config.yaml and passing
    verification commands."""
    repo = make_repo(tmp_path)
    write_default_config(repo.root)
    config = repo.root / ".ai-sdlc" / "config.yaml"
    passing = json.dumps(shlex.join([sys.executable, "-c", "pass"]))
    text = config.read_text()
    text = text.replace("  build: null\n", f"  build: {passing}\n")
    text = text.replace("  test: null\n", f"  test: {passing}   # same command\n")
    config.write_text(text)
    return repo


def run_cli_probed(tmp_path: Path, repo: Repo, *args: str) -> tuple[list[str], str]:
    """(YAML modules the process imported, its output) of `ai-sdlc <args>`."""
    bin_dir, report = tmp_path / "bin", tmp_path / "modules.txt"
    install_gh(bin_dir)
    env = cli_environment({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    argv = [sys.executable, "-c", _PROBE, str(report), "--project", str(repo.root)]
    proc = subprocess.run(
        [*argv, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    modules = ast.literal_eval(report.read_text())
    assert isinstance(modules, list)
    return modules, proc.stdout + proc.stderr


def frontmatter(repo: Repo, story_id: str) -> str:
    text = (repo.root / ".ai-sdlc" / "stories" / story_id / "story.md").read_text()
    return text.split("---\n")[1]


def ruamel_imported(modules: list[str]) -> bool:
    return any(name.split(".")[0] == "ruamel" for name in modules)


def test_a_story_run_reads_ordinary_files_with_libyaml_alone(tmp_path: Path) -> None:
    repo = project(tmp_path)
    sid = repo.story('Add a greeting: it\'s "quoted" # not a comment')

    modules, output = run_cli_probed(tmp_path, repo, "run", sid)

    assert "yaml._yaml" in modules and not ruamel_imported(modules), f"{modules}\n{output}"
    fm = frontmatter(repo, sid)
    assert "\nstatus: done\n" in fm
    assert "\nusage:\n  input_tokens: " in fm  # a nested mapping the run wrote and re-read
    assert "title: 'Add a greeting: it''s \"quoted\" # not a comment'\n" in fm
    modules, output = run_cli_probed(tmp_path, repo, "status")  # the listing
    assert not ruamel_imported(modules), f"`status` imported {modules}\n{output}"
    assert sid in output


def test_a_story_only_the_full_readers_understand_still_runs(tmp_path: Path) -> None:
    repo = project(tmp_path)
    sid = repo.story("Keep my notes")
    path = repo.root / ".ai-sdlc" / "stories" / sid / "story.md"
    notes = "notes: |\n  line one\n    kept as written\nlinks: &l [a, b]\nsame: *l\n"
    text = path.read_text()
    path.write_text(text.replace("\n---\n", "\n" + notes + "---\n", 1))
    repo.commit_all("notes")

    modules, output = run_cli_probed(tmp_path, repo, "run", sid)

    assert ruamel_imported(modules), f"{modules}\n{output}"  # the reference reader read it
    fm = frontmatter(repo, sid)
    assert "\nstatus: done\n" in fm
    assert notes in fm  # untouched lines stay byte for byte
