"""Refuse a writable root that holds a hard link to a file outside the writable set.

Landlock checks the path a child opens, not the inode: a file in the worktree that is a hard
link to a file elsewhere makes that file writable. uv installs by hard-linking every file from
its cache (its default link mode on Linux), so a worktree or a `sandbox.writable` folder holding
a uv-made venv, or a cache of uv's, can hand a child ai-sdlc's own code (the sandbox itself) or
the verify interpreter's packages, which then run unconfined (issue 32, case 1). A child cannot
make such a link itself (Landlock refuses links across the writable boundary); ai-sdlc's own
children install with `UV_LINK_MODE=copy` (`homes`); so one can only come from outside, before
the run: checked once per workspace before its first child.

Kept cheap: the workspace is walked (a `stat` of each file), and a link whose other names are
not all inside it is looked for in the private homes and caches only then. A `sandbox.writable`
folder (which may be large: the user's choice) is walked only when ai-sdlc's installation or
the verify interpreter is hard-linked at all, found from their packages' RECORD files first.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ai_sdlc.errors import AiSdlcError, ExitCode

Inode = tuple[int, int]


class HardLinkError(AiSdlcError):
    """A writable root holds a hard link to a file the sandbox must keep read-only."""

    exit_code = ExitCode.INVALID_INPUT


def installation_sites(project: Path) -> list[Path]:
    """ai-sdlc's own package and site-packages, and the project venv's (the verify
    interpreter's) site-packages."""
    import ai_sdlc

    sites = [Path(ai_sdlc.__file__).resolve().parent]
    paths = sysconfig.get_paths()
    sites += [Path(paths[k]) for k in ("purelib", "platlib")]
    sites += sorted((project / ".venv").glob("lib*/python*/site-packages"))
    real = [Path(os.path.realpath(s)) for s in sites if s.is_dir()]
    return list(dict.fromkeys(real))


def linked_installation(sites: Sequence[Path]) -> dict[Inode, str]:
    """The hard-linked files of `sites` (inode → path). A site none of whose RECORD files
    (nor files directly in it) is hard-linked is taken as installed by copy and not walked."""
    found: dict[Inode, str] = {}
    for site in sites:
        if not _probe(site):
            continue
        for path, inode, _links in _linked(site):
            found.setdefault(inode, path)
    return found


def _probe(site: Path) -> bool:
    try:
        entries = list(os.scandir(site))
    except OSError:
        return False
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                if entry.stat(follow_symlinks=False).st_nlink > 1:
                    return True
            elif (
                entry.name.endswith(".dist-info")
                and entry.is_dir(follow_symlinks=False)
                and os.stat(os.path.join(entry.path, "RECORD")).st_nlink > 1
            ):
                return True
        except OSError:
            continue
    return False


def _linked(root: Path | str) -> Iterator[tuple[str, Inode, int]]:
    """(path, inode, link count) of every regular file under `root` with more than one name
    (symbolic links are not followed)."""
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    if st.st_nlink > 1:
                        yield entry.path, (st.st_dev, st.st_ino), st.st_nlink
            except OSError:
                continue


def check(
    workspace: Path,
    extra: Sequence[str],
    private: Sequence[str],
    project: Path,
) -> None:
    """Refuse (HardLinkError) when `workspace`, or one of the `extra` writable roots, holds
    a hard link with a name outside the writable set (`workspace`, `extra`, `private`)."""
    writable = [os.path.realpath(workspace), *extra, *private]
    scanned: list[str] = [os.path.realpath(workspace)]
    installed: dict[Inode, str] = {}
    if extra:
        installed = linked_installation(installation_sites(project))
        installed = {k: v for k, v in installed.items() if not _inside(v, writable)}
        if installed:
            scanned += [r for r in extra if os.path.isdir(r)]
    names: dict[Inode, list[str]] = {}
    counts: dict[Inode, int] = {}
    for root in scanned:
        for path, inode, links in _linked(root):
            if inode in installed:
                raise _refusal(root, path, installed[inode])
            names.setdefault(inode, []).append(path)
            counts[inode] = links
    missing = {i for i, found in names.items() if len(set(found)) < counts[i]}
    if not missing:
        return
    for path, inode, _links in _walk_all(r for r in private if r not in scanned):
        if inode in missing:
            names[inode].append(path)
    for inode in missing:
        if len(set(names[inode])) < counts[inode]:
            path = sorted(names[inode])[0]
            root = next(r for r in scanned if _inside(path, [r]))
            raise _refusal(root, path, None)


def _walk_all(roots: Iterable[str]) -> Iterator[tuple[str, Inode, int]]:
    for root in roots:
        if os.path.isdir(root):
            yield from _linked(root)


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _refusal(root: str, path: str, target: str | None) -> HardLinkError:
    where = f" ({target})" if target else ""
    return HardLinkError(
        f"{path}: a hard link to a file outside the sandbox's writable set{where}, inside the "
        f"writable folder {root}: a sandboxed child writing it would change that file too, "
        "which may be code that runs later unconfined",
        hint="replace it with a copy (for a uv-made venv: `UV_LINK_MODE=copy uv sync "
        "--reinstall`), or take the folder out of sandbox.writable",
    )
