"""Conflict awareness for parallel runs: do not start a story whose plan names files that a
running sibling has already changed, or that the sibling's own plan names (it is about to
change them: stories started together have changed nothing yet).

The rule (deliberately simple and predictable): the paths a story's `plan.md` names (tokens with
a `/` or a file extension, e.g. `src/app/login.py`, backticks and `./` stripped) are compared
with the files changed on each running sibling's worktree since it branched
(`git diff --name-only <merge-base>` plus untracked files: committed and uncommitted work).
The same paths are read from each running sibling's `plan.md`. One shared path defers the
story; it starts once that sibling has finished. A story with no plan yet is never deferred.
"""

from __future__ import annotations

import re
from pathlib import Path

from ai_sdlc.git import repo, worktrees
from ai_sdlc.git.run import GitError, git

_TOKEN = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")


def planned_paths(plan_text: str) -> set[str]:
    """File paths a plan names (see the module docstring for what counts)."""
    found = set()
    for raw in _TOKEN.findall(plan_text):
        token = raw.rstrip(".").removeprefix("./")
        if not token or (token.startswith(".") and "/" not in token):
            continue
        if ("/" in token and not token.endswith("/")) or _EXTENSION.search(token):
            if token.startswith(".ai-sdlc/") or "//" in token or ".." in token.split("/"):
                continue
            found.add(token)
    return found


def changed_paths(project: Path, story_id: str) -> set[str]:
    """Files changed in `story_id`'s worktree since it left the base (empty when unknown)."""
    found = repo.locate(project)
    if found is None:
        return set()
    top = found.top
    tree = next((w for w in worktrees.listing(top) if w.story_id == story_id), None)
    if tree is None or not tree.path.is_dir():
        return set()
    try:  # its git folder as the main repository knows it, not as its `.git` file says
        worktrees.pin_tree(found.common_dir, tree.path)
    except GitError:
        return set()
    try:  # the sibling may finish and remove its worktree meanwhile (git then has no folder)
        head = git(top, "rev-parse", "HEAD", check=False)
        base = git(tree.path, "merge-base", "HEAD", head.stdout.strip(), check=False)
        if not head.ok or not base.ok:
            return set()
        raw = ("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")
        diff = git(tree.path, "diff", *raw, "--name-only", base.stdout.strip(), check=False)
        untracked = git(
            tree.path,
            "ls-files",
            "--others",
            "--exclude-standard",
            ":(exclude).ai-sdlc",
            check=False,
        )
    except GitError:
        return set()
    names = diff.stdout.splitlines() + untracked.stdout.splitlines()
    return {n.strip() for n in names if n.strip() and not n.startswith(".ai-sdlc/")}


def overlap(planned: set[str], changed: set[str]) -> list[str]:
    return sorted(planned & changed)
