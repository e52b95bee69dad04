"""Story worktrees without the project's `.ai-sdlc/` (issue 26): a sparse checkout.

A team that commits its backlog has every `story.md` in the tree; a worktree that checked them
all out would cost more per story as the backlog grows (`git worktree add` beside 20,000
stories: 1.9 s of CPU against 0.3 s beside 1,000), and would show the agent copies of the
backlog that are not the truth (the truth is the main checkout's). So when the story's tree
holds the project's `.ai-sdlc/`, its worktree is added with `--no-checkout`, given a cone-mode
sparse checkout with a sparse index that holds every folder but that one, then checked out:
the backlog stays in the branch's tree (commits name their paths, see `attempts`: they never
delete it) and in the index as one entry, and the checkout no longer follows the backlog
(about 0.02 s of CPU for it and git's first looks, beside 1,000 as beside 20,000). A non-cone
pattern (`/*`, `!/.ai-sdlc/`) needs no folder list but keeps one index entry per file: about
0.3 s more beside 20,000, on every story. A tree without `.ai-sdlc/` is checked out whole, as
before (nothing to leave out).

Cone mode names folders: every folder of the tree (and of the disk) at each level from the top
of the repository down to the project's folder, but the one leading to `.ai-sdlc/`. A folder
that appears later (one the agent made, or one a merge brought in) is outside the cone until
`ensure` widens it, which the workspace calls when it resumes a worktree and before it commits,
saves or rolls back an attempt: nothing of the story's work is left out of a commit or a
checkout. A folder name no pattern can hold (a line break, bytes that are not UTF-8) keeps the
worktree whole. The folders of a commit are asked of git once (`ls-tree`, kept by commit), so
a check where nothing moved costs a look at the disk and no process.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from ai_sdlc.git.repo import RefFiles, UnknownRef, read_git_file
from ai_sdlc.git.run import git

STATE_DIR = ".ai-sdlc"
#: Lines every cone-mode file starts with: the top's own files, none of its folders.
_HEAD = "/*\n!/*/\n"
#: Characters git escapes in a cone pattern (`escaped_pattern` in builtin/sparse-checkout.c).
_GLOB = frozenset("*?[\\")
#: What `git sparse-checkout set --cone --sparse-index` writes in the worktree's own config.
_ENABLED = ("sparsecheckout = true", "sparsecheckoutcone = true", "sparse = true")


class Cone:
    """The cone of a story worktree: the folders above the project's `.ai-sdlc/` (their own
    files only) and every other folder at those levels (whole)."""

    def __init__(self, parents: list[str], folders: list[str], *, needed: bool) -> None:
        self.parents = sorted(parents)
        self.folders = sorted(folders)
        #: Whether the tree holds the project's `.ai-sdlc/` (a committed backlog): only then
        #: is a worktree made sparse (else a full checkout is the same thing).
        self.needed = needed

    def text(self) -> str:
        """The cone as git writes `info/sparse-checkout` (parents, then folders, each sorted)."""
        lines = [_HEAD]
        for parent in self.parents:
            lines.append(f"/{_escaped(parent)}/\n!/{_escaped(parent)}/*/\n")
        lines.extend(f"/{_escaped(folder)}/\n" for folder in self.folders)
        return "".join(lines)


def levels(prefix: PurePosixPath) -> list[tuple[str, str]]:
    """(a folder of the repository, the name left out there), from the top down to the
    project's folder, where `.ai-sdlc` is left out."""
    parts = (*prefix.parts, STATE_DIR)
    return [("/".join(parts[:i]), parts[i]) for i in range(len(parts))]


class SparseTrees:
    """Makes and keeps the story worktrees of the repository whose shared git folder is
    `common_dir` sparse, for the project at `prefix` (its folder inside the repository)."""

    def __init__(self, common_dir: Path, prefix: PurePosixPath) -> None:
        self.common_dir = common_dir
        self.prefix = prefix
        #: (commit, level) → the folders (and submodules) there: a commit's tree never changes.
        self._folders: dict[tuple[str, str], set[str]] = {}

    def plan(self, where: Path, commit: str, disk: Path | None = None) -> Cone | None:
        """The cone for a worktree at `commit` (asked of git in `where`, any work tree of the
        repository) with the folders on `disk` (the worktree, once it exists); None when a
        folder's name cannot be a pattern (then: a full checkout)."""
        parents: list[str] = []
        folders: list[str] = []
        needed = False
        for level, left_out in levels(self.prefix):
            if level:
                parents.append(level)
            in_tree = self._tree_folders(where, commit, level)
            needed = left_out in in_tree
            names = in_tree | (_disk_folders(disk / level) if disk is not None else set())
            names.discard(left_out)
            for name in names:
                if "\n" in name or "\r" in name or "\ufffd" in name or not _utf8(name):
                    return None
                folders.append(f"{level}/{name}" if level else name)
        return Cone(parents, folders, needed=needed)

    def fill(self, top: Path, git_dir: Path, cone: Cone | None) -> bool:
        """Check out the worktree just added with `--no-checkout` (`cone`: `plan` of its
        commit): sparse (True) when the tree holds the project's `.ai-sdlc/` and git and the
        tree's names allow it, else whole."""
        sparse = cone is not None and cone.needed and _configure(top, git_dir, cone, False)
        git(top, "checkout", "--quiet")
        return sparse

    def ensure(self, top: Path, git_dir: Path, head: str | None = None) -> bool:
        """Bring the existing worktree at `top` to the cone it needs now: an older version's
        full worktree made sparse, folders that appeared since added, one never checked out (a
        run stopped between `worktree add` and its checkout) filled. `head`: its HEAD commit
        when the caller just read it. True when git was asked to change anything."""
        head = head or _head(git_dir, self.common_dir) or "HEAD"
        cone = self.plan(top, head, top)
        if not (git_dir / "index").exists():
            self.fill(top, git_dir, cone)
            return True
        enabled = _enabled(git_dir)
        if cone is None:  # a name no pattern can hold: whole
            if enabled:
                git(top, "sparse-checkout", "disable")
            return enabled
        if not enabled and not cone.needed:
            return False
        if enabled and _read(git_dir / "info" / "sparse-checkout") == cone.text():
            return False
        if not _configure(top, git_dir, cone, enabled):
            return False
        git(top, "sparse-checkout", "reapply")
        return True

    def _tree_folders(self, where: Path, commit: str, level: str) -> set[str]:
        key = (commit, level)
        found = self._folders.get(key)
        if found is None:
            found = _tree_folders(where, commit, level)
            if commit != "HEAD":
                self._folders[key] = found
        return found


def _configure(top: Path, git_dir: Path, cone: Cone, enabled: bool) -> bool:
    """Turn the worktree's cone-mode sparse checkout and sparse index on, unless `enabled`
    (git's own `set`: it also moves `core.bare`/`core.worktree` where
    `extensions.worktreeConfig` needs them), then write the exact cone (`set` cannot name a
    folder's own files without one of its subfolders). False when this git cannot (too old):
    the caller keeps a full checkout."""
    if not enabled:
        spec = "".join(f"{folder}\n" for folder in cone.folders)
        argv = ("sparse-checkout", "set", "--cone", "--sparse-index", "--stdin")
        if not git(top, *argv, input=spec, check=False).ok:
            return False
    target = git_dir / "info" / "sparse-checkout"
    if _read(target) != cone.text():
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f"sparse-checkout.ai-sdlc-{os.getpid()}.tmp")
        temporary.write_bytes(cone.text().encode("utf-8"))
        os.replace(temporary, target)
    return True


def _enabled(git_dir: Path) -> bool:
    """Whether the worktree's own config (`config.worktree`) turns the sparse checkout, cone
    mode and sparse index on, as `_configure` left it (read without a process; anything else
    written there counts as off, and `_configure` runs again)."""
    try:
        text = (git_dir / "config.worktree").read_text("utf-8", errors="replace")
    except OSError:
        return False
    lines = {" ".join(line.lower().split()) for line in text.splitlines()}
    return all(wanted in lines for wanted in _ENABLED)


def _head(git_dir: Path, common_dir: Path) -> str | None:
    """The worktree's HEAD commit read from git's files (None: ask git)."""
    try:
        text = read_git_file(git_dir / "HEAD").decode("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("ref: "):
        sha = text.strip()
        return sha if len(sha) in (40, 64) and all(c in "0123456789abcdef" for c in sha) else None
    branch = text[5:].strip()
    try:
        found = RefFiles(common_dir, branch).ref(branch)
    except UnknownRef:
        return None
    return found.sha if found is not None else None


def _tree_folders(where: Path, commit: str, level: str) -> set[str]:
    """The folders (and submodules) at `level` of `commit`'s tree."""
    done = git(where, "ls-tree", "-z", f"{commit}:{level}" if level else commit, check=False)
    if not done.ok:  # the level is not in the tree (a project folder not committed yet)
        return set()
    names: set[str] = set()
    for entry in done.stdout.split("\0"):
        meta, _, name = entry.partition("\t")
        if meta.startswith(("040000 ", "160000 ")):
            names.add(name)
    return names


def _disk_folders(folder: Path) -> set[str]:
    """The folders on disk at `folder` (links not followed: git stores a link as a file)."""
    try:
        with os.scandir(folder) as entries:
            return {e.name for e in entries if e.is_dir(follow_symlinks=False) and e.name != ".git"}
    except OSError:
        return set()


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _escaped(path: str) -> str:
    return "".join(f"\\{c}" if c in _GLOB else c for c in path)


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a name read with surrogate escapes: not UTF-8 on disk
        return False
    return True


__all__ = ["Cone", "SparseTrees", "levels"]
