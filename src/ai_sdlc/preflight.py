"""Pre-flight checks (`ai-sdlc doctor`): what a run needs here, checked before one starts, each
with the fix. A run that discovers a missing commit, base branch or test program only after an
agent has worked costs time and money; these find it in a second, without the network.

Each check is an `Item`: `error` level when a run needs it (doctor exits non-zero when one
fails), `advisory` when a run works without it but does less (no pull request, no sandbox).
Every external program runs without a shell and with a timeout (`git.run.run`)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.git import repo
from ai_sdlc.git.run import GitError, TransientRemoteError, run
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.secrets import mask_url, redact

ERROR = "error"
ADVISORY = "advisory"
#: Seconds `gh auth status` may take (it may ask the network; a hang must not hang doctor).
GH_TIMEOUT = 20.0
#: `host:path` (scp-like) remote URLs; a Windows drive letter is one character.
_SCP_LIKE = re.compile(r"^[^/:]{2,}:")

Which = Callable[[str], str | None]


class Item(msgspec.Struct, frozen=True):
    """One line of the checklist: `ok` or not, how much it matters, what was found, the fix."""

    name: str
    ok: bool
    level: str
    detail: str
    fix: str = ""


def _item(name: str, ok: bool, level: str, detail: str, fix: str = "") -> Item:
    return Item(name, ok, level, redact(detail), redact(fix) if not ok else "")


def local_remote_path(url: str, top: Path) -> Path | None:
    """The folder a remote URL names when it is a local path (`/srv/x.git`, `../x.git`,
    `file:///srv/x.git`); None for a network URL."""
    if url.startswith("file://"):
        return Path(url[len("file://") :])
    if "://" in url or _SCP_LIKE.match(url):
        return None
    path = Path(url).expanduser()
    return path if path.is_absolute() else top / path


def git_items(project: Path, settings: GitSettings, which: Which) -> tuple[list[Item], bool]:
    """git, the remote and the base branch; and whether a remote is configured (then done
    stories are pushed and `gh` opens their pull requests)."""
    top = repo.toplevel(project)
    if top is None:
        if which("git") is None:
            return [_item("git", False, ERROR, "git is not installed", "install git")], False
        detail = (
            f"{project} is not in a git repository: agents work in the project folder (no "
            "worktree, branch, commit or rollback per story)"
        )
        fix = "git init && git add -A && git commit -m 'initial commit'"
        return [_item("git", False, ADVISORY, detail, fix)], False
    if not repo.has_commit(top):
        level = ERROR if settings.worktrees else ADVISORY
        detail = f"the repository {top} has no commit yet: story branches start from one"
        fix = f"git -C {top} add -A && git -C {top} commit -m 'initial commit'"
        return [_item("git", False, level, detail, fix)], False
    head = run(("git", "rev-parse", "--short", "HEAD"), top, check=False).stdout.strip()
    items = [_item("git", True, ERROR, f"repository {top} (HEAD {head})")]
    remote_item, has_remote = _remote(top, settings.remote)
    items += [remote_item, _base_branch(top, settings)]
    return items, has_remote


def _remote(top: Path, remote: str) -> tuple[Item, bool]:
    url = repo.remote_url(top, remote)
    if url is None:
        detail = (
            f"no git remote {remote!r}: done stories' branches stay local and no pull request "
            "is opened"
        )
        fix = f"git remote add {remote} <url> (or name another: ai-sdlc config git.remote <name>)"
        return _item("remote", False, ADVISORY, detail, fix), False
    path = local_remote_path(url, top)
    if path is None:
        return _item("remote", True, ERROR, f"{remote} = {mask_url(url)} (not contacted)"), True
    if not path.exists():
        detail = f"{remote} = {url}: that folder does not exist, so pushing a done story fails"
        fix = f"git init --bare {path}, or point it elsewhere: git remote set-url {remote} <url>"
        return _item("remote", False, ERROR, detail, fix), True
    return _item("remote", True, ERROR, f"{remote} = {url} (a local repository)"), True


def _base_branch(top: Path, settings: GitSettings) -> Item:
    remote = settings.remote
    try:
        base = settings.base_branch or repo.default_branch(top, remote)
    except GitError as exc:
        return _item("base branch", False, ERROR, exc.message, exc.hint or "")
    where = [
        label
        for ref, label in (
            (f"refs/heads/{base}", "local"),
            (f"refs/remotes/{remote}/{base}", f"{remote}/{base}"),
        )
        if repo.ref_exists(top, ref)
    ]
    source = "git.base_branch" if settings.base_branch else "the default branch"
    if not where:
        detail = f"{base!r} ({source}) does not exist, neither locally nor as {remote}/{base}"
        fix = (
            f"create it (git branch {base}) or choose one: ai-sdlc config git.base_branch <branch>"
        )
        return _item("base branch", False, ERROR, detail, fix)
    return _item("base branch", True, ERROR, f"{base} ({source}; {', '.join(where)})")


def gh_item(top: Path, which: Which, environ: Mapping[str, str] | None = None) -> Item:
    """`gh` present and logged in (`gh auth status`): done stories' pull requests need it."""
    path = which("gh")
    if path is None:
        detail = (
            "gh (GitHub CLI) not found on PATH: done stories are pushed, no pull request is opened"
        )
        fix = "install it (https://cli.github.com), then: gh auth login"
        return _item("gh", False, ADVISORY, detail, fix)
    try:
        done = run((path, "auth", "status"), top, check=False, env=environ, timeout=GH_TIMEOUT)
    except (GitError, TransientRemoteError) as exc:
        return _item("gh", False, ERROR, f"gh auth status: {exc}", "gh auth login")
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines()]
    told = [line for line in lines if "logged" in line.lower()] or [line for line in lines if line]
    first = told[0] if told else ""
    if done.returncode != 0:
        detail = f"gh is not logged in: {first or f'gh auth status exited {done.returncode}'}"
        return _item("gh", False, ERROR, detail, "gh auth login (or set GH_TOKEN)")
    return _item("gh", True, ERROR, f"{path}: {first or 'logged in'}")


def resolve_program(program: str, project: Path, which: Which) -> str | None:
    """Where a verification command's program is found, as a run would find it: a path from
    the worktree (or the project), a bare name on PATH."""
    if "/" in program:
        path = Path(program).expanduser()
        path = path if path.is_absolute() else project / path
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return which(program)


def verify_items(project: Path, verify: Mapping[str, Any], which: Which) -> list[Item]:
    """Each `verify.*` command line: splittable, and its program found (nothing is run)."""
    items = []
    for key in ("build", "test"):
        line = verify.get(key)
        if not line:
            continue
        name = f"verify.{key}"
        try:
            argv = shlex.split(str(line))
        except ValueError as exc:
            fix = "check the quotes: commands run without a shell"
            items.append(_item(name, False, ERROR, f"cannot split {line!r}: {exc}", fix))
            continue
        if not argv:
            items.append(
                _item(
                    name,
                    False,
                    ERROR,
                    "an empty command line",
                    f"ai-sdlc config {name} 'pytest -q'",
                )
            )
            continue
        found = resolve_program(argv[0], project, which)
        if found is None:
            detail = f"{line!r}: {argv[0]!r} not found (on PATH, or as a path from the project)"
            fix = f"install {argv[0]}, or set another command: ai-sdlc config {name} '<command>'"
            venv = Path(".venv", "bin", argv[0])
            if "/" not in argv[0] and resolve_program(str(venv), project, which):
                shown = shlex.join([str(venv), *argv[1:]])
                fix = f"name the project's venv copy: ai-sdlc config {name} {shlex.quote(shown)}"
            items.append(_item(name, False, ERROR, detail, fix))
        else:
            items.append(_item(name, True, ERROR, f"{line!r} ({found})"))
    if not items:
        detail = "no verify.build or verify.test: nothing judges a story's code but the agents"
        items.append(
            _item("verify", False, ADVISORY, detail, "ai-sdlc config verify.test 'pytest -q'")
        )
    return items


def sandbox_item(sandbox: Mapping[str, Any]) -> Item:
    """The write sandbox agents and verification commands run in (from doctor's sandbox
    report): advisory, as a plain `run` works without one."""
    if sandbox.get("in_force") and sandbox.get("missing"):
        fix = "a kernel with Landlock ABI 4 (Linux 6.7+), or name the steps in sandbox.network"
        return _item("sandbox", False, ADVISORY, str(sandbox["missing"]), fix)
    if sandbox.get("in_force"):
        return _item("sandbox", True, ADVISORY, f"{sandbox['backend']} ({sandbox['detail']})")
    refuse = " (run --auto and watch refuse to start)" if sandbox.get("required") else ""
    detail = f"not in force: {sandbox.get('detail', 'unknown')}{refuse}"
    fix = "see docs/sandbox.md (Linux Landlock); or sandbox.required: false to run without one"
    return _item("sandbox", False, ADVISORY, detail, fix)


def checklist(
    project: Path,
    config: Any,
    sandbox: Mapping[str, Any],
    which: Which = shutil.which,
) -> list[Item]:
    """git, remote, base branch, gh, each verify command, the sandbox (in this order); the
    providers, config and nested projects are doctor's own items."""
    settings = GitSettings.from_config(config)
    items, has_remote = git_items(project, settings, which)
    if has_remote:
        top = repo.toplevel(project) or project
        items.append(gh_item(top, which))
    items += verify_items(project, config.section("verify"), which)
    if sandbox:
        items.append(sandbox_item(sandbox))
    return items
