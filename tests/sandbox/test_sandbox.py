"""Issue 22, the sandbox, through the real CLI on a real git project.

A hostile `command` agent and a hostile `verify.test` (the same small script) try, every time
they run, what issue 22 found an agent can do to escape the recovery limit: truncate, extend or
remove the story's ledger, `rm -rf .ai-sdlc/state`, raise `limits.global_recovery` in the
config, edit `story.md`, plant `.git/hooks/post-checkout`, set `core.hooksPath` in the shared
git config, write through a symlink or a hard link planted in the worktree, move a main-checkout
file into the worktree, and do the same from a grandchild. Each attempt is written to a report
folder the config makes writable (`sandbox.writable`), so the test reads what was denied. With
the sandbox, every attempt is denied, everything outside the worktree is unchanged
(checksummed), the agent's own work in the worktree (inside the main checkout) succeeds, and the
story ends blocked at the limit with an honest count. With `AI_SDLC_SANDBOX=off` the same
script succeeds (the attacks are real), a single run says once that there is no sandbox, and
`run --auto`/`watch` refuse to start.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import CliResult, run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError as exc:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
    NO_LANDLOCK = f"this kernel has no usable Landlock ({exc.strerror})"
else:
    NO_LANDLOCK = ""
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("git_env")]
needs_landlock = pytest.mark.skipif(ABI == 0, reason=NO_LANDLOCK or "Landlock available")

SID = "S-0001"
#: The project's global recovery limit, lowered from the default 10 as a user may: the promise
#: is an honest count that stops at the limit, not its number (which the workflow tests pin),
#: and each attempt more is one more agent call and sandboxed verification, attacks and all.
LIMIT = 3
LIMIT_REACHED = f"Global recovery limit exceeded ({LIMIT}/{LIMIT})"

#: The hostile program: `hostile.py ROLE PHASE ROOT REPORTS`. ROLE is agent, verify or
#: grandchild. Every attack is recorded as one JSON line {role, attack, outcome} in REPORTS.
HOSTILE = r"""
import json, os, shutil, subprocess, sys
role, phase, root, reports = sys.argv[1:5]
state = os.path.join(root, ".ai-sdlc", "state")
ledger = os.path.join(state, "ledger", "S-0001.jsonl")
config = os.path.join(root, ".ai-sdlc", "config.yaml")
story = os.path.join(root, ".ai-sdlc", "stories", "S-0001", "story.md")
hooks = os.path.join(root, ".git", "hooks")
records = []

def attempt(name, action):
    try:
        action()
        outcome = "done"
    except OSError as exc:
        outcome = "denied: " + (exc.strerror or str(exc))
    tmp = os.environ.get("TMPDIR")
    records.append({"role": role, "attack": name, "outcome": outcome, "tmp": tmp})

def truncate_ledger():
    with open(ledger, "r+") as fh:
        fh.truncate(0)

def append(path, text):
    def write():
        with open(path, "a") as fh:
            fh.write(text)
    return write

def rm_state():
    before = sum(len(files) for _, _, files in os.walk(state))
    shutil.rmtree(state, ignore_errors=True)
    after = sum(len(files) for _, _, files in os.walk(state))
    if after == before:
        raise PermissionError(13, "nothing removed")

def hooks_path():
    done = subprocess.run(["git", "config", "core.hooksPath", "/tmp/evil-hooks"],
                          capture_output=True, text=True)
    if done.returncode:
        raise PermissionError(13, "git config failed: " + done.stderr.strip()[:80])

def through_symlink():
    if os.path.lexists("evil-link"):
        os.remove("evil-link")
    os.symlink(config, "evil-link")
    try:
        append("evil-link", "\nlimits:\n  global_recovery: 1000\n")()
    finally:
        os.remove("evil-link")

def through_hard_link():
    if os.path.lexists("evil-hard"):
        os.remove("evil-hard")
    os.link(config, "evil-hard")
    try:
        append("evil-hard", "\n# hard link\n")()
    finally:
        os.remove("evil-hard")

def steal_readme():
    os.rename(os.path.join(root, "README.md"), "stolen-readme.md")

def raise_limit():
    with open(config) as fh:
        text = fh.read()
    with open(config, "w") as fh:
        fh.write(text + "\nlimits:\n  global_recovery: 1000\n")

attempt("truncate ledger", truncate_ledger)
attempt("append a ledger line", append(ledger, '{"seq": 9999, "total": 0}\n'))
attempt("remove ledger", lambda: os.remove(ledger))
attempt("rm -rf .ai-sdlc/state", rm_state)
attempt("raise limits.global_recovery", raise_limit)
attempt("write story.md", append(story, "\ntotal_recovery_attempts: 0\n"))
hook = os.path.join(hooks, "post-checkout")
attempt("plant .git/hooks/post-checkout", append(hook, "#!/bin/sh\n"))
attempt("git config core.hooksPath", hooks_path)
attempt("write through a symlink", through_symlink)
attempt("write through a hard link", through_hard_link)
attempt("move README.md into the worktree", steal_readme)
scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"), "scratch")
attempt("write the temp folder", append(scratch, "ok"))
if role == "agent" and phase in ("implement", "rework"):
    attempt("write the worktree", append("work.txt", phase + "\n"))
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
    records.append({"role": role, "attack": "git status", "outcome": status.stdout.strip()})
if role != "grandchild":
    done = subprocess.run([sys.executable, __file__, "grandchild", phase, root, reports])
    records.append({"role": role, "attack": "grandchild ran", "outcome": str(done.returncode)})
with open(os.path.join(reports, role + ".jsonl"), "a") as fh:
    fh.write("".join(json.dumps(r) + "\n" for r in records))
if role == "agent":
    print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
elif role == "verify":
    print("FAILED tests/test_calc.py::test_multiply - assert 9 == 20")
    sys.exit(1)
"""

#: What only ai-sdlc itself writes in a run: story state, locks, caches, the worktrees (the
#: agent's own), and git's object store, refs and worktree records (its commits and checkpoints).
_AI_SDLC_WRITES = {
    ".ai-sdlc": ("stories", "state", ".locks", ".cache", "runs", "worktrees"),
    ".git": (
        "objects",
        "refs",
        "logs",
        "worktrees",
        "index",
        "packed-refs",
        "ORIG_HEAD",
        "HEAD",
        "ai-sdlc-worktrees.lock",
    ),
}


def outside_worktree(root: Path) -> dict[str, str]:
    """Checksum of every file ai-sdlc's run does not write itself (the config, the git config
    and hooks, the project's files), plus the list of every hook."""
    sums: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        skip = _AI_SDLC_WRITES.get(str(rel), ())
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            if name in skip:
                continue
            path = Path(folder) / name
            sums[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    # The one change ai-sdlc itself makes to the shared git config: the sparse checkout of a
    # story worktree turns on per-worktree config (git's own `sparse-checkout set` does too).
    # Any other setting, added or changed, still shows.
    if (root / ".git" / "config").is_file():
        lines = sorted(git_config_lines(root) - {"extensions.worktreeconfig=true"})
        sums[".git/config"] = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return sums


def project(tmp_path: Path, *, template: list[str] | None = None) -> tuple[Path, Path, Path]:
    """A git project with one story, the hostile script as verify.test and (by default) as
    the command agent, and a report folder the sandbox lets it write. (root, reports, script)"""
    root = make_repo(tmp_path, remote=False).root
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    reports = tmp_path / "reports"
    reports.mkdir()
    agent = template or [sys.executable, str(script), "agent", "{phase}", str(root), str(reports)]
    verify = shlex.join([sys.executable, str(script), "verify", "-", str(root), str(reports)])
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n"
        f"limits:\n  implementation_retries: 10\n  global_recovery: {LIMIT}\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    assert run_cli(root, "add", "Add multiply").returncode == 0
    return root, reports, script


def run(root: Path, *args: str, **env: str) -> CliResult:
    """`ai-sdlc` with the configured command agent (the suite's default is `scripted`); the
    sandbox is the project's own (its `sandbox.writable` names the reports folder). Children
    run unconfined write the temp folder they are given: one beside the project."""
    temp = root.parent / "tmp"
    temp.mkdir(exist_ok=True)
    return run_cli(root, *args, env={"AI_SDLC_PROVIDER": "command", "TMPDIR": str(temp), **env})


def attempts(reports: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name in ("agent", "verify", "grandchild"):
        path = reports / f"{name}.jsonl"
        if path.exists():
            found += [json.loads(line) for line in path.read_text().splitlines()]
    return found


def story_events(root: Path) -> list[dict[str, Any]]:
    path = root / ".ai-sdlc" / "stories" / SID / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def frontmatter(root: Path) -> dict[str, Any]:
    result = run_cli(root, "show", SID, "--json")
    assert result.returncode == 0, result.output
    return dict(json.loads(result.stdout)["frontmatter"])


def ledger_lines(root: Path) -> list[str]:
    path = root / ".ai-sdlc" / "state" / "ledger" / f"{SID}.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def git_config_lines(root: Path) -> set[str]:
    """The repository's shared git config as `key=value` lines (keys lowercased by git)."""
    listed = subprocess.run(
        ["git", "config", "--file", str(root / ".git" / "config"), "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(listed.stdout.splitlines())


def flat(result: CliResult) -> str:
    return " ".join(result.output.split())


# --- with the sandbox ---------------------------------------------------------------------------
@needs_landlock
def test_every_attack_of_an_agent_and_a_verify_command_is_denied(tmp_path: Path) -> None:
    """Every attack is denied and the count is honest; then, the story blocked at the limit,
    a plain unblock buys nothing: the ledger the next run reads is the one ai-sdlc wrote
    (appended to, never rewritten), so the story is blocked again at once and nothing more
    runs. (One attack run serves both: it is the file's costliest path.)"""
    root, reports, _ = project(tmp_path)
    before = outside_worktree(root)
    hooks = sorted(os.listdir(root / ".git" / "hooks"))
    result = run(root, "run", SID)
    assert result.returncode == 5, result.output
    assert LIMIT_REACHED in flat(result)
    assert "no sandbox" not in result.stderr

    tried = attempts(reports)
    roles = {r["role"] for r in tried}
    assert roles == {"agent", "verify", "grandchild"}
    attacks = [
        r for r in tried if r["attack"] not in ("write the temp folder", "write the worktree")
    ]
    attacks = [r for r in attacks if r["attack"] not in ("grandchild ran", "git status")]
    assert len({r["attack"] for r in attacks}) == 11
    escaped = [r for r in attacks if not r["outcome"].startswith("denied")]
    assert not escaped, escaped
    # What the sandbox allows still works: the private temp folder, and the worktree, which
    # lives inside the read-only main checkout (.ai-sdlc/worktrees/<id>).
    allowed = [r for r in tried if r["attack"] in ("write the temp folder", "write the worktree")]
    assert {r["attack"] for r in allowed} == {"write the temp folder", "write the worktree"}
    assert all(r["outcome"] == "done" for r in allowed), allowed
    # git works read-only in the worktree (status sees the agent's change; it cannot stage).
    statuses = [r["outcome"] for r in tried if r["attack"] == "git status"]
    assert statuses and all(s == "?? work.txt" for s in statuses), statuses
    grandchildren = [r for r in tried if r["attack"] == "grandchild ran"]
    assert grandchildren and all(r["outcome"] == "0" for r in grandchildren)

    assert outside_worktree(root) == before
    assert sorted(os.listdir(root / ".git" / "hooks")) == hooks
    assert "hookspath" not in (root / ".git" / "config").read_text().lower()
    # The verdict is honest: LIMIT failed verifications, each counted, the ledger intact.
    fm = frontmatter(root)
    assert fm["status"] == "blocked"
    assert fm["total_recovery_attempts"] == LIMIT
    verifications = [r for r in tried if r["role"] == "verify" and r["attack"] == "grandchild ran"]
    assert len(verifications) == LIMIT + 1  # each attempt's and the baseline's on the base
    lines = ledger_lines(root)
    assert json.loads(lines[-1])["total"] == LIMIT
    assert not any(e["action"] == "sandbox_unavailable" for e in story_events(root))
    # Each agent and verify process had a private temp folder of its own (its grandchild
    # inherits it), gone with the process.
    temps = [r["tmp"] for r in tried if r["attack"] == "write the temp folder"]
    own = [
        r["tmp"]
        for r in tried
        if r["attack"] == "write the temp folder" and r["role"] != "grandchild"
    ]
    assert len(set(own)) == len(own) and set(temps) == set(own)
    assert all(Path(f).name.startswith("ai-sdlc-tmp-") and not Path(f).exists() for f in own)

    # After the attacks, a plain unblock buys nothing.
    ran = len(tried)
    assert run_cli(root, "unblock", SID).returncode == 0
    again = run(root, "run", SID)
    assert again.returncode == 5, again.output
    assert LIMIT_REACHED in flat(again)
    assert len(attempts(reports)) == ran  # no agent, no verification
    assert ledger_lines(root)[: len(lines)] == lines
    assert frontmatter(root)["total_recovery_attempts"] == LIMIT


# --- without it -----------------------------------------------------------------------------
def test_without_a_sandbox_the_attacks_are_real_and_a_single_run_says_so_once(
    tmp_path: Path,
) -> None:
    """The control: the same script, the sandbox forced off, changes the config and plants
    the hook; the run warned once (stderr and the story's events)."""
    root, reports, _ = project(tmp_path)
    before = outside_worktree(root)
    result = run(root, "run", SID, AI_SDLC_SANDBOX="off")
    warnings = [ln for ln in result.stderr.splitlines() if "no sandbox" in ln]
    assert len(warnings) == 1, result.stderr
    assert "AI_SDLC_SANDBOX=off" in warnings[0]
    noted = [e for e in story_events(root) if e["action"] == "sandbox_unavailable"]
    assert len(noted) == 1
    assert "AI_SDLC_SANDBOX=off" in noted[0]["reason"]
    done = {r["attack"] for r in attempts(reports) if r["outcome"] == "done"}
    assert {"raise limits.global_recovery", "plant .git/hooks/post-checkout"} <= done
    assert outside_worktree(root) != before
    assert (root / ".git" / "hooks" / "post-checkout").exists()


def test_unattended_runs_refuse_to_start_without_a_sandbox(tmp_path: Path) -> None:
    root, reports, _ = project(tmp_path)
    off = {"AI_SDLC_SANDBOX": "off"}
    for args, command in (
        (("run", "--auto"), "ai-sdlc run --auto"),
        (("run", "--batch", SID), "ai-sdlc run --batch"),
        (("watch", "--once"), "ai-sdlc watch"),
    ):
        refused = run(root, *args, **off)
        assert refused.returncode == 1, (args, refused.output)
        message = flat(refused)
        assert "no sandbox is available (turned off by AI_SDLC_SANDBOX=off" in message
        assert f"accept the risk: {command} --no-sandbox" in message
        assert "sandbox.required: false" in message
    assert not attempts(reports)  # nothing ran
    assert frontmatter(root)["status"] == "backlog"
    # Told to, it runs: --no-sandbox, without a warning (the choice was explicit).
    forced = run(root, "run", "--auto", "--no-sandbox", **off)
    assert forced.returncode == 6, forced.output  # halted: the one story was escalated
    assert "no sandbox (" not in forced.stderr
    assert attempts(reports)


def test_sandbox_required_false_lets_an_unattended_run_start_with_a_warning(tmp_path: Path) -> None:
    root, _, _ = project(tmp_path)
    assert run_cli(root, "config", "sandbox.required", "false").returncode == 0
    result = run(root, "run", "--auto", AI_SDLC_SANDBOX="off")
    assert result.returncode == 6, result.output
    assert len([ln for ln in result.stderr.splitlines() if "no sandbox (" in ln]) == 1


def test_the_environment_cannot_switch_the_sandbox_off(tmp_path: Path) -> None:
    """`sandbox.enabled` and `sandbox.required` are guardrails: an AI_SDLC_SANDBOX__* variable
    may not loosen them (only the diagnostic AI_SDLC_SANDBOX=off, which runs --auto refuses)."""
    root, _, _ = project(tmp_path)
    for name in ("AI_SDLC_SANDBOX__ENABLED", "AI_SDLC_SANDBOX__REQUIRED"):
        result = run(root, "run", SID, **{name: "false"})
        assert result.returncode == 3, result.output
        assert f"would loosen the guardrail {name[8:].lower().replace('__', '.')}" in flat(result)


# --- doctor and config ------------------------------------------------------------------------
def test_doctor_shows_the_sandbox_in_force_and_its_absence(tmp_path: Path) -> None:
    root, reports, _ = project(tmp_path)
    shown = run(root, "doctor")
    line = next(ln for ln in shown.stdout.splitlines() if ln.startswith("sandbox:"))
    if ABI:
        assert line.startswith(f"sandbox: ✓ landlock (Landlock ABI {ABI}")
        writable = next(ln for ln in shown.stdout.splitlines() if "writable:" in ln)
        assert "<worktree>" in writable and str(reports) in writable
    data = json.loads(run(root, "doctor", "--json").stdout)["sandbox"]
    assert data["in_force"] is bool(ABI)
    assert data["writable"][:2] == ["<worktree>", "<private temp folder>"]
    assert run(root, "config", "sandbox.writable", json.dumps([str(tmp_path)])).returncode == 0
    wide = run(root, "doctor")
    assert f"warning: sandbox.writable {str(tmp_path)!r} holds this project" in wide.stderr
    assert run(root, "config", "sandbox.writable", json.dumps([str(reports)])).returncode == 0
    off = run(root, "doctor", AI_SDLC_SANDBOX="off")
    line = next(ln for ln in off.stdout.splitlines() if ln.startswith("sandbox:"))
    assert line == (
        "sandbox: ✗ none: turned off by AI_SDLC_SANDBOX=off (a diagnostic) "
        "(run --auto and watch refuse to start)"
    )


def test_a_missing_writable_folder_is_a_clear_config_error(tmp_path: Path) -> None:
    root, reports, _ = project(tmp_path)
    reports.rmdir()
    result = run(root, "run", SID)
    assert result.returncode == 3, result.output
    assert f"config key sandbox.writable: {str(reports)!r} does not exist" in flat(result)
    assert "Traceback" not in result.output


@needs_landlock
def test_outside_git_the_project_folder_is_the_workspace_and_the_rest_is_read_only(
    tmp_path: Path,
) -> None:
    """In-place runs (no git): the workspace is the project folder itself, so the sandbox cannot
    shield its `.ai-sdlc/` (the ledger catches lowered counters there), but nothing outside the
    project can be written."""
    root = tmp_path / "proj"
    root.mkdir()
    assert run_cli(root, "init").returncode == 0
    assert run_cli(root, "add", "Add multiply").returncode == 0
    outside = tmp_path / "outside.txt"
    code = (
        "import sys\nopen('inside.txt', 'w').write('x')\n"
        "try:\n    open(sys.argv[1], 'w').write('x')\nexcept OSError as exc:\n"
        "    print('outside:', exc.strerror)\nsys.exit(1)\n"
    )
    line = shlex.join([sys.executable, "-c", code, str(outside)])
    assert run_cli(root, "config", "verify.test", line).returncode == 0
    result = run_cli(root, "run", SID)
    assert result.returncode == 5, result.output
    assert "outside: Permission denied" in result.stderr
    assert not outside.exists()
    assert (root / "inside.txt").exists()
