"""Story worktrees without the project's `.ai-sdlc/` (issue 26): a sparse checkout.

A team that commits its backlog has every `story.md` in the tree; a worktree that checked them
all out would cost more per story as the backlog grows (`git worktree add` beside 20,000
stories: 1.9 s of CPU against 0.3 s beside 1,000), and would show the agent copies of the
backlog that are not the truth (the truth is the main checkout's). So a story worktree is made
with `--no-checkout`, given a cone-mode sparse checkout with a sparse index that holds every
directory but the project's `.ai-sdlc/`, then checked out: the backlog stays in the branch's
tree (commits never delete it, see `attempts`) and in the index as one entry, and its cost no
longer follows the backlog (about 0.02 s of CPU for the whole checkout and the first looks,
beside 1,000 as beside 20,000). A non-cone pattern (`/*`, `!/.ai-sdlc/`) needs no directory
list but keeps one index entry per file: about 0.3 s more beside 20,000, on every story.

Cone mode names directories: every directory of the tree (and of the disk) at each level from
the top of the repository down to the project's folder, but the one leading to `.ai-sdlc/`.
A directory that appears later (one the agent made, or one a merge brought in) is outside the
cone until `ensure` widens it, which the workspace calls when it creates or resumes a worktree
and before it commits, saves or rolls back an attempt: nothing of the story's work is ever
left out of a commit or a checkout. A directory name a pattern cannot hold (a line break, or
bytes that are not UTF-8) keeps the worktree a full checkout.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

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
        #: Whether HEAD's tree holds the project's `.ai-sdlc/` (a committed backlog): only
        #: then is the worktree made sparse (else a full checkout is the same thing).
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


def cone(top: Path, prefix: PurePosixPath) -> Cone | None:
    """The cone for the worktree at `top` now: the folders of its HEAD's tree and of its disk
    at each level; None when a folder's name cannot be a pattern (then: a full checkout)."""
    parents: list[str] = []
    folders: list[str] = []
    needed = False
    for level, left_out in levels(prefix):
        if level:
            parents.append(level)
        in_tree = _tree_folders(top, level)
        needed = left_out in in_tree
        names = in_tree | _disk_folders(top / level)
        names.discard(left_out)
        for name in names:
            if "\n" in name or "\r" in name or "\ufffd" in name or not _utf8(name):
                return None
            folders.append(f"{level}/{name}" if level else name)
    return Cone(parents, folders, needed=needed)


def fill(top: Path, git_dir: Path, prefix: PurePosixPath) -> bool:
    """Check out the worktree just added with `--no-checkout`: sparse (True) when its tree
    holds the project's `.ai-sdlc/` and git and the tree's names allow it, else whole."""
    found = cone(top, prefix)
    sparse = found is not None and found.needed and _configure(top, git_dir, found)
    git(top, "checkout", "--quiet")
    return sparse


def ensure(top: Path, git_dir: Path, prefix: PurePosixPath) -> bool:
    """Bring the existing worktree at `top` to the cone it needs now: an older version's full
    worktree made sparse, folders that appeared since added, one never checked out (a run
    stopped between `worktree add` and its checkout) filled. True when git was asked to change
    anything. Cheap when nothing changed: one `ls-tree` per level and a look at the disk."""
    if not (git_dir / "index").exists():
        fill(top, git_dir, prefix)
        return True
    found = cone(top, prefix)
    enabled = _enabled(git_dir)
    if found is None:  # a name no pattern can hold: whole
        if enabled:
            git(top, "sparse-checkout", "disable")
        return enabled
    if not enabled and not found.needed:
        return False
    if enabled and _read(git_dir / "info" / "sparse-checkout") == found.text():
        return False
    if not _configure(top, git_dir, found):
        return False
    git(top, "sparse-checkout", "reapply")
    return True


def _configure(top: Path, git_dir: Path, found: Cone) -> bool:
    """Turn the worktree's cone-mode sparse checkout and sparse index on (git's own `set`: it
    also moves `core.bare`/`core.worktree` where `extensions.worktreeConfig` needs them), then
    write the exact cone (git's `set` cannot name a folder's own files without a subfolder).
    False when this git cannot (too old): the caller keeps a full checkout."""
    spec = "".join(f"{folder}\n" for folder in found.folders)
    done = git(
        top,
        "sparse-checkout",
        "set",
        "--cone",
        "--sparse-index",
        "--stdin",
        input=spec,
        check=False,
    )
    if not done.ok:
        return False
    target = git_dir / "info" / "sparse-checkout"
    if _read(target) != found.text():
        temporary = target.with_name(f"sparse-checkout.ai-sdlc-{os.getpid()}.tmp")
        temporary.write_bytes(found.text().encode("utf-8"))
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


def _tree_folders(top: Path, level: str) -> set[str]:
    """The folders (and submodules) at `level` of the worktree's HEAD."""
    done = git(top, "ls-tree", "-z", f"HEAD:{level}" if level else "HEAD", check=False)
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


__all__ = ["Cone", "cone", "ensure", "fill", "levels"]
