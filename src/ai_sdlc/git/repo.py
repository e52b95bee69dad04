"""Questions about the user's repository, answered without changing anything in it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ai_sdlc.git.run import GitError, git


@dataclass(frozen=True)
class Location:
    """Where `path` sits in git: its work tree's top, the repository's shared git folder, and
    whether HEAD has a commit. Neither changes while a run uses the repository."""

    top: Path
    common_dir: Path
    has_commit: bool


def locate(path: Path) -> Location | None:
    """`toplevel` and `has_commit` in one `git rev-parse`; None outside a git work tree."""
    try:
        done = git(
            path,
            "rev-parse",
            "--show-toplevel",
            "--git-common-dir",
            "--verify",
            "--quiet",
            "HEAD^{commit}",
            check=False,
        )
    except GitError:  # git not installed
        return None
    lines = done.stdout.splitlines()
    # exit 0: top, common dir, HEAD's sha; exit 1 (no commit yet): top and common dir only.
    if done.returncode not in (0, 1) or not done.stdout.strip():
        return None
    if len(lines) != 3 - done.returncode:  # a line break in a folder's name: ask one by one
        top = toplevel(path)
        if top is None:
            return None
        common = git(top, "rev-parse", "--git-common-dir").stdout.removesuffix("\n")
        return Location(top, (top / common).resolve(), has_commit(top))
    return Location(
        top=Path(lines[0]).resolve(),
        common_dir=(path / lines[1]).resolve(),
        has_commit=done.returncode == 0,
    )


@dataclass(frozen=True)
class Ref:
    """One existing ref: its commit, the ref it points to when it is symbolic, and whether it
    is the branch checked out in the folder the question was asked in."""

    sha: str
    symref: str = ""
    checked_out: bool = False


def refs(path: Path, *names: str) -> dict[str, Ref]:
    """The refs among `names` (full names, `refs/heads/main`) that exist, in one
    `git for-each-ref` (instead of a `show-ref` per name). A symbolic ref whose target is
    missing is not listed (ask `symbolic-ref` about it)."""
    wanted = set(names)
    if not wanted:
        return {}
    fmt = "%(refname)%00%(objectname)%00%(symref)%00%(HEAD)"
    done = git(path, "for-each-ref", f"--format={fmt}", *sorted(wanted))
    found: dict[str, Ref] = {}
    for line in done.stdout.splitlines():
        parts = line.split("\0")
        # patterns match whole leading path components (`refs/heads/a` lists `refs/heads/a/b`)
        if len(parts) == 4 and parts[0] in wanted:
            found[parts[0]] = Ref(parts[1], parts[2], parts[3] == "*")
    return found


class RefSnapshot:
    """The refs one operation asks about, read with as few `for-each-ref` calls as it can:
    names are asked in batches, and a name already asked is answered from the first reply.
    Lives for one operation (a `prepare`, a `publish`), never across phases."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._found: dict[str, Ref] = {}
        self._asked: set[str] = set()

    def ask(self, *names: str) -> None:
        new = [n for n in names if n not in self._asked]
        if new:
            self._found.update(refs(self.path, *new))
            self._asked.update(new)

    def get(self, name: str) -> Ref | None:
        self.ask(name)
        return self._found.get(name)


@dataclass(frozen=True)
class ConfigFacts:
    """The two config values a run needs: `user.email` ("" when unset) and the remotes' URLs."""

    user_email: str
    remote_urls: dict[str, str]


def config_facts(path: Path) -> ConfigFacts:
    """`user.email` and every `remote.<name>.url` in one `git config` call (instead of a
    `git config user.email` and a `git remote get-url`)."""
    done = git(
        path, "config", "-z", "--get-regexp", r"^(user\.email|remote\..*\.url)$", check=False
    )
    email = ""
    urls: dict[str, str] = {}
    for record in done.stdout.split("\0"):
        key, _, value = record.partition("\n")
        if key == "user.email":
            email = value.strip()  # the last one wins, as in `git config user.email`
        elif key.startswith("remote.") and key.endswith(".url") and value.strip():
            urls.setdefault(key[len("remote.") : -len(".url")], value.strip())
    return ConfigFacts(email, urls)


def maybe_symref(common_dir: Path, name: str) -> bool:
    """False when the repository certainly has no ref `name` at all (not even a symbolic ref
    to a missing branch, which `for-each-ref` does not list). Symbolic refs are never packed:
    in the files ref store they are loose files. Other ref stores (reftable): True."""
    if (common_dir / "reftable").exists():
        return True
    return os.path.lexists(common_dir / name)


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
