"""What a story's work changed, asked of git's own index and stat cache.

`git status` and `git diff` compare the work tree with the index by file metadata (git's stat
cache) and read only the files whose metadata changed, so what these functions cost follows the
size of the change, not of the repository: hashing every file of a 20,000-file worktree three
times per story took 4.2 s of a 5.4 s run; one `status` there takes about 0.03 s. The same
paths count as work here as in a commit (`staging.committable`): `.ai-sdlc/` folders, ignored
files and scratch files (swap files, bytecode caches, aider's history) never do.

- `work_state`: HEAD and the uncommitted changes, with a content key (HEAD's sha and a digest of
  each dirty file), so two looks at a work tree compare equal exactly when its work is the same.
- `change_set`: the files changed against a base commit (the story's earlier commits and the
  uncommitted changes alike), with line counts; `changed_paths` is its short form.
- `patch_text`: the change as a unified diff, for the review, or None past a size cap.

Diffs are asked with `--no-ext-diff --no-textconv`: no program named by the repository's
config or attributes runs. Outside git (a plain folder) nothing here applies: see
`ai_sdlc.fingerprint`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from ai_sdlc.fingerprint import entry_digest
from ai_sdlc.git import staging
from ai_sdlc.git.run import git

#: Diff options that no config of the repository may change (external diff programs, text
#: conversion filters, colour, rename detection, path prefixes, relative paths).
DIFF_OPTIONS = (
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-renames",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
#: Bytes git reads of a file to tell a binary one (a NUL among them), as git itself does.
BINARY_PROBE = 8000
#: A file larger than this is never read into a patch (its line counts are still shown).
PATCH_FILE_LIMIT = 1_000_000


class FileChange(msgspec.Struct, frozen=True):
    """One file changed against the base: its status (A added, M modified, D deleted, T type
    changed) and lines added and deleted (None for a binary file)."""

    path: str
    status: str
    added: int | None = None
    deleted: int | None = None

    @property
    def binary(self) -> bool:
        return self.added is None


class WorkState(msgspec.Struct, frozen=True):
    """One look at a work tree: HEAD, the committable paths with uncommitted changes (tracked
    and untracked), and the content key of the whole."""

    head: str | None
    dirty: tuple[str, ...]
    untracked: tuple[str, ...]
    key: str


class ChangeSet(msgspec.Struct, frozen=True):
    """The files a work tree changed against `base` (a commit), and its content key."""

    top: Path
    base: str
    state: WorkState
    files: tuple[FileChange, ...]

    @property
    def empty(self) -> bool:
        return not self.files

    @property
    def key(self) -> str:
        return self.state.key

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    @property
    def lines(self) -> tuple[int, int]:
        """(lines added, lines deleted) over the text files."""
        return (sum(f.added or 0 for f in self.files), sum(f.deleted or 0 for f in self.files))

    def summary(self) -> str:
        """`3 files changed (+40 -2)`, or `no file changed`."""
        if self.empty:
            return "no file changed"
        added, deleted = self.lines
        n = len(self.files)
        return f"{n} file{'s' if n != 1 else ''} changed (+{added} -{deleted})"


def work_state(top: Path) -> WorkState:
    """HEAD and the uncommitted work of the work tree at `top` (one `git status`), keyed by
    HEAD's sha and the path, status and content digest of each dirty file: the key changes
    when the work does, and comes back when an edit is undone."""
    snap = staging.snapshot(top)
    dirty: list[str] = []
    untracked: list[str] = []
    marks: dict[str, str] = {}
    for change in snap.changes:
        for path in (change.path, change.orig):
            if not path or staging.is_scratch(path) or path in marks:
                continue
            marks[path] = change.xy + ("S" if change.submodule else "")
            dirty.append(path)
            if change.untracked:
                untracked.append(path)
    digest = hashlib.sha256((snap.head or "").encode())
    for path in sorted(marks):
        digest.update(b"\0" + os.fsencode(path) + b"\0" + marks[path].encode() + b"\0")
        digest.update(entry_digest(top / path))
    return WorkState(snap.head, tuple(dirty), tuple(untracked), digest.hexdigest())


def clean_key(head: str | None) -> str:
    """The key `work_state` gives a work tree at `head` with no uncommitted work (right after
    a commit of all of it)."""
    return hashlib.sha256((head or "").encode()).hexdigest()


def clean_state(head: str | None) -> WorkState:
    """The `work_state` of a work tree at `head` with no uncommitted work."""
    return WorkState(head, (), (), clean_key(head))


def change_set(top: Path, base: str, state: WorkState | None = None) -> ChangeSet:
    """What the work tree at `top` changed against the commit `base`: the commits made since
    (the story's earlier attempts) and the uncommitted changes alike. `state`: a `work_state`
    of `top` just taken (saves a `git status`)."""
    state = state if state is not None else work_state(top)
    files: dict[str, FileChange] = {}
    if state.head != base or len(state.dirty) > len(state.untracked):
        # Nothing uncommitted but scratch: HEAD's tree stands for the work tree (two trees
        # compared: no file of the work tree is looked at).
        against = (base, state.head) if not state.dirty and state.head else (base,)
        out = git(
            top, "diff", "--raw", "--numstat", "-z", *DIFF_OPTIONS, *against, "--",
            *staging.EXCLUDE_STATE,
        ).stdout  # fmt: skip
        for change in parse_raw_numstat(out):
            if not staging.is_scratch(change.path):
                files[change.path] = change
    for path in state.untracked:
        known = files.get(path)
        added = _count_lines(top / path)
        if known is not None and known.status == "D":  # untracked again after `git rm --cached`
            files[path] = FileChange(path, "M", added, known.deleted)
        else:
            files[path] = FileChange(path, "A", added, 0 if added is not None else None)
    ordered = tuple(files[p] for p in sorted(files))
    return ChangeSet(top, base, state, ordered)


def changed_paths(worktree: Path, base: str) -> list[str]:
    """The paths (relative to the work tree's top, `worktree`) changed against the commit
    `base`: added, modified, deleted, committed or not, untracked included; sorted."""
    return change_set(worktree, base).paths


def parse_raw_numstat(text: str) -> list[FileChange]:
    """`git diff --raw --numstat -z` output: the raw records (`:m1 m2 o1 o2 S\\0path\\0`) give
    each file's status, the numstat records (`added\\tdeleted\\tpath\\0`) its line counts."""
    status: dict[str, str] = {}
    counts: dict[str, tuple[int | None, int | None]] = {}
    order: list[str] = []
    tokens = text.split("\0")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.startswith(":"):
            if i >= len(tokens):
                break
            path = tokens[i]
            i += 1
            status[path] = token.split()[-1][:1] if token.split() else "M"
            order.append(path)
        elif token.count("\t") >= 2:
            added, deleted, path = token.split("\t", 2)
            counts[path] = (
                None if added == "-" else int(added),
                None if deleted == "-" else int(deleted),
            )
    return [FileChange(p, status[p], *counts.get(p, (None, None))) for p in order]


def patch_text(change: ChangeSet, *, limit: int) -> str | None:
    """The change as a unified diff (binary files named, not shown), or None when it would be
    longer than `limit` characters: the caller shows the file list instead."""
    if change.empty:
        return ""
    added, deleted = change.lines
    if added + deleted > limit // 2 or len(change.files) > limit // 200:
        return None  # a line of diff is rarely under two characters
    for f in change.files:
        if f.status != "D" and _size(change.top / f.path) > min(limit, PATCH_FILE_LIMIT):
            return None
    untracked = set(change.state.untracked)
    tracked = [f.path for f in change.files if f.path not in untracked]
    parts: list[str] = []
    if tracked:
        spec = [staging.literal(p) for p in tracked]
        out = git(change.top, "diff", "--patch", *DIFF_OPTIONS, change.base, "--", *spec).stdout
        parts.append(out)
    for f in change.files:
        if f.path in untracked:
            parts.append(_new_file_patch(change.top, f))
    text = "".join(part if part.endswith("\n") or not part else part + "\n" for part in parts)
    return text if len(text) <= limit else None


def repository_top(folder: Path) -> Path | None:
    """The top of the git work tree holding `folder`, or None when there is none, or when the
    repository ignores `folder` (a project kept inside another's ignored folder): then the
    work is not git's to track."""
    found = git(folder, "rev-parse", "--show-toplevel", check=False)
    if not found.ok or not found.stdout.strip():
        return None
    top = Path(found.stdout.strip()).resolve()
    if top != folder.resolve() and git(folder, "check-ignore", "-q", ".", check=False).ok:
        return None
    return top


def _count_lines(path: Path) -> int | None:
    """The lines of a new file as git counts them; None for a binary (or unreadable) one."""
    try:
        if path.is_symlink():
            return 1  # git stores the link's target: one line, no newline
        if not path.is_file():
            return None
        with path.open("rb") as handle:
            head = handle.read(BINARY_PROBE)
            if b"\0" in head:
                return None
            lines = head.count(b"\n")
            last = head[-1:]
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return None
    return lines + (1 if last and last != b"\n" else 0)


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _new_file_patch(top: Path, change: FileChange) -> str:
    """The unified diff git shows for a new file, for a file git does not track yet."""
    path = top / change.path
    header = f"diff --git a/{change.path} b/{change.path}\n"
    if path.is_symlink():
        target = os.readlink(path)
        return (
            f"{header}new file mode 120000\n--- /dev/null\n+++ b/{change.path}\n"
            f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
        )
    if change.binary or not path.is_file():
        return f"{header}new file\nBinary files /dev/null and b/{change.path} differ\n"
    mode = "100755" if os.access(path, os.X_OK) else "100644"
    text = path.read_bytes().decode("utf-8", errors="replace")
    if not text:
        return f"{header}new file mode {mode}\n"
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ends with a newline
    body = "".join(f"+{line}\n" for line in lines)
    if not text.endswith("\n"):
        body += "\\ No newline at end of file\n"
    count = "" if len(lines) == 1 else f",{len(lines)}"
    hunk = f"--- /dev/null\n+++ b/{change.path}\n@@ -0,0 +1{count} @@\n"
    return f"{header}new file mode {mode}\n{hunk}{body}"


__all__ = [
    "ChangeSet",
    "FileChange",
    "WorkState",
    "change_set",
    "changed_paths",
    "clean_key",
    "clean_state",
    "patch_text",
    "repository_top",
    "work_state",
]
