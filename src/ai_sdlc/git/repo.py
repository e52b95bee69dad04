"""Questions about the user's repository, answered without changing anything in it."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import msgspec

from ai_sdlc.git.run import GitError, git, pinned


class Location(msgspec.Struct, frozen=True):
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


class Ref(msgspec.Struct, frozen=True):
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
    With `common_dir` (the repository's shared git folder), names are first read straight from
    the files ref store (`RefFiles`, no process); git is asked only about those it cannot
    answer for certain. Lives for one operation (a `prepare`, a `publish`), never across
    phases."""

    def __init__(self, path: Path, common_dir: Path | None = None) -> None:
        self.path = path
        self._files = RefFiles.of(path, common_dir) if common_dir is not None else None
        self._found: dict[str, Ref] = {}
        self._asked: set[str] = set()

    def ask(self, *names: str) -> None:
        new = [n for n in dict.fromkeys(names) if n not in self._asked]
        if not new:
            return
        unknown = new
        if self._files is not None:
            unknown = []
            for name in new:
                try:
                    found = self._files.ref(name)
                except UnknownRef:
                    unknown.append(name)
                    continue
                if found is not None:
                    self._found[name] = found
        if unknown:
            self._found.update(refs(self.path, *unknown))
        self._asked.update(new)

    def get(self, name: str) -> Ref | None:
        self.ask(name)
        return self._found.get(name)

    @property
    def from_files(self) -> bool:
        """Whether names are read from the files ref store (see `RefFiles`)."""
        return self._files is not None

    @property
    def head(self) -> str | None:
        """The branch checked out where this snapshot is taken (`main`), read with the ref
        store; None when detached or when refs are not read from files."""
        head = self._files.head if self._files is not None else None
        return head.removeprefix("refs/heads/") if head else None


class UnknownRef(Exception):
    """The files ref store cannot answer for certain: ask git."""


#: A ref name read from files: plain components only (anything else is left to git, which
#: also keeps a name from a story's frontmatter from reaching outside the git folder).
_PLAIN_REF = re.compile(r"refs/(?:[A-Za-z0-9_-][A-Za-z0-9._-]*/)*[A-Za-z0-9_-][A-Za-z0-9._-]*")
#: Refs each worktree has its own of (`git help worktree`, "REFS"): never read here.
_PER_WORKTREE = ("refs/bisect/", "refs/worktree/", "refs/rewritten/")
_OBJECT_ID = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")
#: A `packed-refs` file larger than this is left to git (which binary-searches it).
PACKED_REFS_LIMIT = 1 << 20


class RefFiles:
    """Reads refs the way `git for-each-ref` reports them, straight from the "files" ref store
    (gitrepository-layout(5)): a loose file `<common dir>/<name>` holding an object id or
    `ref: <target>`, else a line `<object id> <name>` of `packed-refs` (a loose ref wins).
    Git writes both by renaming a finished lock file over them, so a read sees a whole value.
    Anything not certain (reftable, a case-insensitive file system, an odd name or content, a
    large `packed-refs`) raises `UnknownRef`, and the caller asks git."""

    def __init__(self, common_dir: Path, head: str | None) -> None:
        self.common_dir = common_dir
        #: The branch the asking work tree's HEAD names (`%(HEAD)`), None when detached.
        self.head = head
        self._packed: bytes | None = None

    @classmethod
    def of(cls, path: Path, common_dir: Path) -> RefFiles | None:
        """The reader for the work tree whose top is `path`; None when git must be asked."""
        try:
            if (common_dir / "reftable").exists() or (common_dir / "head").exists():
                return None  # another ref store, or names that differ in case only collide
            gitdir = _gitdir(path)
            if gitdir is None:
                return None
            head = read_git_file(gitdir / "HEAD").decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if head.startswith("ref: ") and head.endswith("\n"):
            target = head[5:-1]
            if not _plain(target):
                return None
            files = cls(common_dir, target)
            try:
                if files._value(target)[1]:
                    return None  # HEAD names a symbolic ref: let git follow it
            except UnknownRef:
                return None
            return files
        if _OBJECT_ID.fullmatch(head.rstrip("\n").encode("ascii", "replace")):
            return cls(common_dir, None)
        return None

    def ref(self, name: str) -> Ref | None:
        """`name` as `refs` reports it, None when it does not exist (a symbolic ref to a
        missing ref included: `for-each-ref` does not list one)."""
        if not _plain(name) or name.startswith(_PER_WORKTREE):
            raise UnknownRef(name)
        value, symref = self._value(name)
        if value is None:
            return None
        if symref:
            target, second = self._value(value)
            if second:
                raise UnknownRef(name)  # a chain of symbolic refs: let git follow it
            if target is None:
                return None
            return Ref(target, value, name == self.head)
        return Ref(value, "", name == self.head)

    def _value(self, name: str) -> tuple[str | None, bool]:
        """(object id, False) or (target, True) of `name`; (None, False) when it is absent."""
        if not _plain(name):
            raise UnknownRef(name)
        try:
            data = read_git_file(self.common_dir / name)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return self._packed_value(name), False
        except OSError:
            raise UnknownRef(name) from None
        if data.startswith(b"ref: ") and data.endswith(b"\n"):
            return data[5:-1].decode("ascii", "replace"), True
        if data.endswith(b"\n") and _OBJECT_ID.fullmatch(data[:-1]):
            return data[:-1].decode("ascii"), False
        raise UnknownRef(name)

    def _packed_value(self, name: str) -> str | None:
        if self._packed is None:
            packed = self.common_dir / "packed-refs"
            try:
                if packed.stat().st_size > PACKED_REFS_LIMIT:
                    raise UnknownRef(name)
                data = packed.read_bytes()
            except FileNotFoundError:
                data = b""
            except OSError:
                raise UnknownRef(name) from None
            self._packed = b"\n" + data + (b"" if data.endswith(b"\n") or not data else b"\n")
        needle = b" " + name.encode("ascii") + b"\n"
        at = self._packed.find(needle)
        while at != -1:
            start = self._packed.rfind(b"\n", 0, at) + 1
            if _OBJECT_ID.fullmatch(self._packed[start:at]):
                return self._packed[start:at].decode("ascii")
            at = self._packed.find(needle, at + 1)
        return None


def read_git_file(path: Path) -> bytes:
    """The bytes of a file in git's folders, never through a symbolic link (git once stored
    symbolic refs as links: their target's content would be misread as the ref's value)."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)  # no link, no fifo wait
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(mode):
            raise OSError(f"{path} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _plain(name: str) -> bool:
    """A ref name made of plain components, none a lock file or ending in a dot."""
    return (
        _PLAIN_REF.fullmatch(name) is not None
        and ".." not in name
        and not any(part.endswith((".lock", ".")) for part in name.split("/"))
    )


def _gitdir(top: Path) -> Path | None:
    """The git folder of the work tree whose top is `top`: a pinned story worktree's (see
    `run.pin`; never what its `.git` file says), else `.git` itself or where a linked
    worktree's `.git` file points; None when it cannot be told."""
    found = pinned(top)
    if found is not None:
        return found[1] if found[0] == top else None
    dot_git = top / ".git"
    if dot_git.is_dir():
        return dot_git
    text = read_git_file(dot_git).decode("utf-8")
    if not text.startswith("gitdir: ") or not text.endswith("\n") or "\n" in text[:-1]:
        return None
    return top / text[len("gitdir: ") : -1]


def ref_sha(path: Path, common_dir: Path, name: str) -> str | None:
    """The commit `name` points to, read from the files ref store when it can be (else asked of
    `git rev-parse` in the work tree `path`); None when there is no such ref."""
    files = RefFiles.of(path, common_dir)
    if files is not None:
        try:
            found = files.ref(name)
        except UnknownRef:
            pass
        else:
            return found.sha if found is not None else None
    done = git(path, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
    return done.stdout.strip() if done.ok and done.stdout.strip() else None


class ConfigFacts(msgspec.Struct, frozen=True):
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
