"""Each story worktree gets its own environment, and verification never judges the main
checkout's code: end to end through the real CLI, on a src-layout project installed editable
(`pip install -e .`) into its own `.venv`, with a `command` agent
(tests/support/fakes/project_agent.py)
doing every phase in the story's worktree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.store import StoryStore
from ai_sdlc.worktree_env import wrongtree
from tests.conftest import STATE_HOME, run_cli
from tests.support import npm_cache
from tests.support.fakes.project_agent import JS_MUL_TEST
from tests.support.git_support import Repo, git, git_env, make_repo
from tests.support.held_support import start_at_implement
from tests.support.paths import FAKES
from tests.support.worktree_env_support import RECIPE, VERIFY, calc_project, pytest_script

__all__ = ["git_env"]

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]

AGENT = FAKES / "project_agent.py"
ENV = {"AI_SDLC_PROVIDER": "command"}


def configure(
    root: Path, log: Path, behaviour: str, *, setup: str | None = RECIPE, retries: int = 1
) -> None:
    template = [sys.executable, str(AGENT), str(log), behaviour, "{phase}"]
    text = (
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        f"verify:\n  test: {VERIFY}\n"
        f"limits:\n  implementation_retries: {retries}\n"
    )
    if setup is not None:
        text += f"worktree:\n  setup: {setup}\n"
    log.parent.mkdir(exist_ok=True)  # the agent's call log: a folder the project's list names
    text += f"sandbox:\n  writable: [{json.dumps(str(log.parent))}]\n"
    (root / ".ai-sdlc" / "config.yaml").write_text(text)


def frontmatter(root: Path, sid: str) -> dict[str, object]:
    return dict(StoryStore(root).get(sid).frontmatter)


def events(root: Path, sid: str) -> list[dict[str, object]]:
    log = root / ".ai-sdlc" / "stories" / sid / "events.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_the_main_venv_really_points_at_the_main_checkout(tmp_path: Path) -> None:
    """The set-up the guard exists for: the project's venv imports <project>/src."""
    root = calc_project(tmp_path).root
    found = wrongtree.check(
        [("test", VERIFY)],
        worktree=root / ".ai-sdlc" / "worktrees" / "S-0001",
        main=root,
        project=root,
        worktrees_root=root / ".ai-sdlc" / "worktrees",
        environ={"PATH": "/usr/bin:/bin"},
    )
    assert [Path(f.target) for f in found] == [root / "src"]
    assert Path(found[0].marker).name.startswith("__editable__")


def test_3_without_a_setup_the_wrong_tree_guard_stops_before_any_agent_call(
    tmp_path: Path,
) -> None:
    """Then, the suggested setup given, the same story: an agent that breaks the code only in
    the worktree (where the main venv would still pass: it imports <main>/src) is never done,
    its one attempt counted (test 2, walked on this story's second run)."""
    repo = calc_project(tmp_path)
    root, log = repo.root, tmp_path / "records" / "agent.log"
    configure(root, log, "break-py", setup=None, retries=0)  # after the fix: one attempt will do
    sid = repo.story("Refactor add")
    start_at_implement(root, sid)  # the guard and the attempt are the point, not earlier phases
    result = run_cli(root, "run", sid, env=ENV)
    assert result.returncode == 3, result.output
    message = " ".join(result.output.split())
    assert f"verification would test {root / 'src'}, not the story's worktree" in message
    assert "set worktree.setup (suggested: ai-sdlc config worktree.setup" in message
    assert "ai-sdlc worktrees venv" in message
    assert "Traceback" not in result.output
    assert calls(log) == []  # no agent was called
    fm = frontmatter(root, sid)
    assert fm.get("total_recovery_attempts", 0) == 0
    assert fm["status"] == "ready"  # as the user left it
    assert not [e for e in events(root, sid) if e.get("action") == "phase_started"]
    # The suggested fix, as suggested: the same story then runs, and the broken code fails.
    fixed = run_cli(root, "config", "worktree.setup", RECIPE)
    assert fixed.returncode == 0, fixed.output
    # 2: the agent breaks the code only in the worktree: never done, the attempt counted.
    again = run_cli(root, "run", sid, env=ENV)
    assert again.returncode == 5, again.output
    fm = frontmatter(root, sid)
    assert fm["status"] == "blocked"
    assert "assert -1 == 5" in str(fm["blocked_reason"]) or "test_add" in again.output
    assert fm["total_recovery_attempts"] == 1  # the attempt failed verification, counted
    assert calls(log).count("implement") == 1
    assert calls(log).count("implement") + calls(log).count("rework") == 1
    assert "review" not in calls(log)
    # The main checkout's code, which the main venv imports, still passes its test.
    assert "a + b" in (root / "src" / "calc" / "__init__.py").read_text()


def test_4_doctor_names_the_problem_and_the_fix_then_says_ok(tmp_path: Path) -> None:
    repo = calc_project(tmp_path)
    root = repo.root
    configure(root, tmp_path / "records" / "agent.log", "honest-py", setup=None)
    before = run_cli(root, "doctor")
    assert before.returncode == 3, before.output
    text = " ".join(before.output.split())
    assert f"✗ verification would test {root / 'src'}, not the story's worktree" in text
    assert "fix: set worktree.setup, e.g. ai-sdlc config worktree.setup" in text
    report = json.loads(run_cli(root, "doctor", "--json").stdout)
    assert report["worktree_environment"]["ok"] is False
    assert run_cli(root, "config", "worktree.setup", RECIPE).returncode == 0
    after = run_cli(root, "doctor")
    assert after.returncode == 0, after.output
    assert "✓ worktree.setup gives each story worktree its own environment" in after.output


def test_setup_runs_once_and_again_when_its_inputs_change(tmp_path: Path) -> None:
    """The setup's hash lives in the worktree's git folder; an attempt that changes an input
    (requirements.txt) gets the setup again before its verification."""
    repo = calc_project(tmp_path)
    root, log = repo.root, tmp_path / "records" / "agent.log"
    counter = tmp_path / "records" / "setups.log"
    counting = json.dumps(
        [
            "ai-sdlc worktrees venv",
            f"{sys.executable} -c \"open('{counter}', 'a').write('x')\"",
        ]
    )
    configure(root, log, "honest-deps", setup=counting)
    (root / ".ai-sdlc" / "config.yaml").write_text(
        (root / ".ai-sdlc" / "config.yaml").read_text() + "git:\n  keep_worktrees: true\n"
    )
    sid = repo.story("Add mul")
    start_at_implement(root, sid)  # the setup's runs are the point, not the earlier phases
    result = run_cli(root, "run", sid, env=ENV)
    assert result.returncode == 0, result.output
    assert counter.read_text() == "xx"  # at creation, then after requirements.txt changed
    worktree = root / str(frontmatter(root, sid)["worktree_path"])
    assert worktree.is_dir()  # git.keep_worktrees
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    stamp = json.loads((admin / "ai-sdlc-setup.json").read_text())
    assert stamp["commands"] == json.loads(counting)
    # The worktree's own venv is tiny and imports the worktree's code.
    venv = worktree / ".venv"
    size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    assert size < 1_000_000
    shown = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import calc; print(calc.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert shown == str(worktree / "src" / "calc" / "__init__.py")
    assert git(worktree, "status", "--porcelain") == ""  # the venv is not for git
    again = run_cli(root, "run", sid, env=ENV)
    assert again.returncode == 0, again.output
    assert counter.read_text() == "xx"  # nothing changed: not run again


def test_a_failing_setup_stops_the_run_as_a_setup_problem_not_an_attempt(tmp_path: Path) -> None:
    repo = calc_project(tmp_path)
    root, log = repo.root, tmp_path / "records" / "agent.log"
    failing = json.dumps([f"{sys.executable} -c \"import sys; sys.exit('no such package: nope')\""])
    configure(root, log, "honest-py", setup=failing)
    sid = repo.story("Add mul")
    result = run_cli(root, "run", sid, env=ENV)
    assert result.returncode == 3, result.output
    message = " ".join(result.output.split())
    assert "worktree setup failed in" in message and "no such package: nope" in message
    assert "no agent attempt was made or counted" in message
    assert calls(log) == []
    fm = frontmatter(root, sid)
    assert fm.get("total_recovery_attempts", 0) == 0
    assert fm["status"] == "backlog"


def test_a_relative_verify_program_missing_from_the_worktree_runs_from_the_project(
    tmp_path: Path,
) -> None:
    """`.venv/bin/python` is not in a worktree without a setup: it runs from the main checkout
    (here a venv without the project installed, so the guard has nothing to object to), in the
    worktree; once the worktree has its own, that one runs."""
    repo = make_repo(tmp_path, remote=False)
    root, log = repo.root, tmp_path / "records" / "agent.log"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    with open(root / ".gitignore", "a") as handle:
        handle.write(".venv/\n")
    seen = tmp_path / "records" / "seen.txt"
    (root / "check.py").write_text(
        f"import os, sys\nopen({str(seen)!r}, 'a').write(f'{{sys.prefix}} {{os.getcwd()}}\\n')\n"
    )
    repo.commit_all("check")
    configure(root, log, "note", setup=None)
    config = root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text().replace(VERIFY, ".venv/bin/python check.py"))
    sid = repo.story("Write a note")
    start_at_implement(root, sid)  # where verification runs is the point, not earlier phases
    result = run_cli(root, "run", sid, env=ENV)
    assert result.returncode == 0, result.output
    worktree = root / ".ai-sdlc" / "worktrees" / f"{sid}-write-a-note"
    assert seen.read_text().splitlines()[0] == f"{root / '.venv'} {worktree}"
    # With its own venv (here a plain one made by the setup), the worktree's runs.
    made = json.dumps([f"{sys.executable} -m venv --without-pip .venv"])
    assert run_cli(root, "config", "worktree.setup", made).returncode == 0
    second = repo.story("Another note")
    start_at_implement(root, second)
    assert run_cli(root, "run", second, env=ENV).returncode == 0
    other = root / ".ai-sdlc" / "worktrees" / f"{second}-another-note"
    assert seen.read_text().splitlines()[-1] == f"{other / '.venv'} {other}"


def test_the_venv_command_outside_a_setup_says_what_it_is_for(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "worktrees", "venv")
    assert result.returncode == 2, result.output
    assert "AI_SDLC_PROJECT is not set" in result.stderr and "worktree.setup" in result.stderr


def test_changing_worktrees_dir_never_strands_a_story_worktree(tmp_path: Path) -> None:
    """Also test 1, an honest agent adding a module reaches done, verified by the venv's own
    `pytest` console script (in the worktree: the worktree's venv's). The same story verified
    by `.venv/bin/python -m pytest` (VERIFY) reaches done in
    `test_setup_runs_once_and_again_when_its_inputs_change`."""
    repo = calc_project(tmp_path)
    root, log = repo.root, tmp_path / "records" / "agent.log"
    pytest_script(root)
    configure(root, log, "honest-py")
    config = root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text().replace(VERIFY, ".venv/bin/pytest -q -p no:cacheprovider"))
    sid = repo.story("Add mul")
    start_at_implement(root, sid)  # the worktree made before the move is the point
    first = run_cli(root, "run", sid, "--step", "implement", env=ENV)
    assert first.returncode == 0, first.output
    assert calls(log) == ["implement"]
    recorded = str(frontmatter(root, sid)["worktree_path"])
    assert recorded.startswith(".ai-sdlc/worktrees/")
    moved = tmp_path / "elsewhere"
    assert run_cli(root, "config", "git.worktrees_dir", str(moved)).returncode == 0
    listed = json.loads(run_cli(root, "worktrees", "--json").stdout)["worktrees"]
    assert [w["story"] for w in listed] == [sid]
    result = run_cli(root, "run", sid, env=ENV)
    assert result.returncode == 0, result.output
    fm = frontmatter(root, sid)
    assert fm["status"] == "done"
    assert fm.get("total_recovery_attempts", 0) == 0
    assert calls(log).count("implement") == 1
    branch = str(fm["branch"])
    assert git(root, "show", f"{branch}:src/calc/mul.py") == "def mul(a, b):\n    return a * b\n"
    assert "removed worktree" in result.stderr
    assert not (root / "src" / "calc" / "mul.py").exists()  # the main checkout is untouched
    assert fm["worktree_path"] == recorded  # found where it was, not made again elsewhere
    made = sorted(p.name for p in moved.iterdir()) if moved.exists() else []
    # No second worktree there: at most the done one, parked for the next story (`git/pool`).
    assert set(made) <= {".gitignore", ".pool"}
    assert not (root / recorded).exists()


def test_init_proposes_a_setup_for_what_it_finds(tmp_path: Path) -> None:
    py = tmp_path / "py"
    py.mkdir()
    (py / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    (py / "package-lock.json").write_text("{}\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(py / ".venv")], check=True)
    done = run_cli(py, "init", "--json")
    assert done.returncode == 0, done.output
    assert json.loads(done.stdout)["worktree_setup"] == [RECIPE[2:-2], "npm ci"]
    text = (py / ".ai-sdlc" / "config.yaml").read_text()
    assert (
        '  setup: ["ai-sdlc worktrees venv", "npm ci"]  # proposed by `ai-sdlc init` for '
        "pyproject.toml, package-lock.json\n" in text
    )
    shown = run_cli(py, "config", "worktree.setup")
    assert shown.returncode == 0, shown.output
    assert "npm ci" in shown.stdout
    uv = tmp_path / "uv"
    uv.mkdir()
    (uv / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    (uv / "uv.lock").write_text("version = 1\n")
    no_active_venv = {"VIRTUAL_ENV": ""}  # as when ai-sdlc runs from no activated venv
    assert run_cli(uv, "init", env=no_active_venv).returncode == 0
    wanted = '["uv sync --frozen"]' if shutil.which("uv") else "[]"  # no uv, no venv: nothing
    assert f"  setup: {wanted}" in (uv / ".ai-sdlc" / "config.yaml").read_text()
    novenv = tmp_path / "novenv"  # verification runs the machine's interpreter: no setup
    novenv.mkdir()
    (novenv / "setup.py").write_text("")
    assert run_cli(novenv, "init", env=no_active_venv).returncode == 0
    assert "  setup: []" in (novenv / ".ai-sdlc" / "config.yaml").read_text()
    bare = tmp_path / "bare"
    bare.mkdir()
    assert run_cli(bare, "init").returncode == 0
    assert "  setup: []" in (bare / ".ai-sdlc" / "config.yaml").read_text()


# --- a Node project, its worktrees outside the project ---------------------------------------

PACKAGE_JSON = {
    "name": "calcjs",
    "version": "1.0.0",
    "private": True,
    "scripts": {"test": "node --test test/"},
    "devDependencies": {"is-number": "7.0.0"},
}
ADD_TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const isNumber = require('is-number');\nconst add = require('../add.js');\n"
    "test('add', () => { assert.ok(isNumber(add(2, 3))); assert.strictEqual(add(2, 3), 5); });\n"
)


@pytest.fixture(scope="session")
def npm_lock() -> str:
    """package-lock.json of the Node project, its packages in the npm cache of this process's
    state home (tests/support/npm_cache.py: fetched once per machine, then offline)."""
    warm = npm_cache.warm("is-number", PACKAGE_JSON)
    npm_cache.seed(warm, Path(STATE_HOME))
    return npm_cache.lock(warm)


def node_project(
    tmp_path: Path, lock: str, log: Path, behaviour: str, setup: str, *, retries: int = 0
) -> Repo:
    """The Node project; `retries` implementation retries (none by default: one judged
    attempt is what these tests are about, the retry path is the Python tests')."""
    repo = make_repo(tmp_path, remote=False)
    root = repo.root
    (root / "package.json").write_text(json.dumps(PACKAGE_JSON))
    (root / "package-lock.json").write_text(lock)
    (root / "add.js").write_text("module.exports = (a, b) => a + b;\n")
    (root / "test").mkdir()
    (root / "test" / "add.test.js").write_text(ADD_TEST)
    with open(root / ".gitignore", "a") as handle:
        handle.write("node_modules/\n")
    repo.commit_all("calcjs")
    template = [sys.executable, str(AGENT), str(log), behaviour, "{phase}"]
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        "verify:\n  test: npm test\n"
        f"limits:\n  implementation_retries: {retries}\n"
        f"git:\n  worktrees_dir: {tmp_path / 'worktrees'}\n"
        f"worktree:\n  setup: {setup}\n"
        f"sandbox:\n  writable: [{json.dumps(str(log.parent))}]\n"  # the agent's call log
    )
    log.parent.mkdir(exist_ok=True)
    return repo


def test_node_without_a_setup_nothing_resolves_outside_the_project(
    tmp_path: Path, npm_lock: str
) -> None:
    """The Node project without the setup: outside the project, `is-number` is found nowhere.
    (With it, a broken story is never done: `test_node_stories_outside_the_project_...`.)"""
    bare = node_project(tmp_path, npm_lock, tmp_path / "records" / "agent.log", "honest-js", "[]")
    sid = bare.story("Add mul")
    start_at_implement(bare.root, sid)  # the earlier phases are not the point
    result = run_cli(bare.root, "run", sid, env=ENV)
    assert result.returncode == 5, result.output
    failures = [str(e.get("feedback")) for e in events(bare.root, sid) if e.get("feedback")]
    assert failures and all("Cannot find module 'is-number'" in f for f in failures)


def use_agent(root: Path, log: Path, behaviour: str) -> None:
    """The project's `command` agent switched to `behaviour`, logging to `log` (in the same
    records folder): `ai.command` is no guardrail, a hand edit needs no confirming."""
    config = root / ".ai-sdlc" / "config.yaml"
    old = next(ln for ln in config.read_text().splitlines() if ln.startswith("    template: "))
    template = [sys.executable, str(AGENT), str(log), behaviour, "{phase}"]
    config.write_text(config.read_text().replace(old, f"    template: {json.dumps(template)}"))


def test_node_stories_outside_the_project_honest_done_gaming_never(
    tmp_path: Path, npm_lock: str
) -> None:
    """One Node project, `test/mul.test.js` written first (failing: no mul.js at the base),
    worktrees outside the project, `npm ci` per worktree; two stories on the same base (its
    baseline taken once). An honest one is done with node_modules in its worktree only. The
    other is refused at each of its three attempts (two implementation retries, set as a user
    would), each judged in its own worktree set up once: a wrong mul.js with the test weakened
    (`assert.ok(true)`), then deleted, passes `npm test` and is still refused (the base's
    version of the test fails against it); then add.js broken fails `npm test`. Each attempt
    is counted, none is committed, the reviewer is never asked. Both stories start at their
    implementation (`start_at_implement`, as a user hand-edits them), the earlier phases not
    being their point. `--offline`: the lock's packages are in npm's cache (`npm_lock`
    seeded it)."""
    log = tmp_path / "records" / "honest.log"
    setup = json.dumps([npm_cache.NPM_CI_OFFLINE])
    repo = node_project(tmp_path, npm_lock, log, "honest-js", setup, retries=2)
    (repo.root / "test" / "mul.test.js").write_text(JS_MUL_TEST)
    repo.commit_all("a failing test for mul, written first")
    sid = repo.story("Add mul")
    start_at_implement(repo.root, sid)
    result = run_cli(repo.root, "run", sid, env=ENV)
    assert result.returncode == 0, result.output
    fm = frontmatter(repo.root, sid)
    assert fm["status"] == "done"
    assert fm.get("total_recovery_attempts", 0) == 0
    assert calls(log) == ["implement", "review"]
    assert str(fm["worktree_path"]).startswith(str(tmp_path / "worktrees"))
    assert "a * b" in git(repo.root, "show", f"{fm['branch']}:mul.js")
    assert not (repo.root / "node_modules").exists()  # installed in the worktree only
    assert not Path(str(fm["worktree_path"])).exists()  # done: removed with node_modules

    log = tmp_path / "records" / "games-js.log"
    use_agent(repo.root, log, "games-js")  # weaken-js, delete-js, break-js: one an attempt
    sid = repo.story("Add mul, gamed")
    start_at_implement(repo.root, sid)
    result = run_cli(repo.root, "run", sid, env=ENV)
    assert result.returncode == 5, result.output
    fm = frontmatter(repo.root, sid)
    assert fm["status"] == "blocked"
    assert fm["recovery_breakdown"] == {"implementation_retry": 3}
    assert fm["total_recovery_attempts"] == 3  # each attempt counted
    reasons = [str(e["reason"]) for e in events(repo.root, sid) if e.get("action") == "recovery"]
    assert len(reasons) == 3, reasons
    held = "test/mul.test.js: the story's change removes or weakens"
    assert reasons[0].startswith(held) and reasons[1].startswith(held), reasons  # weaken, delete
    assert reasons[2].startswith("add: "), reasons  # break-js: `npm test` failed
    assert calls(log) == ["implement"] * 3  # the reviewer never asked
    assert git(repo.root, "rev-list", "--count", f"main..{fm['branch']}").strip() == "0"


# --- setup failures: before any attempt, or caused by one -------------------------------------


def plain_project(tmp_path: Path, log: Path, behaviour: str, worktree: str) -> Repo:
    """A project without Python packaging: `requirements.txt` is the setup's input, the
    verification a no-op."""
    repo = make_repo(tmp_path, remote=False)
    (repo.root / "requirements.txt").write_text("# nothing\n")
    repo.commit_all("requirements")
    template = [sys.executable, str(AGENT), str(log), behaviour, "{phase}"]
    verify = json.dumps(f"{sys.executable} -c pass")
    (repo.root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        f"verify:\n  test: {verify}\n"
        "limits:\n  implementation_retries: 1\n"
        f"worktree:\n{worktree}"
        f"sandbox:\n  writable: [{json.dumps(str(log.parent))}]\n"  # the agent's call log
    )
    log.parent.mkdir(exist_ok=True)
    return repo


def test_a_setup_that_outlives_its_time_limit_is_killed_and_stops_the_run(tmp_path: Path) -> None:
    log = tmp_path / "records" / "agent.log"
    sleeper = json.dumps([f'{sys.executable} -c "import time; time.sleep(60)"'])
    repo = plain_project(tmp_path, log, "honest-py", f"  setup: {sleeper}\n  setup_timeout: 0.5\n")
    sid = repo.story("Anything")
    result = run_cli(repo.root, "run", sid, env=ENV)
    assert result.returncode == 3, result.output
    assert "timed out" in result.stderr and "worktree setup failed" in result.stderr
    assert calls(log) == []
    assert frontmatter(repo.root, sid).get("total_recovery_attempts", 0) == 0


def test_a_setup_broken_by_an_attempt_fails_that_attempt_and_is_counted(tmp_path: Path) -> None:
    """The setup passed on the checked-out worktree; the attempt broke its input: that is the
    attempt's failure (an implementation retry with the setup's output), not a setup problem."""
    log = tmp_path / "records" / "agent.log"
    picky = json.dumps(
        [
            f'{sys.executable} -c "import sys; '
            "sys.exit('bad requirements' if 'broken' in open('requirements.txt').read() else 0)\""
        ]
    )
    repo = plain_project(tmp_path, log, "break-deps", f"  setup: {picky}\n")
    sid = repo.story("Pin things")
    result = run_cli(repo.root, "run", sid, env=ENV)
    assert result.returncode == 5, result.output
    fm = frontmatter(repo.root, sid)
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == 2
    failures = [str(e.get("feedback")) for e in events(repo.root, sid) if e.get("feedback")]
    assert len(failures) == 2 and all("bad requirements" in f for f in failures)


def test_setup_settings_are_checked_like_any_config(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, remote=False)
    for key, value in (
        ("worktree.setup", "5"),
        ("worktree.setup", '["npm ci", "\'unbalanced"]'),
        ("worktree.setup_inputs", '["../outside.lock"]'),
        ("worktree.setup_timeout", "0"),
    ):
        refused = run_cli(repo.root, "config", key, value)
        assert refused.returncode == 2, (key, value, refused.output)  # typed: a usage error
        assert key in refused.stderr and "Traceback" not in refused.output
    assert run_cli(repo.root, "config", "worktree.setup_inputs", '["deps.lock"]').returncode == 0


def test_an_activated_main_venv_and_a_bare_pytest(tmp_path: Path) -> None:
    """`verify.test: pytest -q` with the project's venv activated (its bin first on PATH): the
    guard follows PATH to the main venv's pytest; with the setup, verification in the worktree
    runs with the worktree's venv activated instead."""
    repo = calc_project(tmp_path)
    root, log = repo.root, tmp_path / "records" / "agent.log"
    bin_dir = root / ".venv" / "bin"
    pytest_script(root)
    configure(root, log, "honest-py", setup=None)
    config = root / ".ai-sdlc" / "config.yaml"
    config.write_text(config.read_text().replace(VERIFY, "pytest -q -p no:cacheprovider"))
    activated = {
        **ENV,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "VIRTUAL_ENV": str(root / ".venv"),
    }
    sid = repo.story("Add mul")
    start_at_implement(root, sid)  # verification is the point, not the earlier phases
    stopped = run_cli(root, "run", sid, env=activated)
    assert stopped.returncode == 3, stopped.output
    assert f"verification would test {root / 'src'}" in " ".join(stopped.output.split())
    assert "verify.test runs" in stopped.output and str(bin_dir / "python") in stopped.output
    assert run_cli(root, "config", "worktree.setup", RECIPE).returncode == 0
    done = run_cli(root, "run", sid, env=activated)
    assert done.returncode == 0, done.output
    assert frontmatter(root, sid)["status"] == "done"


def _landlock_abi() -> int:
    from ai_sdlc.sandbox import landlock

    try:
        return landlock.abi_version()
    except OSError:
        return 0


@pytest.mark.skipif(_landlock_abi() == 0, reason="this kernel has no usable Landlock")
def test_setup_commands_run_in_the_sandbox(tmp_path: Path) -> None:
    """A setup command writes its worktree (and the tools' caches), never the main checkout
    (the default sandbox)."""
    log = tmp_path / "records" / "agent.log"
    repo = make_repo(tmp_path, remote=False)
    escaped = repo.root / "escaped.txt"
    writer = json.dumps(
        [
            f"{sys.executable} -c \"open('setup.log', 'w').write('ok')\"",
            f"{sys.executable} -c \"open('{escaped}', 'w').write('no')\"",
        ]
    )
    template = [sys.executable, str(AGENT), str(log), "note", "{phase}"]
    (repo.root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(template)}\n"
        f"verify:\n  test: {json.dumps(f'{sys.executable} -c pass')}\n"
        f"worktree:\n  setup: {writer}\n"
    )
    sid = repo.story("Anything")
    result = run_cli(repo.root, "run", sid, env=ENV)
    assert result.returncode == 3, result.output
    assert "worktree setup failed" in result.stderr
    assert "PermissionError" in result.stderr or "Permission denied" in result.stderr
    assert not escaped.exists()
    worktree = repo.root / ".ai-sdlc" / "worktrees" / f"{sid}-anything"
    assert (worktree / "setup.log").read_text() == "ok"  # `*.log` is git-ignored here
    assert calls(log) == []


def test_a_setup_that_leaves_files_git_would_commit_is_refused(tmp_path: Path) -> None:
    """Its output would be taken for the agent's work (a read-only phase's violation, or files
    committed with the first attempt): the run stops before any agent."""
    log = tmp_path / "records" / "agent.log"
    messy = json.dumps([f"{sys.executable} -c \"open('generated.txt', 'w').write('x')\""])
    repo = plain_project(tmp_path, log, "note", f"  setup: {messy}\n")
    sid = repo.story("Anything")
    result = run_cli(repo.root, "run", sid, env=ENV)
    assert result.returncode == 3, result.output
    message = " ".join(result.output.split())
    assert "worktree.setup changed files git would commit" in message
    assert "generated.txt" in message and "add them to .gitignore" in message
    assert calls(log) == []
    assert frontmatter(repo.root, sid).get("total_recovery_attempts", 0) == 0
