"""Questions about the user's repository, answered without changing anything in it."""

from __future__ import annotations

from pathlib import Path

from ai_sdlc.git.run import GitError, git


def toplevel(path: Path) -> Path | None:
    """The top folder of the git working tree holding `path`, or None outside git."""
    try:
        done = git(path, "rev-parse", "--show-toplevel", check=False)
    except GitError:  # git not installed
        return None
    if not done.ok or not done.stdout.strip():
        return None
    return Path(done.stdout.strip()).resolve()


def has_commit(top: Path) -> bool:
    return git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).ok


def ref_exists(top: Path, ref: str) -> bool:
    return git(top, "show-ref", "--verify", "--quiet", ref, check=False).ok


def branch_exists(top: Path, branch: str) -> bool:
    return ref_exists(top, f"refs/heads/{branch}")


def remote_url(top: Path, remote: str) -> str | None:
    done = git(top, "remote", "get-url", remote, check=False)
    return done.stdout.strip() if done.ok and done.stdout.strip() else None


def current_branch(path: Path) -> str | None:
    done = git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return done.stdout.strip() if done.ok and done.stdout.strip() else None


def default_branch(top: Path, remote: str) -> str:
    """The branch stories start from when `git.base_branch` is empty: the remote's HEAD
    (`origin/HEAD`) when known, else the branch checked out in the main checkout."""
    ref = f"refs/remotes/{remote}/HEAD"
    done = git(top, "symbolic-ref", "--quiet", "--short", ref, check=False)
    name = done.stdout.strip()
    if done.ok and name.startswith(f"{remote}/"):
        return name[len(remote) + 1 :]
    branch = current_branch(top)
    if branch:
        return branch
    raise GitError(
        "cannot tell the repository's default branch (no remote HEAD, and the checkout is on "
        "a detached HEAD)",
        hint="set it: ai-sdlc config git.base_branch main",
    )


def start_point(top: Path, base: str, remote: str) -> str:
    """The commit-ish a new story branch starts from: the local base branch, else its
    remote-tracking branch."""
    if branch_exists(top, base):
        return base
    if ref_exists(top, f"refs/remotes/{remote}/{base}"):
        return f"{remote}/{base}"
    raise GitError(
        f"base branch {base!r} does not exist (neither locally nor as {remote}/{base})",
        hint="set an existing branch: ai-sdlc config git.base_branch <branch>",
    )


def ahead_behind(path: Path, base_ref: str) -> tuple[int, int] | None:
    """(commits on HEAD not in base, commits in base not on HEAD), None if not comparable."""
    done = git(path, "rev-list", "--left-right", "--count", f"HEAD...{base_ref}", check=False)
    parts = done.stdout.split()
    if not done.ok or len(parts) != 2:
        return None
    return int(parts[0]), int(parts[1])
