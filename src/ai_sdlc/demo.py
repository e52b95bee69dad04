"""`make demo`: the main job on the built-in offline `scripted` provider, in a temp project.

A tiny Python package with real pytest verification. Story S-0001 goes backlog → done. Story
S-0002's implementation keeps failing (and its API calls are rate limited once per attempt):
its phase limit would allow 5 implementation retries, but the global recovery limit counts
every kind of recovery and blocks it at 10. Everything runs through the real `ai-sdlc` CLI.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CALC = '''\
"""A tiny calculator package (the demo's project under development)."""


def add(a: int, b: int) -> int:
    return a + b
'''

TEST_CALC = """\
from calc import add


def test_add() -> None:
    assert add(2, 3) == 5
"""

GOOD_CALC = (
    CALC
    + """

def multiply(a: int, b: int) -> int:
    return a * b
"""
)

GOOD_TEST = (
    TEST_CALC
    + """

def test_multiply() -> None:
    from calc import multiply

    assert multiply(4, 5) == 20
"""
)


def _broken_divide(attempt: int) -> str:
    # Each attempt is wrong in a new way, so the run is not stopped as "no progress" and the
    # global recovery limit is what stops it.
    return GOOD_CALC + textwrap.dedent(f"""

        def divide(a: float, b: float) -> float:
            return round(a / b, {attempt})  # attempt {attempt}: wrong rounding
        """)


DIVIDE_TEST = (
    GOOD_TEST
    + """

def test_divide_rounds_to_two_places() -> None:
    from calc import divide

    assert divide(10, 3) == 3.33
"""
)


def _rules() -> str:
    lines = [
        "rules:",
        "  - phase: implement",
        "    story: S-0001",
        "    respond: Added multiply() with a test.",
        "    files:",
        f"      calc/__init__.py: {_yaml_str(GOOD_CALC)}",
        f"      tests/test_calc.py: {_yaml_str(GOOD_TEST)}",
    ]
    for attempt in range(1, 8):
        calc = _broken_divide(attempt + 2)  # never the 2 places the test wants
        lines += [
            "  - phase: implement",
            "    story: S-0002",
            f"    attempt: {attempt}",
            "    times: 1",
            "    fault: {kind: rate_limit, retry_after: 0.1}",
            "  - phase: implement",
            "    story: S-0002",
            f"    attempt: {attempt}",
            f"    respond: Attempt {attempt} at divide().",
            "    files:",
            f"      calc/__init__.py: {_yaml_str(calc)}",
            f"      tests/test_calc.py: {_yaml_str(DIVIDE_TEST)}",
        ]
    return "\n".join(lines) + "\n"


def _yaml_str(text: str) -> str:
    import json

    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def _cli(project: Path, *args: str, check: bool = True) -> int:
    cmd = [sys.executable, "-m", "ai_sdlc", "--project", str(project), *args]
    print(f"\n$ ai-sdlc {' '.join(shlex.quote(a) for a in args)}", flush=True)
    rc = subprocess.run(cmd, stdin=subprocess.DEVNULL).returncode
    if check and rc != 0:
        raise SystemExit(f"demo: 'ai-sdlc {' '.join(args)}' exited {rc}")
    return rc


def _git(project: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, text=True)
    return done.stdout


def _git_project(project: Path, origin: Path) -> None:
    """Make the demo project a git repository with a first commit, pushed to a local bare
    repository as `origin` (stories get a worktree and branch each, pushed there when done)."""
    _git(project, "init", "-q", "-b", "main")
    _git(project, "config", "user.name", "ai-sdlc demo")
    _git(project, "config", "user.email", "demo@example.invalid")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "calc: add()")
    _git(project.parent, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(project, "remote", "add", "origin", str(origin))
    _git(project, "push", "-q", "-u", "origin", "main")


def _show_story_branch(project: Path, story_id: str) -> None:
    """What the done story left in git: its worktree, its branch and the commit on it."""
    from ai_sdlc.store import StoryStore

    fm = StoryStore(project).get(story_id).frontmatter
    branch, worktree = str(fm.get("branch") or ""), str(fm.get("worktree_path") or "")
    if not branch:
        print(f"({story_id} has no branch: it ran in the project folder itself)")
        return
    commit = _git(project, "log", "--oneline", "-1", branch).strip()
    files = _git(project, "show", "--name-only", "--format=", branch).split()
    pushed = _git(project, "ls-remote", "--heads", "origin", branch).split()
    print(f"\n{story_id} in git (the main checkout stays on main, untouched):")
    if worktree and (project / worktree).is_dir():  # a done story's worktree is removed
        print(f"  worktree:  {worktree}")
    print(f"  branch:    {branch}" + (" (pushed to origin)" if pushed else ""))
    print(f"  commit:    {commit}")
    print(f"  files:     {', '.join(files)}")
    print(f"  pr_url:    {fm.get('pr_url') or '(none: see the publish step above)'}")


def main() -> None:
    os.environ["AI_SDLC_PROVIDER"] = "scripted"
    # The calc project needs no pytest plugin; loading every plugin installed next to pytest
    # (hypothesis, xdist... in a developer's venv) would triple each verification's start-up.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    base = Path(tempfile.mkdtemp(prefix="ai-sdlc-demo-"))
    project = base / "calc-project"
    (project / "calc").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "calc" / "__init__.py").write_text(CALC)
    (project / "tests" / "test_calc.py").write_text(TEST_CALC)
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\naddopts = "-q -p no:cacheprovider"\n'
    )
    # As in any Python project: the bytecode pytest leaves behind is never part of a commit.
    (project / ".gitignore").write_text("__pycache__/\n")
    has_git = shutil.which("git") is not None
    if has_git:
        _git_project(project, base / "origin.git")

    print(f"ai-sdlc demo in {project} (offline 'scripted' provider: no AI is called)")
    _cli(project, "init")
    pytest_cmd = shlex.join([sys.executable, "-m", "pytest"])
    _cli(project, "config", "verify.test", pytest_cmd)
    _cli(project, "config", "limits.implementation_retries", "5")
    # The demo's rate limits come one per attempt; keep the llm circuit closed so the story
    # meets the global recovery limit rather than an open breaker (exit 4).
    _cli(project, "config", "resilience.policies.llm.breaker.failure_threshold", "20")
    (project / ".ai-sdlc" / "scripted.yaml").write_text(_rules())
    _cli(project, "add", "Add a multiply function", "--priority", "1")
    _cli(project, "add", "Add a divide function that rounds to 2 places", "--priority", "2")

    _cli(project, "run", "S-0001")
    if has_git:
        _show_story_branch(project, "S-0001")
    rc = _cli(project, "run", "S-0002", check=False)
    if rc != 5:
        raise SystemExit(f"demo: expected S-0002 to be blocked (exit 5), got {rc}")
    print(
        "(exit code 5: blocked by a guardrail. The phase limit alone would have allowed 5 "
        "implementation retries; the global limit counts every kind of recovery, API retries "
        "included, and stopped the story at 10.)"
    )
    _cli(project, "status", check=False)
    _cli(project, "show", "S-0002", check=False)

    stories = project / ".ai-sdlc" / "stories"
    command, hint = command_to_type()
    print(
        textwrap.dedent(f"""
        Where to look:
          the project:          {project}
          story files:          {stories}/S-000N/story.md (frontmatter counters, blocked_reason)
          artifacts:            {stories}/S-0001/research.md, plan.md, review.md
          event logs:           {stories}/S-0002/events.jsonl (every action and recovery)
          scripted rules:       {project}/.ai-sdlc/scripted.yaml
          story worktrees:      {project}/.ai-sdlc/worktrees/ (one per story, own branch)
          failed attempts:      {stories}/S-0002/attempts/N.patch (rolled back, diff kept)
          the bare origin:      {project.parent / "origin.git"}
        Try:  {command} --project {project} worktrees
              {command} --project {project} unblock S-0002 --reset-retries
        """)
    )
    if hint:
        print(hint)


def command_to_type(search_path: str | None = None) -> tuple[str, str | None]:
    """The command a user can type to run this `ai-sdlc` after the demo, and a hint when it is
    not on PATH (`make demo` installs it into the clone's `.venv`, which is not on PATH)."""
    script = Path(os.path.abspath(sys.executable)).parent / "ai-sdlc"
    if not script.is_file():  # run from a source tree without the console script
        return f"{shlex.quote(sys.executable)} -m ai_sdlc", None
    found = shutil.which("ai-sdlc", path=search_path)
    if found is not None and os.path.samefile(found, script):
        return "ai-sdlc", None
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    typed = shlex.quote(shown)
    if found is not None:
        hint = f"(the `ai-sdlc` on your PATH is another install: type {typed} to use this one)"
    else:
        hint = (
            f"(`ai-sdlc` is not on your PATH: type {typed} as above, put it on PATH with "
            f'`export PATH="{script.parent}:$PATH"`, or install it with `pipx install .`)'
        )
    return typed, hint


if __name__ == "__main__":
    main()
